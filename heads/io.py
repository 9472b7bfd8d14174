"""Atomic writes: a result file is either complete or absent, never half-written."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any


def is_stream(path: str | Path) -> bool:
    """Whether ``path`` is written as a stream, never replaced: a character device or a FIFO (``/dev/null``, a
    pipe), or an open file reached through a process's file-descriptor link (``/dev/stdout`` -> ``/proc/self/
    fd/1``, which may be a log file: appended to, not swapped for a new file under the log's name)."""
    return _stream_kind(Path(path)) is not None


def _stream_kind(path: Path) -> str | None:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "device"
    if not stat.S_ISREG(mode):
        return None
    for _ in range(40):  # the chain of links itself: realpath would jump over /proc's fd link to the file
        if not path.is_symlink():
            return None
        hop = Path(os.path.realpath(path.parent)) / path.name
        if hop.parts[1:2] == ("proc",) and "fd" in hop.parts:
            return "fd"
        path = hop.parent / os.readlink(hop)
    return None


def _write_stream(path: Path, data: bytes) -> Path:
    """Write through a device or FIFO (a FIFO nobody reads is an error, not a hang), or append to the file a
    process's fd link leads to."""
    flags = os.O_WRONLY | os.O_NONBLOCK | (os.O_APPEND if _stream_kind(path) == "fd" else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InputError(f"{path}: a FIFO no process reads; start its reader first") from None
        raise
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return path


def through(path: str | Path) -> Path:
    """``path``, or where it leads when it is a symlink: a link is written through, never replaced."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write to a temp file beside ``path``, fsync, rename into place: complete or absent. A symlink is written
    through (its target replaced, the link kept); a device or FIFO is written as a stream, never replaced."""
    path = Path(path)
    if is_stream(path):
        return _write_stream(path, data)
    given, path = path, through(path)
    if path.is_symlink():
        raise InputError(f"{given}: a symlink loop; give a path that leads somewhere")
    if path.exists() and not path.is_file() and not path.is_dir():
        raise InputError(f"{given}: not a regular file (a block device or socket); write to a file instead")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private (0600); a result gets the mode any new file would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return given


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, data: Any, *, allow_nan: bool = True) -> Path:
    """Indented, keys sorted, atomically; ``allow_nan=False``: strict JSON (a NaN is an error, not ``NaN``)."""
    return write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=allow_nan) + "\n")


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_listing(folder: str | Path, skip: Iterable[str] = ("CHECKSUM", "SOURCE.json")) -> str:
    """``sha256sum``-style lines (``<digest>  <path>``) for every file below ``folder`` but ``skip``, sorted by
    path: what a ``CHECKSUM`` file of a prepared corpus or converted checkpoint holds."""
    folder, skip = Path(folder), set(skip)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return "".join(f"{sha256_file(folder / f)}  {f}\n" for f in files if f not in skip)


class InputError(ValueError):
    """Bad input the user can fix (a file, folder, key or value); the message names it and what to do.
    The command line prints it as one line and exits with status 2."""


class BadFileError(InputError):
    """A file that cannot be read as what it should be (truncated, edited, torn); the message names it."""


def no_file(path: str | Path) -> str:
    """Why ``path`` is not a file to read, in words: a folder named where a file belongs is not missing."""
    return "a folder, not a file" if Path(path).is_dir() else "no such file"


