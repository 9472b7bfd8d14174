"""Tables as data: a replication's ``report.yaml`` declares each table as a small spec over tidy rows.

```yaml
tables:
  memory:                              # the table's stem: memory.csv, memory.md
    title: Training-step memory before and after pruning
    rows: memory                       # which tidy rows (heads.report.rows)
    where: {space: value}              # keep rows whose fields match (a list: any of several mappings)
    by: [task, arm, model]             # one table row per group, in order of first appearance ...
    sort: [task, arm]                  # ... or sorted by these (a site by its place in the model; -x: descending)
    per_seed: [n = count]              # optional: these first, per group and seed; the columns then over seeds
    columns:                           # a group field, or NAMES = HOW [FIELD [ARG]] [where FIELD=VALUE]
      - task
      - n_seeds = count
      - heads = mean heads
      - peak_ratio ci_low ci_high = ci peak_ratio
    formats: {peak_mb: .1f}
    caption: >-
      ...
  speed:                               # no spec: the table is built in (heads.report.tables.BUILT_IN)
```

Aggregates over a group's rows (a failed run's row counts in ``n_ok``/``n_failed`` and ``first`` only):
``count`` (rows; of FIELD: those with a number), ``seeds`` (distinct seeds), ``n_ok``, ``n_failed``, ``mean``,
``median``, ``max``, ``first``, ``only`` (the one value all rows share, else empty), ``mode`` (the most frequent; ties:
the smallest), ``tally`` (``k/n``: true of those with a value), ``share`` (the share of rows where it is true),
``majority`` (``*`` when true in more than half of the rows), ``ci FIELD [RANGE]`` (mean, Student-t 95 %
interval: three names; RANGE a bounded metric of heads.task_metrics, or a field naming it), ``vs_baseline FIELD``
(the mean over seeds of FIELD over the same seed's baseline run's) and ``over_baseline FIELD`` (the mean of
FIELD over the mean of the task's baseline runs').
"""

from __future__ import annotations

import fnmatch
import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heads.report.collect import BASELINE, RunTree, mean, number
from heads.report.fmt import Table
from heads.report.kinds import KINDS
from heads.report.rows import rows
from heads.report.site_labels import site_order
from heads.report.stats import estimate
from heads.task_metrics import RANGE

SPEC_KEYS = {"title", "rows", "where", "by", "per_seed", "sort", "columns", "formats", "caption", "skip_task_unless"}


class TableSpecError(ValueError):
    """A table spec in a report.yaml that does not follow the vocabulary."""


def ci(values: Sequence[Any], metric: str | None = None) -> list[float | None]:
    """``[mean, ci_low, ci_high]`` over the non-missing values; with a bounded ``metric`` (heads.task_metrics.RANGE)
    the interval is clipped to the values the metric can take."""
    est = estimate([v for v in values if number(v) is not None])  # a NaN in one row is not a crash of the table
    low, high = est.ci_low, est.ci_high
    if isinstance(metric, str) and metric in RANGE and low is not None and high is not None:
        floor, ceiling = RANGE[metric]
        low, high = max(low, floor), min(high, ceiling)
    return [est.mean, low, high]


def group_by(items: Iterable[Any], key: Callable[[Any], Hashable]) -> dict[Any, list]:
    """``items`` in groups by ``key``, the groups in order of first appearance."""
    out: dict[Any, list] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def _numbers(group: list[dict], name: str) -> list[float]:
    return [r[name] for r in group if not r.get("failed") and number(r.get(name)) is not None]


def _baseline(group: list[dict], everything: list[dict]) -> list[dict]:
    """The group's task's baseline runs that finished."""
    return [r for r in everything if r["task"] == group[0]["task"] and not r.get("failed")
            and all(r.get(k) == v for k, v in BASELINE.items())]


def _started(group: list[dict], everything: list[dict]) -> list[dict]:
    """The runs that start from one of the group's (their run-sheet ``from_run`` is its label, its ``path``)."""
    labels = {r.get("path") for r in group} - {None}
    return [r for r in everything if r.get("from_run") in labels]


