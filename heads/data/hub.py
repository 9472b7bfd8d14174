"""Hub datasets, local folders and single files, normalised to a task's columns by configuration alone.

A :class:`Source` says where the data is (a hub id, a local folder laid out like a hub repository, or one
parquet / JSON-lines / CSV file), its configuration (a subfolder of that layout, or the hub dataset's own
configuration), which dataset column feeds each task column (``translation.de``: a key inside a dict column)
and which dataset split, optionally sliced (``train[:5%]``), feeds each of ours. The four paper-scale datasets
of ``HUB`` are presets of these keys; a preset's keys can be overridden one by one.

Classification labels are read from the data (ClassLabel names, or the sorted distinct values of the label
column, or ``data.labels``) and stored as a ClassLabel; unlabelled rows (missing, ``-1``) are dropped and counted.
A ``-1`` is "no label" only where it is that convention: in a ClassLabel column, or where the train split's labels
never hold it (GLUE's hidden test labels). Labels coded ``-1``/``+1`` (``-1`` in train) are two classes: their
sorted values become ids 0..k-1 (``-1`` -> 0, ``1`` -> 1), named ``["-1", "1"]`` or, in that order, by
``data.labels``; ``SOURCE.json`` records the names in id order and each name's value (``label_values``). A key
of a dict column (``translation.fr``) that a row lacks is refused naming the row and the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from datasets import ClassLabel, Dataset, DatasetDict, Features, Translation, Value, load_dataset
from datasets.exceptions import DatasetNotFoundError

from heads.data.corpora import COLUMNS, SPLITS
from heads.io import InputError

log = logging.getLogger(__name__)

MNLI_LABELS = ("entailment", "neutral", "contradiction")
OFFLINE_HINT = "use the offline corpus: data.source=offline"
LABEL = "label"
OPTIONAL = ("text_b",)  # task columns that may be mapped to null (single-sentence classification: text_b = "")
# Data file suffix -> the datasets builder that reads it (and the builder's extra arguments).
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "csv", ".txt": "text"}
TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".csv", ".tsv")


class DataError(InputError):
    """Source data that cannot become a corpus (unreadable file, missing or empty split); names the file."""


class HubUnavailableError(InputError, RuntimeError):
    """A hub dataset could not be reached (no network, offline mode, or no such repository)."""


@dataclass(frozen=True)
class Source:
    """Where a dataset is and how its rows become a task's columns (a preset, or what ``data.*`` says)."""

    task: str
    path: str  # hub id, local folder (hub layout) or local file
    description: str
    config: str | None = None  # the subfolder of the layout / the hub dataset's configuration
    columns: Mapping[str, str | None] = field(default_factory=dict)  # task column -> dataset column (or None)
    splits: Mapping[str, str] = field(default_factory=dict)  # our split -> dataset split, optionally sliced
    labels: tuple[str, ...] | None = None  # label names in id order; None: read from the data
    revision: str | None = None
    name: str | None = None  # the preset's name
    # A hub id read through file patterns of the repository's layout (not its loading script or README configs).
    hub_layout: bool = False

    @property
    def path_local(self) -> bool:
        return _is_local(self.path)


def _identity() -> dict[str, str]:
    return {split: split for split in SPLITS}