def read_json(path: str | Path, what: str = "JSON") -> Any:
    """The JSON in ``path``; a truncated or edited file is a ``BadFileError`` naming the file and line."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except UnicodeDecodeError as exc:
        raise BadFileError(f"{path}: not {what} (bytes that are not UTF-8 at {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise BadFileError(f"{path}, line {exc.lineno}: not {what} ({exc.msg})") from exc


def read_jsonl(path: str | Path, torn_tail_ok: bool = False) -> list[dict]:
    """JSON lines; a line that is not a JSON object is a ``BadFileError`` naming the file and line.

    ``torn_tail_ok``: drop an unreadable *last* line instead, the trace of a process killed mid-write
    (nothing after the last checkpoint is kept on resume anyway)."""
    path = Path(path)
    if not path.exists():
        return []
    lines = [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    out = []
    for i, (n, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if torn_tail_ok and i == len(lines) - 1:
                break
            raise BadFileError(f"{path}, line {n}: not a JSON object ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise BadFileError(f"{path}, line {n}: not a JSON object ({type(record).__name__})")
        out.append(record)
    return out


def _aside(path: Path) -> Path:
    """Where :func:`replace_dir` keeps the old ``path`` while the new one moves in."""
    return path.with_name(f".{path.name}.old")


def replace_dir(tmp: Path, path: Path) -> Path:
    """Move the finished folder ``tmp`` to ``path``, replacing any old one with no moment of absence
    visible as a half-written folder (the old one is renamed aside first, then removed). A symlinked ``path``
    is written through: the folder it leads to is replaced, the link kept."""
    path = through(path)
    if path.exists():
        old = _aside(path)
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old)
    else:
        tmp.rename(path)
    return path


def clear_stale_temps(path: Path) -> list[Path]:
    """Tidy what a killed writer of ``path`` left beside it; the removed paths. Its half-written temporary
    (``.NAME.`` + the 8 characters ``tempfile`` adds) goes. So does the old copy ``replace_dir`` renamed aside
    (``.NAME.old``), unless ``path`` itself is missing: the kill fell between the two renames, and that old
    copy is then the last complete one, so it is put back. One process writes a given path at a time (a run
    folder belongs to one job, and only rank 0 saves), so none of these is in use."""
    if not path.parent.is_dir():
        return []
    old = _aside(path)
    if not path.exists() and old.is_dir() and not old.is_symlink():
        old.rename(path)
    ours = re.compile(rf"\.{re.escape(path.name)}\.(old|[a-z0-9_]{{8}})")
    stale = [p for p in path.parent.iterdir() if ours.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return stale


def temp_dir_beside(path: Path) -> Path:
    """A fresh hidden folder beside ``path`` to write into before ``replace_dir``; stale ones from a killed
    writer go first, so a resumed run ends with exactly the files an uninterrupted one has. Beside where a
    symlinked ``path`` leads (:func:`replace_dir` renames within that folder)."""
    path = through(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_temps(path)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))


# -- output folders: a command replaces only what it wrote ----------------------------------------------------------
class OutputConflict(InputError):
    """An output folder holding something the command did not write (or the very source it reads)."""


# What a training run folder holds (docs/RUN_LAYOUT.md), and what a model folder holds (safetensors, configs,
# tokenizer files; a pruned model also its pruning.json, eval.json and the evaluation's example-level examples.json).
RUN_ENTRIES = ("config.json", "metrics.jsonl", "events.jsonl", "summary.json", "examples.json", "checkpoint", "model",
               "snapshots")
MODEL_ENTRIES = (
    "config.json", "generation_config.json", "model*.safetensors", "model.safetensors.index.json", "tokenizer*.json",
    "special_tokens_map.json", "added_tokens.json", "vocab.txt", "vocab.json", "merges.txt", "*.model",
    "chat_template.*", "pruning.json", "eval.json", "examples.json",
    "eval.examples.json",
)


def strays(folder: Path, patterns: Iterable[str]) -> list[str]:
    """Entries of ``folder`` that match none of ``patterns`` (nor their hidden temporary names ``.NAME.*``)."""
    patterns = tuple(patterns)
    return sorted(
        name
        for name in os.listdir(folder)
        if not any(fnmatch(name, p) or fnmatch(name, f".{p}.*") for p in patterns)
    )


def check_output_folder(folder: Path, patterns: Iterable[str], command: str, hint: str) -> None:
    """Refuse an existing ``folder`` that is a file or holds entries ``command`` does not write
    (``hint``: what to do instead)."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise OutputConflict(f"{command}: {folder} is a file, not an output folder; {hint}")
    found = strays(folder, patterns)
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise OutputConflict(f"{command}: {folder} holds {shown}, which {command} did not write; {hint}")


# a folder holding one of these is a run folder (a training run's, or a pruned model's evaluated record)
RUN_MARKS = ("metrics.jsonl", "checkpoint", "summary.json")
# a run's parts that only the run itself writes: no command writes into them, --overwrite or not
RUN_OWN = ("checkpoint", "model", "snapshots")
# what prune writes (a model, its record and, with --evaluate, its evaluation): pruning.json marks it as prune's
PRUNE_MARK = "pruning.json"
PRUNE_ENTRIES = (*MODEL_ENTRIES, "summary.json")


def is_run_folder(folder: Path) -> bool:
    return folder.is_dir() and any((folder / mark).exists() for mark in RUN_MARKS)


def enclosing_run(path: Path) -> tuple[Path, Path] | None:
    """The nearest run folder strictly above ``path`` and ``path`` relative to it, else None."""
    path = Path(path).resolve()
    for folder in path.parents:
        if is_run_folder(folder):
            return folder, path.relative_to(folder)
    return None


def check_not_a_record(out: Path, command: str) -> None:
    """Refuse an output path (file or folder) that is a run's own part (``checkpoint/``, ``model/``,
    ``snapshots/`` or anything in them) or one of a run folder's record files: writing there would destroy the
    run (it could never resume, or would report another model), so no flag allows it."""
    for parent in Path(out).absolute().parents:  # below a file nothing can be written: say so before any work
        if parent.exists() and not parent.is_dir():
            raise OutputConflict(f"{command}: --out {out}: {parent} is a file, not a folder")
    found = enclosing_run(out)
    if found is None:
        return
    run, rel = found
    if rel.parts[0] in RUN_OWN:
        raise OutputConflict(f"{command}: --out {out} lies in the run folder {run}'s own {rel.parts[0]}/, which "
                             "only the run writes; write elsewhere")
    if len(rel.parts) == 1 and any(fnmatch(rel.name, p) for p in RUN_ENTRIES):
        raise OutputConflict(f"{command}: --out {out} is the record {rel.name} of the run folder {run}; "
                             "write elsewhere")


def contains(outer: Path, inner: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies inside it (both resolved)."""
    outer, inner = Path(outer).resolve(), Path(inner).resolve()
    return outer == inner or outer in inner.parents