def _task_runs(group: list[dict], everything: list[dict]) -> list[dict]:
    """Every finished run of the group's task (narrowed by a ``where``: another variant of the same task)."""
    return [r for r in everything if r["task"] == group[0]["task"] and not r.get("failed")]


OTHERS = {"baseline": _baseline, "started": _started, "task": _task_runs}


def _vs_baseline(group: list[dict], name: str, everything: list[dict]) -> float | None:
    base = {r["seed"]: r.get(name) for r in _baseline(group, everything)}
    return mean([r[name] / base[r["seed"]] for r in group if not r.get("failed") and r.get(name)
                 and base.get(r["seed"])])


def _over_baseline(group: list[dict], name: str, everything: list[dict]) -> float | None:
    mine, base = mean(_numbers(group, name)), mean(_numbers(_baseline(group, everything), name))
    return mine / base if mine and base else None


def _scalars(group: list[dict], name: str) -> list[Any]:
    """The group's values of ``name`` that a set can hold (a corrupt mapping or list in one row is left out)."""
    return [r[name] for r in group if isinstance(r.get(name), (str, int, float))]


def _tally(group: list[dict], name: str) -> str:
    found = [r[name] for r in group if not r.get("failed") and r.get(name) is not None]
    return f"{sum(bool(v) for v in found)}/{len(found)}"


AGGREGATES: dict[str, Callable[..., Any]] = {
    "count": lambda g, name=None, *_: len(g) if name is None else len(_numbers(g, name)),
    "seeds": lambda g, *_: len({r["seed"] for r in g}),
    "n_ok": lambda g, *_: sum(not r.get("failed") for r in g),
    "n_failed": lambda g, *_: sum(bool(r.get("failed")) for r in g),
    "mean": lambda g, name, *_: mean(_numbers(g, name)),
    "median": lambda g, name, *_: statistics.median(v) if (v := _numbers(g, name)) else None,
    "max": lambda g, name, *_: max(v) if (v := _numbers(g, name)) else None,
    "first": lambda g, name, *_: g[0].get(name),
    "only": lambda g, name, *_: v.pop() if len(v := set(_scalars(g, name))) == 1 else None,
    "mode": lambda g, name, *_: min(c, key=lambda h: (-c[h], isinstance(h, str), h)) if (c := Counter(
        _scalars(g, name))) else None,
    "tally": lambda g, name, *_: _tally(g, name),
    "share": lambda g, name, *_: sum(bool(r.get(name)) for r in g) / len(g) if g else None,
    "majority": lambda g, name, *_: "*" if 2 * sum(bool(r.get(name)) for r in g) > len(g) else "",
    "ci": lambda g, name, metric=None, *_: ci(_numbers(g, name), g[0].get(metric, metric) if g and metric else metric),
    "vs_baseline": _vs_baseline, "over_baseline": _over_baseline,
}
BASELINED = ("vs_baseline", "over_baseline")  # aggregates that also read the task's baseline runs


@dataclass(frozen=True)
class Column:
    """``names = how [field [arg]] [of baseline|started|task] [or fallback] [where key=value ...]`` or a group
    field copied from the group's first row. ``of``: over the task's baseline runs, the runs started from the
    group's (its ``from_run``: a scratch run at a pruned layout), or every run of the task (with ``where``: another
    variant, such as a control); ``or``: the first row's ``fallback`` field where the aggregate gives nothing
    (None or 0)."""

    names: tuple[str, ...]
    how: str = "first"
    args: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)
    fallback: str | None = None
    of: str | None = None  # aggregate other runs: its task's ``baseline``, those ``started``, or the whole ``task``

    @classmethod
    def parse(cls, text: str, where: str) -> Column:
        names, sep, rest = (str(text).partition("=") if "=" in str(text) else (str(text), "", ""))
        if not sep:
            return cls((names.strip(),), "first", (names.strip(),))
        words, _, cond = rest.partition(" where ")
        words, _, fallback = words.partition(" or ")
        words, _, of = words.partition(" of ")
        if of and of.strip() not in OTHERS:
            raise TableSpecError(f"{where}: {text!r}: 'of' takes one of {sorted(OTHERS)}")
        how, *args = words.split()
        if how not in AGGREGATES:
            raise TableSpecError(f"{where}: {text!r}: {how!r} is not one of {sorted(AGGREGATES)}")
        if not args and how not in ("count", "seeds", "n_ok", "n_failed"):
            raise TableSpecError(f"{where}: {text!r}: {how} needs the field it aggregates")
        if (how == "ci") != (len(names.split()) == 3):
            raise TableSpecError(f"{where}: {text!r}: ci gives three columns (mean, low, high), the rest one")
        bad = [c for c in cond.split() if "=" not in c.strip("=")]
        if bad:
            raise TableSpecError(f"{where}: {text!r}: 'where' takes KEY=VALUE words, not {bad}")
        filters = dict(c.split("=", 1) for c in cond.split())
        return cls(tuple(names.split()), how, tuple(args), filters, fallback.strip() or None, of.strip() or None)

    def values(self, group: list[dict], everything: list[dict]) -> list[Any]:
        group = [r for r in (OTHERS[self.of](group, everything) if self.of else group) if _match(r, self.where)]
        if not group and self.how in ("first", *BASELINED):
            return [None]
        out = AGGREGATES[self.how](group, *self.args, *((everything,) if self.how in BASELINED else ()))
        if self.fallback and not out and group:
            out = group[0].get(self.fallback)
        return list(out) if self.how == "ci" else [out]