HUB: dict[str, Source] = {
    "wikitext103": Source(
        name="wikitext103",
        task="lm",
        path="Salesforce/wikitext",
        description="WikiText-103 (raw), one row per non-empty line",
        config="wikitext-103-raw-v1",
        columns={"text": "text"},
        hub_layout=True,
    ),
    "iwslt2017-de-en": Source(
        name="iwslt2017-de-en",
        task="mt",
        path="IWSLT/iwslt2017",
        description="IWSLT 2017 German -> English (TED talks)",
        config="iwslt2017-de-en",
        columns={"src": "translation.de", "tgt": "translation.en"},
        # The main branch holds a loading script, which datasets>=4 refuses; the hub's own parquet export
        # lives on refs/convert/parquet, as <config>/<split>/NNNN.parquet (older: <config>/<name>-<split>.parquet).
        revision="refs/convert/parquet",
        hub_layout=True,
    ),
    "wmt14-en-fr": Source(
        name="wmt14-en-fr",
        task="mt",
        path="wmt/wmt14",
        description="WMT 2014 English -> French (newstest2013 validation, newstest2014 test)",
        config="fr-en",
        columns={"src": "translation.en", "tgt": "translation.fr"},
        hub_layout=True,
    ),
    "mnli": Source(
        name="mnli",
        task="cls",
        path="nyu-mll/glue",
        # The test splits carry no labels (-1). The matched dev set is the number papers report, so it is the
        # test split here; the mismatched dev set (disjoint, labelled) serves for validation.
        description="GLUE MNLI: test = validation_matched, validation = validation_mismatched",
        config="mnli",
        columns={"text_a": "premise", "text_b": "hypothesis", "label": "label"},
        splits={"train": "train", "validation": "validation_mismatched", "test": "validation_matched"},
        labels=MNLI_LABELS,
        hub_layout=True,
    ),
}
HubDataset = Source  # the name of a preset's type before datasets became configurable
DEFAULT = {"lm": "wikitext103", "mt": "iwslt2017-de-en", "cls": "mnli"}
# What a missing network looks like by the time it leaves datasets/huggingface_hub.
_UNREACHABLE = (ConnectionError, TimeoutError, DatasetNotFoundError, OSError)
_SPLIT = re.compile(r"^\s*([^\[\]\s]+)\s*(?:\[\s*(-?\d+%?)?\s*:\s*(-?\d+%?)?\s*\])?\s*$")


def task_columns(task: str, columns: Mapping[str, str | None] | None = None) -> tuple[str, ...]:
    """The columns of ``task``'s prepared data; a plugin task's are the keys of its ``data.columns``."""
    if task in COLUMNS:
        return COLUMNS[task]
    if columns:
        return tuple(columns)
    raise DataError(f"task {task!r} has no known columns: set data.columns (task column -> dataset column)")


def is_preset(dataset: str | None) -> bool:
    return dataset in HUB


def dataset_for(task: str, dataset: str | None = None) -> Source:
    """The preset ``dataset`` (default: the task's paper-scale default), checked against ``task``."""
    name = dataset or DEFAULT.get(task)
    if name not in HUB:
        raise DataError(f"unknown hub dataset {name!r} for task {task!r}; known: {sorted(HUB)}")
    spec = HUB[name]
    if spec.task != task:
        raise DataError(f"hub dataset {name!r} is for task {spec.task!r}, not {task!r}")
    return spec


def source_for(
    task: str,
    dataset: str | None = None,
    path: str | os.PathLike | None = None,
    config: str | None = None,
    columns: Mapping[str, str | None] | None = None,
    splits: Mapping[str, str] | None = None,
    labels: list[str] | tuple[str, ...] | None = None,
    revision: str | None = None,
) -> Source:
    """The Source for the ``data.*`` keys: a preset (``dataset`` a preset name, or none) with the keys given
    overriding its own one by one, or ``dataset`` as a hub id, local folder or file; ``path`` relocates either."""
    if dataset is None or is_preset(dataset):
        base = dataset_for(task, dataset)
    elif "/" not in str(dataset) and not _is_local(dataset):  # a typo of a preset, most likely
        raise DataError(
            f"unknown hub dataset {dataset!r} for task {task!r}; known: {sorted(HUB)}, or a hub id (owner/name), "
            "or an existing local folder or file"
        )
    else:
        base = Source(task=task, path=str(dataset), description=str(dataset), hub_layout=False)
    where = str(path) if path is not None else base.path
    merged_columns = {c: c for c in task_columns(task, columns)} if base.name is None else {}
    merged_columns.update(base.columns)
    merged_columns.update(columns or {})
    config = config if config is not None else base.config
    preset_splits = dict(base.splits)
    if base.name and _is_local(where) and config and not (Path(where).expanduser() / config).is_dir():
        preset_splits = {}  # a local folder without the preset's layout: its files carry our split names
    merged_splits = {**_identity(), **preset_splits, **(splits or {})}
    spec = replace(
        base,
        path=where,
        config=config,
        columns=merged_columns,
        splits=merged_splits,
        labels=tuple(map(str, labels)) if labels is not None else base.labels,
        revision=revision if revision is not None else base.revision,
    )
    _check_spec(spec)
    return spec


