"""Write a task's corpus once (Arrow, ``save_to_disk``) with a checksum; load it back only if it is intact.

A prepared folder ``<root>/<task>-<source>[-<dataset>][-<limit>]/`` holds the DatasetDict, ``SOURCE.json``
(what was prepared) and ``CHECKSUM`` (sha256 of every data file, sorted by path, ``sha256sum -c`` format).
It is built in a temporary folder and renamed into place with ``CHECKSUM`` already written, so a folder under
its final name is always complete; an interrupted prepare leaves only a hidden temporary folder behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from datasets import DatasetDict, load_from_disk

from heads.data import corpora, hub
from heads.data.hub import DataError
from heads.io import InputError, read_json

SOURCES = ("offline", "hub")
CHECKSUM = "CHECKSUM"
MANIFEST = "SOURCE.json"


class CorruptDataError(InputError, RuntimeError):
    """A prepared folder whose files do not match its checksum (truncated, edited or incomplete)."""


def folder_name(task: str, source: str, limit: int | None = None, dataset: str | None = None) -> str:
    """``<task>-<source>[-<dataset>][-<limit>]``; the dataset appears only when it is not the task's default."""
    parts = [task, source]
    if source == "hub" and dataset and dataset != hub.DEFAULT.get(task):
        parts.append(dataset)
    if limit is not None:
        parts.append(str(limit))
    return "-".join(parts)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listing(folder: Path) -> str:
    """sha256sum-style lines for the files ``save_to_disk`` wrote (everything present before CHECKSUM)."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    files = [f for f in files if f not in (CHECKSUM, MANIFEST)]
    return "".join(f"{sha256_file(folder / f)}  {f}\n" for f in files)


def checksum(path: str | os.PathLike) -> str:
    """One digest for a prepared folder (sha256 of its CHECKSUM listing)."""
    return hashlib.sha256((Path(path) / CHECKSUM).read_bytes()).hexdigest()


def verify(path: str | os.PathLike) -> str:
    """Recompute every listed file's sha256; raise ``CorruptDataError`` naming the folder and files that differ."""
    folder = Path(path)
    listing = folder / CHECKSUM
    if not listing.is_file():
        raise CorruptDataError(
            f"{folder}: no {CHECKSUM} file, so not a complete prepared corpus; delete it and prepare again"
        )
    bad = []
    for line in listing.read_text().splitlines():
        expected, name = line.split("  ", 1)
        file = folder / name
        if not file.is_file():
            bad.append(f"{name} (missing)")
        elif sha256_file(file) != expected:
            bad.append(f"{name} (sha256 differs)")
    if bad:
        raise CorruptDataError(
            f"{folder}: prepared data does not match its {CHECKSUM}: {', '.join(bad)}; "
            "delete the folder and prepare again"
        )
    return checksum(folder)


def _check_splits(data: DatasetDict, what: str) -> None:
    for split in corpora.SPLITS:
        if split not in data:
            raise DataError(f"{what}: no {split!r} split (found {sorted(data)})")
        if len(data[split]) == 0:
            raise DataError(f"{what}: the {split!r} split is empty, so nothing could train or be evaluated on it")


def build(
    task: str,
    source: str = "offline",
    limit: int | None = None,
    hub_path: str | os.PathLike | None = None,
    dataset: str | None = None,
    cache_dir: str | None = None,
) -> DatasetDict:
    """The normalised DatasetDict, not written anywhere."""
    if source == "offline":
        if hub_path is not None or dataset is not None:
            raise DataError("hub_path and dataset apply to source='hub' only")
        return corpora.build(task, limit=limit)
    if source == "hub":
        return hub.load(task, dataset=dataset, path=hub_path, limit=limit, cache_dir=cache_dir)
    raise DataError(f"unknown data source {source!r}; valid: {list(SOURCES)}")