def _match(row: Mapping, want: Mapping) -> bool:
    """A row's fields against a filter: a list (any of), a glob, ``>x`` / ``<x``, else the value (as text)."""
    for key, value in want.items():
        have = row.get(key)
        if isinstance(value, list):
            if have not in value:
                return False
        elif isinstance(value, str) and value[:1] in "<>" and value[1:]:
            if not isinstance(have, (int, float)) or not (have > float(value[1:]) if value[0] == ">"
                                                         else have < float(value[1:])):
                return False
        elif isinstance(value, str) and any(c in value for c in "*?["):
            if not fnmatch.fnmatchcase(str(have), value):
                return False
        elif have != value and str(have) != str(value):
            return False
    return True


def _reads(columns: Sequence[Column]) -> set[str]:
    """The row fields columns read: each aggregate's field, its filters and its fallback."""
    return {f for c in columns for f in (*c.args[:1], *c.where, *([c.fallback] if c.fallback else []))}


def _sort_key(row: dict, keys: Sequence[str]) -> tuple:
    """Sites by their place in the model; ``-key``: descending (numbers and truth values); a missing value last."""
    out: list = []
    for k in keys:
        v = row.get(k.lstrip("-"))
        if k.startswith("-") and v is not None:
            v = -v
        out.append((v is None, site_order(v) if k == "site" and v is not None else v if v is not None else 0))
    return tuple(out)


def _check_types(raw: Mapping, where: str) -> None:
    """Each key of a table spec of the type it is read as: a string where a list belongs would be read letter by
    letter (``by: task`` as the fields t, a, s, k), a list where a mapping belongs fails deep in the build."""
    def strings(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    def mapping(value: Any) -> bool:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)

    wanted = {"by": (strings, "a list of field names"), "columns": (strings, "a list of columns (text)"),
              "per_seed": (strings, "a list of columns (text)"), "sort": (strings, "a list of field names"),
              "formats": (mapping, "a mapping of column to format ({peak_mb: .1f})"),
              "skip_task_unless": (mapping, "a mapping of field to value"),
              "where": (lambda v: mapping(v) or (isinstance(v, list) and all(map(mapping, v))),
                        "a mapping of field to value, or a list of them"),
              "title": (lambda v: isinstance(v, str), "text"), "caption": (lambda v: isinstance(v, str), "text")}
    for key, (ok, what) in wanted.items():
        if raw.get(key) is not None and not ok(raw[key]):
            raise TableSpecError(f"{where}: {key} must be {what}, got {raw[key]!r}")
    formats = raw.get("formats") or {}
    bad = {k: v for k, v in formats.items() if not isinstance(v, str)}
    if bad:
        raise TableSpecError(f"{where}: formats take a format's text (.1f, .3g), got {bad}")