def _check_spec(spec: Source) -> None:
    expected = task_columns(spec.task, spec.columns)
    unknown = sorted(set(spec.columns) - set(expected))
    if unknown:
        raise DataError(f"data.columns: {unknown} are not columns of task {spec.task!r}; its columns: {list(expected)}")
    for column in expected:
        if spec.columns.get(column) is None and column not in OPTIONAL:
            raise DataError(f"data.columns.{column}: task {spec.task!r} needs a dataset column for {column!r}")
    unknown = sorted(set(spec.splits) - set(SPLITS))
    if unknown:
        raise DataError(f"data.splits: {unknown} are not splits; ours are {list(SPLITS)}")
    for ours, theirs in spec.splits.items():
        parse_split(theirs, f"data.splits.{ours}")
    if spec.labels is not None and (len(set(spec.labels)) != len(spec.labels) or len(spec.labels) < 2):
        raise DataError(f"data.labels: {list(spec.labels)} must be two or more distinct label names")


def parse_split(text: str, key: str = "data.splits") -> tuple[str, str | None, str | None]:
    """``"train[:5%]"`` -> ("train", None, "5%"): a dataset split and an optional python-style slice of its rows
    (row counts or percentages, negative from the end)."""
    match = _SPLIT.match(str(text))
    if not match:
        raise DataError(f"{key}: {text!r} is not a split name or a sliced one like 'train[:90%]' or 'train[-500:]'")
    return match.group(1), match.group(2), match.group(3)


def _rows_of(text: str, n: int) -> range:
    """The rows of a split of ``n`` rows that ``text`` (``name[a:b]``) selects; percentages round down."""
    _, start, stop = parse_split(text)

    def bound(b: str | None) -> int | None:
        if b is None or not b.endswith("%"):
            return None if b is None else int(b)
        rows = abs(int(b[:-1])) * n // 100
        return -rows if b.startswith("-") else rows

    return range(n)[slice(bound(start), bound(stop))]


def _is_local(path: str | os.PathLike) -> bool:
    path = str(path)
    return os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path) or path.count("/") > 1


def request_tag(spec: Source) -> str:
    """A short, stable digest of what decides the prepared rows (for the prepared folder's name)."""
    what = {
        "path": spec.path if spec.name is None else spec.name,
        "config": spec.config,
        "columns": dict(spec.columns),
        "splits": dict(spec.splits),
        "labels": list(spec.labels) if spec.labels else None,
        "revision": spec.revision,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:8]


# -- reading ------------------------------------------------------------------------------------------------------
def _split_patterns(split: str) -> list[str]:
    """File patterns of one split in a hub repository's layouts (relative to its configuration's folder)."""
    return [f"{split}-*", f"{split}/*", f"*-{split}.*", f"{split}.*", f"data/{split}-*"]


def _split_hint(ours: str) -> str:
    if ours == "train":
        return "Set data.splits.train to one of them"
    return (f"Set data.splits.{ours} to one of them, or hold out a slice of another: "
            f"data.splits.{ours}=train[-5%:] with data.splits.train=train[:-5%]")


def _data_file(f: Path) -> bool:
    return f.is_file() and f.suffix in BUILDERS and not f.name.startswith(".")


def _split_names(base: Path) -> list[str]:
    """The split names a folder's files suggest (for error messages)."""
    names = set()
    for f in base.rglob("*"):
        if _data_file(f):
            rel = f.relative_to(base)
            stem = rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] != "data" else f.stem
            stem = re.sub(r"-\d+-of-\d+$", "", stem)
            names.add(stem.rsplit("-", 1)[-1] if "-" in stem else stem)
    return sorted(names)


