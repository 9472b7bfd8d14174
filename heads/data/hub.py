"""Paper-scale corpora from the Hugging Face Hub, normalised to the columns of the offline corpora.

Every dataset is read with one ``datasets.load_dataset`` call whose ``data_files`` name the hub repository's
own file layout. A local folder laid out like the repository (parquet files, or JSON lines under the same
names) therefore goes through the very same call; a local folder without that layout falls back to the
split names ``datasets`` infers from its file names (``train.jsonl``, ``validation.jsonl``, ``test.jsonl``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value, load_dataset
from datasets.exceptions import DatasetNotFoundError

from heads.data.corpora import SPLITS
from heads.io import InputError

MNLI_LABELS = ("entailment", "neutral", "contradiction")
OFFLINE_HINT = "use the offline corpus: data.source=offline"


class DataError(InputError):
    """Source data that cannot become a corpus (unreadable file, missing or empty split); names the file."""


class HubUnavailableError(InputError, RuntimeError):
    """A hub dataset could not be reached (no network, offline mode, or no such repository)."""


@dataclass(frozen=True)
class HubDataset:
    """One hub dataset: where its files are and how its rows become a task's columns."""

    name: str
    task: str
    path: str
    description: str
    data_files: dict[str, list[str]]  # our split -> glob patterns, relative to the repository root
    normalise: Callable[[dict], dict]  # a batch of raw rows -> a batch in the task's columns
    revision: str | None = None
    keep: Callable[[dict], bool] = field(default=lambda row: True)  # drops rows after normalising


def _wikitext(batch: dict) -> dict:
    # Raw WikiText lines carry a leading space and a trailing newline; blank lines separate paragraphs.
    return {"text": [line.strip() for line in batch["text"]]}


def _translation(src: str, tgt: str) -> Callable[[dict], dict]:
    def normalise(batch: dict) -> dict:
        pairs = batch["translation"]
        return {"src": [p[src].strip() for p in pairs], "tgt": [p[tgt].strip() for p in pairs]}

    return normalise


def _mnli(batch: dict) -> dict:
    return {"text_a": batch["premise"], "text_b": batch["hypothesis"], "label": batch["label"]}


def _layout(prefix: str, **splits: str) -> dict[str, list[str]]:
    return {ours: [f"{prefix}/{theirs}-*"] for ours, theirs in splits.items()}


HUB: dict[str, HubDataset] = {
    "wikitext103": HubDataset(
        name="wikitext103",
        task="lm",
        path="Salesforce/wikitext",
        description="WikiText-103 (raw), one row per non-empty line",
        data_files=_layout("wikitext-103-raw-v1", train="train", validation="validation", test="test"),
        normalise=_wikitext,
        keep=lambda row: bool(row["text"]),
    ),
    "iwslt2017-de-en": HubDataset(
        name="iwslt2017-de-en",
        task="mt",
        path="IWSLT/iwslt2017",
        description="IWSLT 2017 German -> English (TED talks)",
        # The main branch holds a loading script, which datasets>=4 refuses; the hub's own parquet export
        # lives on refs/convert/parquet, as <config>/<split>/NNNN.parquet (older: <config>/<name>-<split>.parquet).
        revision="refs/convert/parquet",
        data_files={split: [f"iwslt2017-de-en/{split}/*", f"iwslt2017-de-en/*-{split}.*"] for split in SPLITS},
        normalise=_translation("de", "en"),
        keep=lambda row: bool(row["src"] and row["tgt"]),
    ),
    "wmt14-en-fr": HubDataset(
        name="wmt14-en-fr",
        task="mt",
        path="wmt/wmt14",
        description="WMT 2014 English -> French (newstest2013 validation, newstest2014 test)",
        data_files=_layout("fr-en", train="train", validation="validation", test="test"),
        normalise=_translation("en", "fr"),
        keep=lambda row: bool(row["src"] and row["tgt"]),
    ),
    "mnli": HubDataset(
        name="mnli",
        task="cls",
        path="nyu-mll/glue",
        # The test splits carry no labels (-1). The matched dev set is the number papers report, so it is the
        # test split here; the mismatched dev set (disjoint, labelled) serves for validation.
        description="GLUE MNLI: test = validation_matched, validation = validation_mismatched",
        data_files=_layout("mnli", train="train", validation="validation_mismatched", test="validation_matched"),
        normalise=_mnli,
        keep=lambda row: row["label"] in (0, 1, 2),
    ),
}
DEFAULT = {"lm": "wikitext103", "mt": "iwslt2017-de-en", "cls": "mnli"}
_FEATURES = {
    "lm": Features({"text": Value("string")}),
    "mt": Features({"src": Value("string"), "tgt": Value("string")}),
    "cls": Features(
        {"text_a": Value("string"), "text_b": Value("string"), "label": ClassLabel(names=list(MNLI_LABELS))}
    ),
}
# What a missing network looks like by the time it leaves datasets/huggingface_hub.
_UNREACHABLE = (ConnectionError, TimeoutError, DatasetNotFoundError, OSError)