@dataclass(frozen=True)
class TableSpec:
    """One declared table."""

    name: str
    title: str
    rows: str
    columns: tuple[Column, ...]
    by: tuple[str, ...]
    per_seed: tuple[Column, ...] = ()
    where: tuple[dict, ...] = ()
    sort: tuple[str, ...] = ()
    formats: dict = field(default_factory=dict)
    caption: str = ""
    skip_task_unless: dict = field(default_factory=dict)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The names of the columns the table has, in order."""
        return tuple(n for c in self.columns for n in c.names)

    @classmethod
    def parse(cls, name: str, raw: Any, where: str) -> TableSpec:
        where = f"{where}: table {name}"
        if not isinstance(raw, Mapping):
            raise TableSpecError(f"{where}: must be a mapping (or empty, for a built-in table)")
        unknown = sorted(set(raw) - SPEC_KEYS)
        missing = [k for k in ("title", "rows", "by", "columns") if k not in raw]
        if unknown or missing:
            raise TableSpecError(f"{where}: unknown keys {unknown}, missing {missing}; known: {sorted(SPEC_KEYS)}")
        if not isinstance(raw["rows"], str) or raw["rows"] not in ("runs", *KINDS):
            raise TableSpecError(f"{where}: rows {raw['rows']!r} is not one of {['runs', *KINDS]}")
        _check_types(raw, where)
        filters = raw.get("where") or []
        per_seed = tuple(Column.parse(c, where) for c in raw.get("per_seed") or ())
        columns = tuple(Column.parse(c, where) for c in raw["columns"])
        unmade = _reads(columns) - {*raw["by"], "seed", *(n for c in per_seed for n in c.names)} if per_seed else ()
        if unmade:
            raise TableSpecError(f"{where}: columns read {sorted(unmade)}, which neither by nor per_seed gives")
        return cls(name, str(raw["title"]), str(raw["rows"]), columns, tuple(raw["by"]), per_seed,
                   tuple(filters if isinstance(filters, list) else [filters]),
                   tuple(raw.get("sort") or ()), dict(raw.get("formats") or {}), " ".join(str(raw.get(
                       "caption", "")).split()), dict(raw.get("skip_task_unless") or {}))

    def unknown_fields(self, found: list[dict]) -> list[str]:
        """Fields the spec reads that no row has: a typo gives an empty column, not an error, so say so."""
        have = {k for r in found for k in r}
        wanted = {*self.by, *(k for w in self.where for k in w), *self.skip_task_unless,
                  *_reads(self.per_seed or self.columns)}
        return [f"table {self.name}: no {self.rows} row has {f!r}, so what reads it stays empty (a typo in "
                "report.yaml, or results from before the field was written?)" for f in sorted(wanted - have)] \
            if found else []

    def build(self, tree: RunTree) -> Table:
        """The table over ``tree``: its rows filtered, grouped, ordered and aggregated."""
        everything = rows(tree, self.rows)
        tree.problems += self.unknown_fields(everything)
        kept = [r for r in everything if not self.where or any(_match(r, w) for w in self.where)]
        if self.skip_task_unless:
            tasks = {r["task"] for r in kept if _match(r, self.skip_task_unless)}
            kept = [r for r in kept if r["task"] in tasks]
        if self.per_seed:  # first each seed's value in each group, then the columns over seeds
            seeded = group_by(kept, lambda r: (*(r.get(k) for k in self.by), r["seed"]))
            names = [n for c in self.per_seed for n in c.names]
            kept = [{**dict(zip((*self.by, "seed"), key, strict=True)), **dict(zip(names, [
                v for c in self.per_seed for v in c.values(g, everything)], strict=True))} for key, g in seeded.items()]
        groups = group_by(kept, lambda r: tuple(r.get(k) for k in self.by))
        columns = [n for c in self.columns for n in c.names]
        table_rows = [([v for c in self.columns for v in c.values(g, everything)], g[0]) for g in groups.values()]
        if self.sort:  # by the table's own column of that name, else by the group's first row
            table_rows.sort(key=lambda rf: _sort_key({**rf[1], **dict(zip(columns, rf[0], strict=True))}, self.sort))
        return Table(self.title, columns, [r for r, _ in table_rows], formats=dict(self.formats),
                     caption=self.caption)