def _local_files(spec: Source, needed: dict[str, list[str]]) -> dict[str, list[Path]]:
    """Their split -> its files in a local folder or file; a clear error for a split without files."""
    where = Path(spec.path).expanduser()
    if where.is_file():
        if where.suffix not in BUILDERS:
            raise DataError(f"{where}: not a data file; use parquet, JSON lines (.jsonl), CSV or TSV")
        missing = {theirs: ours for theirs, ours in needed.items() if theirs != "train"}
        if missing:
            theirs, ours = next(iter(missing.items()))
            raise DataError(
                f"{where} is a single file: its one split is 'train', so there is no split {theirs!r} for "
                f"data.splits.{ours[0]}; slice it instead, e.g. data.splits.{ours[0]}="
                + ("train[:80%]" if ours[0] == "train" else  # the other splits' slices are the hint's example
                   "train[90%:] (and data.splits.train=train[:80%])")
            )
        return {"train": [where]}
    if not where.is_dir():
        raise FileNotFoundError(f"no folder or file {where} for {spec.description}; {OFFLINE_HINT}")
    base = where
    if spec.config and (where / spec.config).is_dir():
        base = where / spec.config  # the configuration's folder of the hub layout; otherwise the folder itself
    out = {}
    for theirs, ours in needed.items():
        files = sorted({f for p in _split_patterns(theirs) for f in base.glob(p) if _data_file(f)})
        if not files:
            subfolders = sorted(d.name for d in where.iterdir() if d.is_dir() and not d.name.startswith("."))
            hint = f"; its subfolders (data.config): {subfolders}" if subfolders and base == where else ""
            raise DataError(
                f"{spec.description}: no files of split {theirs!r} (wanted for data.splits.{ours[0]}) in {base}; "
                f"splits found there: {_split_names(base)}{hint}. {_split_hint(ours[0])}"
            )
        out[theirs] = files
    return out


def _builder(files: dict[str, list[Path]]) -> tuple[str, dict]:
    """The one datasets builder for all the files (and its arguments); mixed formats are refused."""
    kinds = {BUILDERS[f.suffix] for fs in files.values() for f in fs}
    if len(kinds) > 1:
        shown = sorted({f.name for fs in files.values() for f in fs})[:6]
        raise DataError(f"data files of several formats ({sorted(kinds)}: {shown}); keep one format per dataset")
    kind = kinds.pop()
    tsv = any(f.suffix == ".tsv" for fs in files.values() for f in fs)
    return kind, ({"delimiter": "\t"} if tsv else {})


def load_raw(spec: Source, path: str | os.PathLike | None = None, cache_dir: str | None = None) -> DatasetDict:
    """The dataset's splits named by ``spec.splits`` as stored (hub, local folder or file), one load call."""
    if path is not None:
        spec = replace(spec, path=str(path))
    needed: dict[str, list[str]] = {}
    for ours in SPLITS:
        needed.setdefault(parse_split(spec.splits.get(ours, ours))[0], []).append(ours)
    if spec.path_local:
        files = _local_files(spec, needed)
        kind, extra = _builder(files)
        where = Path(spec.path).expanduser()
        try:
            return load_dataset(
                kind, data_files={k: [str(f) for f in v] for k, v in files.items()}, cache_dir=cache_dir, **extra
            )
        except (UnicodeDecodeError, InputError):
            raise
        except Exception as e:  # datasets wraps a parse error in several layers; the innermost says what
            cause = e
            while cause.__cause__ is not None or cause.__context__ is not None:
                cause = cause.__cause__ or cause.__context__
            if isinstance(cause, UnicodeDecodeError):
                raise cause from e
            bad = _first_non_utf8(where)  # the CSV reader reports bad bytes as an Arrow error without the file
            if bad:
                raise DataError(f"{spec.description}: {bad} holds bytes that are not UTF-8; re-encode it as UTF-8 "
                                "(e.g. iconv -f latin1 -t utf-8)") from e
            empty = re.search(r'Instruction "(.+?)" corresponds to no data', str(cause))
            if empty and empty.group(1) in files:  # a file with a header (CSV) but no rows
                shown = ", ".join(str(f) for f in files[empty.group(1)])
                ours = needed[empty.group(1)][0]
                raise DataError(
                    f"{spec.description}: {shown} holds no rows, so the {ours!r} split is empty; "
                    "fix or remove that file"
                ) from e
            what = _first_bad_json(where) or _first_empty(where) or f"{where} ({type(cause).__name__}: {cause})"
            raise DataError(f"{spec.description}: cannot read {what}; fix or remove that file") from e
    try:
        if spec.hub_layout:
            prefix = f"{spec.config}/" if spec.config else ""
            data_files = {t: [prefix + p for p in _split_patterns(t)] for t in needed}
            return load_dataset(spec.path, data_files=data_files, revision=spec.revision, cache_dir=cache_dir)
        return load_dataset(spec.path, spec.config, revision=spec.revision, cache_dir=cache_dir)
    except _UNREACHABLE as e:
        raise HubUnavailableError(
            f"cannot load {spec.description} ({spec.path!r}) from the Hugging Face Hub: {type(e).__name__}: {e}. "
            f"Without network, {OFFLINE_HINT} (or pass a local folder laid out like the hub repository: "
            "data.dataset=<folder>)."
        ) from e


