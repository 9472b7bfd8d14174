"""Write a task's corpus once (Arrow, ``save_to_disk``) with a checksum; load it back only if it is intact.

A prepared folder ``<root>/<task>-<source>[-<dataset>[-<tag>]][-<limit>]/`` holds the DatasetDict,
``SOURCE.json`` (what was prepared; for classification also the label names, in id order) and ``CHECKSUM``
(sha256 of every data file, sorted by path, ``sha256sum -c`` format). The ``<tag>`` (a digest of ``data.config``,
``columns``, ``splits``, ``labels`` and ``revision``) appears for a dataset given as a hub id, folder or file, and
for a preset whose keys were overridden. It is built in a temporary folder and renamed into place with
``CHECKSUM`` already written, so a folder under its final name is always complete; an interrupted prepare leaves
only a hidden temporary folder behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datasets import DatasetDict, load_from_disk

from heads.data import corpora, hub
from heads.data.hub import DataError
from heads.io import InputError, checksum_listing, enclosing_run, is_run_folder, read_json, sha256_file

SOURCES = ("offline", "hub")
# The data.* keys that choose and shape a hub dataset (beyond data.dataset and data.hub_path).
HUB_KEYS = ("config", "columns", "splits", "labels", "revision")
CHECKSUM = "CHECKSUM"
MANIFEST = "SOURCE.json"


class CorruptDataError(InputError, RuntimeError):
    """A prepared folder whose files do not match its checksum (truncated, edited or incomplete)."""


def folder_name(
    task: str, source: str, limit: int | None = None, dataset: str | None = None, tag: str | None = None
) -> str:
    """``<task>-<source>[-<dataset>[-<tag>]][-<limit>]``; a preset dataset appears only when it is not the
    task's default, any other (hub id, folder, file) by its last path component with the request's ``tag``."""
    parts = [task, source]
    if source == "offline" and dataset and dataset != task:  # another shipped corpus in the task's columns
        parts.append(dataset)
    if source == "hub" and dataset and (dataset != hub.DEFAULT.get(task) or tag):
        parts.append(re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(dataset).rstrip("/")).name) or "dataset")
    if source == "hub" and tag:
        parts.append(tag)
    if limit is not None:
        parts.append(str(limit))
    return "-".join(parts)


def _listing(folder: Path) -> str:
    """sha256sum-style lines for the files ``save_to_disk`` wrote (everything present before CHECKSUM)."""
    return checksum_listing(folder, (CHECKSUM, MANIFEST))


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


def _hub_keys(given: Mapping[str, Any]) -> dict[str, Any]:
    """The hub keys actually set (empty mappings and None are unset: today's requests stay as they were)."""
    return {k: given[k] for k in HUB_KEYS if given.get(k) not in (None, {}, [], ())}


def build(
    task: str,
    source: str = "offline",
    limit: int | None = None,
    hub_path: str | os.PathLike | None = None,
    dataset: str | None = None,
    cache_dir: str | None = None,
    report: dict | None = None,
    **keys: Any,
) -> DatasetDict:
    """The normalised DatasetDict, not written anywhere; ``keys``: the hub keys (config, columns, ...)."""
    if source == "offline":
        if hub_path is not None or _hub_keys(keys):
            raise DataError("hub_path (and config, columns, splits, labels, revision) apply to source='hub' only")
        return corpora.build(offline_corpus(task, dataset), limit=limit)
    if source == "hub":
        return hub.load(task, dataset=dataset, path=hub_path, limit=limit, cache_dir=cache_dir, report=report,
                        **_hub_keys(keys))
    raise DataError(f"unknown data source {source!r}; valid: {list(SOURCES)}")


def offline_corpus(task: str, dataset: str | None) -> str:
    """The shipped corpus a task reads offline: its own, or ``dataset`` when that names another corpus with the
    same columns (``cls`` on ``cls_hard``: the harder pairs under the task the claims name)."""
    if dataset is None or dataset == task:
        return task
    if dataset not in corpora.TASKS:
        raise DataError(f"offline dataset {dataset!r} is not a shipped corpus; valid: {list(corpora.TASKS)}")
    if corpora.COLUMNS[dataset] != corpora.COLUMNS.get(task):
        raise DataError(f"offline dataset {dataset!r} has columns {list(corpora.COLUMNS[dataset])}, task {task!r} "
                        f"reads {list(corpora.COLUMNS.get(task, ()))}")
    return dataset


def prepare_for(task: str, data: Any, cache_dir: str | None = None) -> Path:
    """:func:`prepare` with every key of a ``DataConfig`` (``cfg.data``): what a task's ``data_path`` calls."""
    keys = {k: getattr(data, k, None) for k in HUB_KEYS}
    return prepare(task, source=data.source, root=Path(data.root), limit=data.limit, hub_path=data.hub_path,
                   dataset=getattr(data, "dataset", None), cache_dir=cache_dir, **keys)


def _local_source(where: str | os.PathLike | None) -> Path | None:
    """A local folder or file the data is read from (its files are recorded, so edits are noticed)."""
    if where is None:
        return None
    path = Path(where).expanduser()
    return path if path.is_dir() or path.is_file() else None


def prepare(
    task: str,
    source: str = "offline",
    root: str | os.PathLike = "data",
    limit: int | None = None,
    hub_path: str | os.PathLike | None = None,
    dataset: str | None = None,
    cache_dir: str | None = None,
    config: str | None = None,
    columns: Mapping[str, str | None] | None = None,
    splits: Mapping[str, str] | None = None,
    labels: list[str] | None = None,
    revision: str | None = None,
) -> Path:
    """The prepared folder for this corpus, built once; later calls return it without rebuilding.

    With ``source="hub"``, ``dataset`` is a preset name, a hub id, a local folder in hub layout or a file, and
    the other keys are :func:`heads.data.hub.source_for`'s (``data.config``, ``data.columns``, ...)."""
    if source not in SOURCES:
        raise DataError(f"unknown data source {source!r}; valid: {list(SOURCES)}")
    keys = _hub_keys({"config": config, "columns": columns, "splits": splits, "labels": labels,
                      "revision": revision})
    if task not in corpora.TASKS and not (source == "hub" and columns):
        raise DataError(f"unknown task {task!r}; valid: {list(corpora.TASKS)} (another task: source=hub with "
                        "data.columns naming its columns)")
    tag, custom = None, None  # custom: a dataset given as a hub id, folder or file (not a preset)
    if source == "hub":
        spec = hub.source_for(task, dataset, hub_path, **keys)  # refuses bad keys before anything is read
        dataset, custom = (spec.name, None) if spec.name is not None else (dataset, dataset)
        tag = hub.request_tag(spec) if keys or custom else None
    elif hub_path is not None or keys:
        raise DataError("hub_path (and config, columns, splits, labels, revision) apply to source='hub' only")
    else:
        dataset = offline_corpus(task, dataset)
        dataset = None if dataset == task else dataset  # the task's own corpus: the folder it always had
    root = Path(root)
    final = root / folder_name(task, source, limit, dataset, tag)
    manifest = {
        "task": task,
        "source": source,
        "dataset": dataset,
        "limit": limit,
        "hub_path": str(hub_path) if hub_path is not None else None,
    }
    if keys:  # only when set, so folders prepared before these keys existed are still reused
        manifest["hub"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in keys.items()}
    local = _local_source(hub_path) or _local_source(custom)
    if final.exists():
        return _reuse(final, manifest, local)

    if is_run_folder(root) or enclosing_run(root) is not None:  # the rule of every output (heads.outpath)
        run = root if is_run_folder(root) else enclosing_run(root)[0]
        raise DataError(f"data.root {root} lies inside the run folder {run}, which only its run writes; prepare the "
                        "data elsewhere (data.root=resources/data)")
    report: dict = {}
    data = build(task, source, limit=limit, hub_path=hub_path, dataset=dataset, cache_dir=cache_dir, report=report,
                 **keys)
    where = hub_path or custom
    _check_splits(data, f"{task} from {source}{f' {where}' if where else ''} (limit={limit})")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        data.save_to_disk(str(tmp))
        manifest["rows"] = {split: len(data[split]) for split in corpora.SPLITS}
        manifest["columns"] = list(data["train"].column_names)
        label = data["train"].features.get(hub.LABEL)
        if hasattr(label, "names"):  # what a classifier's output size is read from (ids in this order)
            manifest["labels"] = list(label.names)
        if report.get("label_values"):  # the value each label name stands for, where not its id (-1/+1)
            manifest["label_values"] = report["label_values"]
        if report.get("dropped"):
            manifest["dropped"] = report["dropped"]
        if report.get("shared_with_train"):
            manifest["shared_with_train"] = report["shared_with_train"]
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


def _source_listing(where: Path) -> dict[str, Path]:
    """The (non-hidden) files of a local source folder by relative path; a single file by its name."""
    if where.is_file():
        return {where.name: where}
    return {
        f.relative_to(where).as_posix(): f
        for f in sorted(where.rglob("*"))
        if f.is_file() and not any(p.startswith(".") for p in f.relative_to(where).parts)
    }


def source_files(where: Path) -> dict[str, list]:
    """``{relative path: [size, mtime_ns, sha256]}`` of every (non-hidden) file of a local source."""
    out = {}
    for rel, file in _source_listing(where).items():
        st = file.stat()
        out[rel] = [st.st_size, st.st_mtime_ns, sha256_file(file)]
    return out


def _source_changes(where: Path, recorded: dict[str, list]) -> list[str]:
    """Files of ``where`` added, removed or edited since ``recorded``; a file whose size and mtime are
    unchanged is not read again (a copied folder has new mtimes: its contents are hashed and compared)."""
    files = _source_listing(where)
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


def check_trainable(path: str | os.PathLike) -> None:
    """Refuse to train on a prepared folder whose validation or test split shares rows with train."""
    manifest = Path(path) / MANIFEST
    shared = read_json(manifest).get("shared_with_train") if manifest.is_file() else None
    error = hub.leak_error(shared or {})
    if error is not None:
        raise error