def dataset_for(task: str, dataset: str | None = None) -> HubDataset:
    """The hub dataset ``dataset`` (default: the task's paper-scale default), checked against ``task``."""
    name = dataset or DEFAULT.get(task)
    if name not in HUB:
        raise DataError(f"unknown hub dataset {name!r} for task {task!r}; known: {sorted(HUB)}")
    spec = HUB[name]
    if spec.task != task:
        raise DataError(f"hub dataset {name!r} is for task {spec.task!r}, not {task!r}")
    return spec


def _local_layout(folder: Path, spec: HubDataset) -> dict[str, list[str]] | None:
    """The spec's patterns that match files in ``folder``; None when the folder is not in the hub's layout."""
    found = {
        split: [p for p in patterns if any(f.is_file() for f in folder.glob(p))]
        for split, patterns in spec.data_files.items()
    }
    found = {split: patterns for split, patterns in found.items() if patterns}
    return found or None


def _is_local(path: str) -> bool:
    return os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path) or path.count("/") > 1


def load_raw(spec: HubDataset, path: str | os.PathLike | None = None, cache_dir: str | None = None) -> DatasetDict:
    """The dataset as stored (hub or local folder), one ``load_dataset`` call."""
    where = str(path or spec.path)
    kwargs: dict = {"cache_dir": cache_dir}
    if _is_local(where):
        folder = Path(where).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"no folder {folder} for {spec.description}; {OFFLINE_HINT}")
        where = str(folder)
        layout = _local_layout(folder, spec)
        if layout is not None:
            kwargs["data_files"] = layout
        try:
            return load_dataset(where, **kwargs)
        except (UnicodeDecodeError, InputError):
            raise
        except Exception as e:  # datasets wraps a parse error in several layers; the innermost says what
            cause = e
            while cause.__cause__ is not None or cause.__context__ is not None:
                cause = cause.__cause__ or cause.__context__
            where = _first_bad_json(folder) or _first_empty(folder) or f"{folder} ({type(cause).__name__}: {cause})"
            raise DataError(f"{spec.description}: cannot read {where}; fix or remove that file") from e
    kwargs.update(data_files=spec.data_files, revision=spec.revision)
    try:
        return load_dataset(where, **kwargs)
    except _UNREACHABLE as e:
        raise HubUnavailableError(
            f"cannot load {spec.description} ({where!r}) from the Hugging Face Hub: {type(e).__name__}: {e}. "
            f"Without network, {OFFLINE_HINT} (or pass a local folder laid out like the hub repository)."
        ) from e


def normalise(raw: DatasetDict, spec: HubDataset, limit: int | None = None) -> DatasetDict:
    """The task's columns for each of train/validation/test; ``limit`` keeps the first rows of each split."""
    missing = [split for split in SPLITS if split not in raw]
    if missing:
        raise DataError(f"{spec.description}: split(s) {missing} missing; found {sorted(raw)}")
    out = {}
    for split in SPLITS:
        data: Dataset = raw[split]
        if limit is not None:
            # Over-read a little: rows dropped below (blank lines, unlabelled pairs) must not starve the limit.
            data = data.select(range(min(len(data), 2 * limit + 100)))
        data = data.map(spec.normalise, batched=True, remove_columns=data.column_names, features=_FEATURES[spec.task])
        data = data.filter(spec.keep)
        if limit is not None:
            data = data.select(range(min(len(data), limit)))
        out[split] = data
    return DatasetDict(out)


def load(
    task: str,
    dataset: str | None = None,
    path: str | os.PathLike | None = None,
    limit: int | None = None,
    cache_dir: str | None = None,
) -> DatasetDict:
    """A hub dataset for ``task`` in the offline corpora's columns; ``path`` may be a local folder in hub layout."""
    spec = dataset_for(task, dataset)
    try:
        return normalise(load_raw(spec, path, cache_dir=cache_dir), spec, limit=limit)
    except UnicodeDecodeError as e:
        # The Arrow readers keep the bytes; they fail only when rows are decoded, far from the file.
        where = _first_non_utf8(Path(path).expanduser()) if path is not None else None
        raise DataError(
            f"{spec.description}: {where or 'a data file'} holds bytes that are not UTF-8 ({e.reason}, byte "
            f"{e.object[e.start:e.start + 1]!r}); re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from e


TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".csv", ".tsv")


def _first_empty(folder: Path) -> str | None:
    """``<file> (empty)`` for the first text data file under ``folder`` without a single non-blank line."""
    for file in sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix in TEXT_SUFFIXES):
        if not file.read_bytes().strip():
            return f"{file} (empty: its split would have no rows)"
    return None


def _first_bad_json(folder: Path) -> str | None:
    """``<file>, line <n> (<why>)`` of the first JSON-lines row under ``folder`` that is not a JSON object."""
    import json

    for file in sorted(f for f in folder.rglob("*.jsonl") if f.is_file()):
        with file.open("rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as e:
                    return f"{file}, line {n} (not JSON: {e})"
                if not isinstance(row, dict):
                    return f"{file}, line {n} (a {type(row).__name__}, not an object)"
    return None


def _first_non_utf8(folder: Path) -> str | None:
    """``<file>, line <n>`` of the first text line under ``folder`` that is not valid UTF-8."""
    if not folder.is_dir():
        return None
    for file in sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix in TEXT_SUFFIXES):
        with file.open("rb") as f:
            for n, line in enumerate(f, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return f"{file}, line {n}"
    return None