# -- normalising --------------------------------------------------------------------------------------------------
def _has_column(features: Features, column: str) -> bool | None:
    """Whether the features have ``column`` (``translation.de``: a key inside a dict column); None where only the
    rows can say: a dict column whose rows have different keys is typed as free-form JSON (datasets >= 4)."""
    if column in features:
        return True
    head, *keys = column.split(".")
    node: Any = features.get(head)
    for key in keys:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, Translation) and key in node.languages:
            node = Value("string")
        elif type(node).__name__ == "Json":
            return None
        else:
            return False
    return node is not None


def _check_keys(data: Dataset, column: str, rows: range, where: str, split: str, key: str) -> None:
    """Refuse the first row of a free-form JSON column that lacks a key of ``column`` (``translation.fr``), naming
    the row (of the dataset's split, counting from 1) and the key; a null value is a blank text, dropped and
    counted as the others are."""
    head, *keys = column.split(".")
    for n, value in zip(rows, data[head], strict=True):
        for k in keys:
            if value is None:
                break
            if not isinstance(value, dict) or k not in value:
                found = sorted(value) if isinstance(value, dict) else type(value).__name__
                raise DataError(
                    f"{where}: row {n + 1} of split {split!r} has no key {k!r} in column {head!r} "
                    f"(data.columns.{key}={column!r}); that row has {found}. Add it, or remove the row"
                )
            value = value[k]


def _values(batch: Mapping[str, list], column: str) -> list:
    """A batch's values of a dataset column, or of a key inside a dict column (``translation.de``)."""
    if column in batch:
        return list(batch[column])
    head, *keys = column.split(".")
    values = list(batch[head])
    for key in keys:
        values = [v.get(key) if isinstance(v, dict) else None for v in values]
    return values


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _label_value(value: Any, minus_one: bool = False) -> int | str | None:
    """A label as int or str; None when the row has none (missing, NaN, blank, and -1 unless ``minus_one``: -1 is
    then a class, as in labels coded -1/+1); ValueError if unreadable."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float):  # CSV int columns with empty cells come back as floats
        if math.isnan(value):
            return None
        if not value.is_integer():
            raise ValueError(f"{value!r} is not a class (regression targets are not supported)")
        value = int(value)
    if isinstance(value, int):  # bool too
        return None if value == -1 and not minus_one else int(value)
    raise ValueError(f"{value!r} ({type(value).__name__}) is neither a class name nor a class number")


def _minus_one_is_a_class(spec: Source, raw: dict[str, Dataset]) -> bool:
    """Whether -1 is a class of the label column, not the "no label" of GLUE's hidden test labels: the column is
    no ClassLabel (whose convention -1 is) and the train split's rows hold -1 (a split of unlabelled rows never
    trains)."""
    column = spec.columns[LABEL]
    if isinstance(raw["train"].features.get(column), ClassLabel):
        return False
    found = _values(raw["train"].select_columns([column.split(".")[0]]).to_dict(), column)
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1 for v in found)


def _label_set(spec: Source, raw: dict[str, Dataset], where: str) -> tuple[list[str], dict, bool]:
    """Label names in id order, the mapping of label values to ids and whether -1 is a class
    (:func:`_minus_one_is_a_class`), from ``data.labels``, the train split's ClassLabel, or the sorted distinct
    values of every split's label column (-1/+1: ``["-1", "1"]``, ids 0 and 1)."""
    column = spec.columns[LABEL]
    feature = raw["train"].features.get(column)
    minus_one = _minus_one_is_a_class(spec, raw)
    values: set = set()
    for ours, data in raw.items():
        for v in set(_values(data.select_columns([column.split(".")[0]]).to_dict(), column)):
            try:
                values.add(_label_value(v, minus_one))
            except ValueError as e:
                raise DataError(
                    f"{where}: the labels of split {spec.splits[ours]!r} (data.columns.label={column!r}) are "
                    f"unreadable: {e}"
                ) from None
    values.discard(None)
    if len({type(v) for v in values}) > 1:
        raise DataError(f"{where}: label column {column!r} mixes numbers and names: {sorted(map(str, values))[:8]}")
    names = list(spec.labels) if spec.labels else (list(feature.names) if isinstance(feature, ClassLabel) else None)
    numbers = all(isinstance(v, int) for v in values)
    if names is None:
        names = [str(v) for v in sorted(values)]
        to_id = {v: i for i, v in enumerate(sorted(values))}
    elif numbers and spec.labels and values and not values <= set(range(len(names))) and len(values) == len(names):
        # numbers that are not ids 0..k-1 (-1/+1) name data.labels' classes in the order of their values
        to_id = {v: i for i, v in enumerate(sorted(values))}
    else:
        to_id = {i: i for i in range(len(names))} if numbers else {n: i for i, n in enumerate(names)}
    unknown = sorted(map(str, values - set(to_id)))
    if unknown:
        raise DataError(
            f"{where}: labels {unknown[:8]} of column {column!r} are not among the label set {names}; "
            "list every label name in data.labels (in id order)"
        )
    if len(names) < 2:
        raise DataError(f"{where}: label column {column!r} holds the one label {names}: a classifier needs two")
    return names, to_id, minus_one