def prepare(
    task: str,
    source: str = "offline",
    root: str | os.PathLike = "data",
    limit: int | None = None,
    hub_path: str | os.PathLike | None = None,
    dataset: str | None = None,
    cache_dir: str | None = None,
) -> Path:
    """The prepared folder for this corpus, built once; later calls return it without rebuilding."""
    if task not in corpora.TASKS:
        raise DataError(f"unknown task {task!r}; valid: {list(corpora.TASKS)}")
    if source not in SOURCES:
        raise DataError(f"unknown data source {source!r}; valid: {list(SOURCES)}")
    if source == "hub":
        dataset = hub.dataset_for(task, dataset).name
    elif hub_path is not None or dataset is not None:
        raise DataError("hub_path and dataset apply to source='hub' only")
    root = Path(root)
    final = root / folder_name(task, source, limit, dataset)
    manifest = {
        "task": task,
        "source": source,
        "dataset": dataset,
        "limit": limit,
        "hub_path": str(hub_path) if hub_path is not None else None,
    }
    local = Path(hub_path).expanduser() if hub_path is not None and Path(hub_path).expanduser().is_dir() else None
    if final.exists():
        return _reuse(final, manifest, local)

    data = build(task, source, limit=limit, hub_path=hub_path, dataset=dataset, cache_dir=cache_dir)
    _check_splits(data, f"{task} from {source}{f' {hub_path}' if hub_path else ''} (limit={limit})")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        data.save_to_disk(str(tmp))
        manifest["rows"] = {split: len(data[split]) for split in corpora.SPLITS}
        manifest["columns"] = list(data["train"].column_names)
        if local is not None:
            manifest["source_files"] = source_files(local)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (tmp / CHECKSUM).write_text(_listing(tmp))
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / CHECKSUM).is_file():  # not a concurrent prepare that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def source_files(folder: Path) -> dict[str, list]:
    """``{relative path: [size, mtime_ns, sha256]}`` of every (non-hidden) file of a local source folder."""
    out = {}
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        rel = file.relative_to(folder).as_posix()
        if not any(part.startswith(".") for part in rel.split("/")):
            st = file.stat()
            out[rel] = [st.st_size, st.st_mtime_ns, sha256_file(file)]
    return out


def _source_changes(folder: Path, recorded: dict[str, list]) -> list[str]:
    """Files of ``folder`` added, removed or edited since ``recorded``; a file whose size and mtime are
    unchanged is not read again (a copied folder has new mtimes: its contents are hashed and compared)."""
    files = {
        f.relative_to(folder).as_posix(): f
        for f in folder.rglob("*")
        if f.is_file() and not any(p.startswith(".") for p in f.relative_to(folder).parts)
    }
    changes = [f"{name} removed" for name in sorted(set(recorded) - set(files))]
    changes += [f"{name} added" for name in sorted(set(files) - set(recorded))]
    for name in sorted(set(files) & set(recorded)):
        size, mtime, digest = recorded[name]
        st = files[name].stat()
        if (st.st_size, st.st_mtime_ns) != (size, mtime) and sha256_file(files[name]) != digest:
            changes.append(f"{name} edited")
    return changes


def _reuse(final: Path, manifest: dict, local: Path | None = None) -> Path:
    """An existing folder, if it was prepared from the same request (and, from a local folder, the same files)."""
    if not (final / CHECKSUM).is_file():
        raise CorruptDataError(f"{final} exists without a {CHECKSUM}: not written by prepare(); delete it")
    found = read_json(final / MANIFEST, "a data manifest") if (final / MANIFEST).is_file() else {}
    differs = {k: (found.get(k), v) for k, v in manifest.items() if found.get(k) != v}
    if differs:
        raise DataError(f"{final} was prepared from another request (found, asked): {differs}; use another root")
    if local is not None and "source_files" in found:
        changes = _source_changes(local, found["source_files"])
        if changes:
            shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")
            raise DataError(
                f"{local} changed since {final} was prepared from it ({shown}); delete {final} to prepare it "
                "again (runs trained on the old data then refuse to resume), or use another data.root"
            )
    return final


def load_prepared(path: str | os.PathLike) -> DatasetDict:
    """The DatasetDict in a prepared folder, after checking every file against its CHECKSUM."""
    verify(path)
    data = load_from_disk(str(path))
    if not isinstance(data, DatasetDict):
        raise CorruptDataError(f"{path}: holds a single Dataset, not train/validation/test")
    _check_splits(data, str(path))
    return data