def normalise(
    raw: DatasetDict, spec: Source, limit: int | None = None, report: dict | None = None
) -> DatasetDict:
    """The task's columns for each of train/validation/test; ``limit`` keeps the first rows of each split.
    ``report`` (a dict) receives the label names and the rows dropped per split."""
    where = f"{spec.description}{f' ({spec.config})' if spec.config else ''}"
    parts: dict[str, Dataset] = {}
    taken: dict[str, list[tuple[str, range]]] = {}
    for ours in SPLITS:
        theirs = spec.splits.get(ours, ours)
        name = parse_split(theirs)[0]
        if name not in raw:
            raise DataError(
                f"{where}: split(s) [{name!r}] missing (data.splits.{ours}={theirs!r}); found {sorted(raw)}. "
                f"{_split_hint(ours)}"
            )
        rows = _rows_of(theirs, len(raw[name]))
        taken.setdefault(name, []).append((ours, rows))
        parts[ours] = raw[name] if len(rows) == len(raw[name]) else raw[name].select(rows)
    shared = shared_with_train(taken)
    if shared and report is not None:
        report["shared_with_train"] = shared
    columns = task_columns(spec.task, spec.columns)
    for ours, data in parts.items():
        for column in columns:
            theirs = spec.columns.get(column)
            found = None if theirs is None else _has_column(data.features, theirs)
            if theirs is not None and found is None:  # keys that differ by row: the rows say
                _check_keys(data, theirs, _taken(taken, ours), where, parse_split(spec.splits.get(ours, ours))[0],
                            column)
            elif theirs is not None and not found:
                raise DataError(
                    f"{where}: split {spec.splits.get(ours, ours)!r} has no column {theirs!r} for "
                    f"data.columns.{column}; its columns: {list(data.features)}"
                )
    labelled = LABEL in columns
    names, to_id, minus_one = _label_set(spec, parts, where) if labelled else (None, {}, False)
    features = Features(
        {c: ClassLabel(names=names) if c == LABEL and labelled else Value("string") for c in columns}
    )
    texts = [c for c in columns if c != LABEL and spec.columns.get(c) is not None]

    def to_columns(batch: dict) -> dict:
        out = {}
        for column in columns:
            theirs = spec.columns.get(column)
            if theirs is None:
                out[column] = [""] * len(next(iter(batch.values())))
            elif column == LABEL:
                out[column] = [to_id.get(_label_value(v, minus_one), -1) for v in _values(batch, theirs)]
            else:
                out[column] = [_text(v) for v in _values(batch, theirs)]
        return out

    out, dropped = {}, {}
    for ours, data in parts.items():
        if limit is not None:
            # Over-read a little: rows dropped below (blank lines, unlabelled pairs) must not starve the limit.
            data = data.select(range(min(len(data), 2 * limit + 100)))
        data = data.map(to_columns, batched=True, remove_columns=data.column_names, features=features)
        n = len(data)
        if labelled:
            data = data.filter(lambda b: [x >= 0 for x in b[LABEL]], batched=True)
        unlabelled = n - len(data)
        if texts:  # a row with a blank text (a pair with a blank side) is no example
            data = data.filter(lambda b: [all(row) for row in zip(*(b[c] for c in texts), strict=True)], batched=True)
        blank = n - unlabelled - len(data)
        if limit is not None:
            data = data.select(range(min(len(data), limit)))
        out[ours] = data
        dropped[ours] = {"unlabelled": unlabelled, "blank": blank}
        if unlabelled or blank:
            log.info("%s, split %s: dropped %d unlabelled and %d blank rows", where, ours, unlabelled, blank)
    if report is not None:
        report["dropped"] = dropped
        if names is not None:
            report["labels"] = names
        if any(k != i for k, i in to_id.items() if isinstance(k, int)):  # numbers that are not their ids
            report["label_values"] = {names[i]: k for k, i in sorted(to_id.items(), key=lambda x: x[1])}
    return DatasetDict(out)


def _taken(taken: dict[str, list[tuple[str, range]]], ours: str) -> range:
    """The rows of its dataset split that our split ``ours`` reads."""
    return next(rows for uses in taken.values() for name, rows in uses if name == ours)


def shared_with_train(taken: dict[str, list[tuple[str, range]]]) -> dict[str, str]:
    """``{our split: the dataset's split}`` for each of validation and test that shares rows with train.

    Not refused here: a model that only evaluates (a pretrained source scored on a user's pairs) may read the
    same rows under every name. Training on them would leak, so a run that trains refuses such data
    (:func:`leak_error`, through the prepared folder's ``SOURCE.json``)."""
    out = {}
    for name, uses in taken.items():
        train = next((rows for ours, rows in uses if ours == "train"), None)
        for ours, rows in uses:
            if train is not None and ours != "train" and set(train) & set(rows):
                out[ours] = name
    return out


def leak_error(shared: dict[str, str]) -> DataError | None:
    """The error a training run gives for splits that share rows with train (None when none do)."""
    if not shared:
        return None
    ours, name = next(iter(sorted(shared.items())))
    return DataError(
        f"data.splits: train and {ours} share rows of the dataset's split {name!r}, so training would see what it "
        f"is judged on; slice it so they do not overlap, e.g. data.splits.train={name}[:-5%] "
        f"data.splits.{ours}={name}[-5%:] (evaluating a trained model on such splits is allowed)"
    )


def load(
    task: str,
    dataset: str | None = None,
    path: str | os.PathLike | None = None,
    limit: int | None = None,
    cache_dir: str | None = None,
    config: str | None = None,
    columns: Mapping[str, str | None] | None = None,
    splits: Mapping[str, str] | None = None,
    labels: list[str] | tuple[str, ...] | None = None,
    revision: str | None = None,
    report: dict | None = None,
) -> DatasetDict:
    """A dataset for ``task`` in its columns: a preset by name, a hub id, a local folder in hub layout or a file
    (``dataset``); ``path`` relocates it to a local folder; the other keys are :func:`source_for`'s."""
    spec = source_for(task, dataset, path, config, columns, splits, labels, revision)
    try:
        return normalise(load_raw(spec, cache_dir=cache_dir), spec, limit=limit, report=report)
    except UnicodeDecodeError as e:
        # The Arrow readers keep the bytes; they fail only when rows are decoded, far from the file.
        where = _first_non_utf8(Path(spec.path).expanduser()) if spec.path_local else None
        raise DataError(
            f"{spec.description}: {where or 'a data file'} holds bytes that are not UTF-8 ({e.reason}, byte "
            f"{e.object[e.start:e.start + 1]!r}); re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from e


def _files(where: Path, pattern: str = "*") -> list[Path]:
    """A local source's files (a single file: itself)."""
    if where.is_file():
        return [where] if where.match(pattern) else []
    return sorted(f for f in where.rglob(pattern) if f.is_file())


def _first_empty(where: Path) -> str | None:
    """``<file> (empty)`` for the first text data file without a single non-blank line."""
    for file in _files(where):
        if file.suffix in TEXT_SUFFIXES and not file.read_bytes().strip():
            return f"{file} (empty: its split would have no rows)"
    return None


def _first_bad_json(where: Path) -> str | None:
    """``<file>, line <n> (<why>)`` of the first JSON-lines row that is not a JSON object."""
    for file in _files(where, "*.jsonl"):
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


def _first_non_utf8(where: Path) -> str | None:
    """``<file>, line <n>`` of the first text line that is not valid UTF-8."""
    if not where.exists():
        return None
    for file in _files(where):
        if file.suffix not in TEXT_SUFFIXES:
            continue
        with file.open("rb") as f:
            for n, line in enumerate(f, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return f"{file}, line {n}"
    return None
