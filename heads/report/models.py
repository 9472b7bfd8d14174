"""The cross-model table: each model's layout beside what masking its heads cost, read from the masking tables
the replications rendered (``masking.csv``), so it regenerates from committed results without their run trees.

A row is one model, unit (a query head, or a key/value group: what physical pruning of grouped-query attention
removes) and order (importance, or the oracle: greedy by measured cost); its columns the relative loss change at
each share of the heads closed, with the replicates' 95 % interval."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heads.report.fmt import Table

RATIOS = (0.3, 0.5)


@dataclass(frozen=True)
class Layout:
    """What a model's attention looks like: its sites' query heads and key/value groups, and its size."""

    model: str
    task: str
    params: int
    sites: int
    heads: int  # query heads in all
    groups: int  # key/value groups in all (a multi-head model's are its heads)

    @property
    def attention(self) -> str:
        if self.groups == self.heads:
            return "MHA"
        return "MQA" if self.groups == self.sites else "GQA"


def layout_of(model: Any, name: str, task: str) -> Layout:
    """``model``'s layout from its attention sites (every family heads supports) and its parameter count."""
    from heads.surgery import sites

    found = list(sites(model))
    return Layout(name, task, sum(p.numel() for p in model.parameters()), len(found),
                  sum(s.num_heads for s in found), sum(s.num_kv_heads for s in found))


def load_layout(source: str, task: str, preset: str = "pretrained", data_root: str | None = None) -> Layout:
    """The layout of ``source`` (a shipped name or a model folder) as ``task`` loads it at ``preset``."""
    from heads.resolve import resolve
    from heads.tasks import get_task

    overrides = [f"model.source={source}"] + ([f"data.root={data_root}"] if data_root else [])
    cfg = resolve(task, preset, None, overrides)
    t = get_task(task)
    return layout_of(t.build_model(cfg, t.tokenizer(cfg)), source, task)


def masking_rows(path: Path) -> list[dict[str, str]]:
    """The rows of one rendered masking table; a missing file is refused in one line."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no masking table (render the replication first: heads report)")
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _cell(row: Mapping[str, str] | None) -> tuple[float | None, float | None, float | None]:
    if row is None:
        return None, None, None
    return tuple(float(row[k]) if row.get(k) not in (None, "") else None  # type: ignore[return-value]
                 for k in ("relative", "relative_ci_low", "relative_ci_high"))


LAYOUT_COLUMNS = ["model", "task", "attention", "params", "sites", "heads", "groups"]
KEY_COLUMNS = ["job", "unit", "order"]
COUNTS = frozenset({"params", "sites", "heads", "groups", "replicates"})  # whole numbers; other measures are floats


def columns_for(ratios: Sequence[float] = RATIOS) -> list[str]:
    """The cross-model table's columns: the layout, the row's key, then each share's cost and interval."""
    columns = [*LAYOUT_COLUMNS, *KEY_COLUMNS, "replicates"]
    for r in ratios:
        pct = f"{round(r * 100)}"
        columns += [f"cost_{pct}", f"cost_{pct}_ci_low", f"cost_{pct}_ci_high"]
    return columns + list(REMOVABLE) + list(REDUNDANT)


# What pruning step by step removes before the model's task notices, beside what masking a fixed share cost (the same
# for each of its rows): the largest share of its heads pruned in importance order, 5 % at a time, before its metric
# falls past the budget its replication's removable claim reads (B3: a relative loss of the task's metric), mean
# over shards with its interval, as that claim's ledger row has it; empty where the ledger judged no such claim on
# the model's task.
REMOVABLE = ("removable", "removable_ci_low", "removable_ci_high")
REMOVABLE_QUANTITY = "curve/importance:removable@"  # the ledger's quantity column: what the claim measured


def removable_of(folder: Path, task: str) -> tuple[float | None, float | None, float | None]:
    """The removable share of ``task``'s model as ``folder``'s ledger (claims.csv) measured it, or Nones."""
    path = folder / "claims.csv"
    if not path.is_file():
        return None, None, None
    with path.open(newline="") as f:
        found = [r for r in csv.DictReader(f) if r.get("task") == task and r.get("effect")
                 and (r.get("quantity") or "").startswith(REMOVABLE_QUANTITY)]
    if len(found) > 1:
        raise ValueError(f"{path}: {len(found)} removable claims on {task!r} ({', '.join(r['claim'] for r in found)});"
                         " expected at most one")
    if not found:
        return None, None, None
    return tuple(float(found[0][k]) if found[0][k] else None  # type: ignore[return-value]
                 for k in ("effect", "ci_low", "ci_high"))


# The model's redundancy, beside what masking cost (the same for each of its rows): the share of its query heads
# with a near-duplicate sibling (heads redundancy: cosine >= its threshold between their mean-pooled contributions
# to the residual stream), mean over shards with its interval, from the redundancy table rendered beside its masking
# table; empty for a model whose replication measures none, or whose positive control the measure did not find.
REDUNDANT = ("redundant_heads", "redundant_heads_ci_low", "redundant_heads_ci_high")
REDUNDANCY_ROW = {"arm": "base", "unit": "head", "space": "residual", "pooling": "mean"}


def redundancy_of(folder: Path) -> tuple[float | None, float | None, float | None]:
    """The share of redundant query heads (:data:`REDUNDANCY_ROW`) in ``folder``'s redundancy table, or Nones."""
    path = folder / "redundancy.csv"
    if not path.is_file():
        return None, None, None
    with path.open(newline="") as f:
        found = [r for r in csv.DictReader(f) if all(r.get(k) == v for k, v in REDUNDANCY_ROW.items())]
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} rows of {REDUNDANCY_ROW}; expected one")
    row = found[0]
    control, threshold = row.get("control_similarity"), row.get("threshold")
    if control and threshold and float(control) < float(threshold):
        # the positive control (a head planted as a copy of its sibling) was not found: a share of zero would say
        # the measure saw no duplicate, when it could not have seen one
        return None, None, None
    return tuple(float(row[k]) if row[k] else None  # type: ignore[return-value]
                 for k in ("redundancy_ratio", "ci_low", "ci_high"))


def earlier_rows(path: Path, ratios: Sequence[float] = RATIOS) -> list[list[Any]]:
    """The rows of a cross-model table rendered before (one model's battery: ``results/<preset>/<model>/
    models.csv``), typed as :func:`cross_model_table` makes them; a missing file or other columns are refused."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no cross-model table (render the model's battery first: heads models)")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        if header != columns_for(ratios):
            raise ValueError(f"{path}: columns {header} are not the cross-model table's {columns_for(ratios)}")
        return [[_typed(c, v) for c, v in zip(header, row, strict=True)] for row in reader]


def _typed(column: str, value: str) -> Any:
    if value == "" or column in LAYOUT_COLUMNS[:3] or column in KEY_COLUMNS:
        return None if value == "" else value
    return int(value) if column in COUNTS else float(value)


def cross_model_table(models: Sequence[tuple[Layout, list[dict[str, str]]]],
                      ratios: Sequence[float] = RATIOS, earlier: Sequence[list[Any]] = (),
                      redundancy: Sequence[tuple[float | None, float | None, float | None]] = (),
                      removable: Sequence[tuple[float | None, float | None, float | None]] = ()) -> Table:
    """One row per model, unit and order: the layout, then the relative loss change at each of ``ratios``; with
    ``earlier`` rows (:func:`earlier_rows`: other models' batteries) beside them, every row in model order. A
    model, unit and order given twice is refused: two measurements of one thing would each claim to be it.
    ``redundancy`` and ``removable``: each model's share of redundant heads (:func:`redundancy_of`) and of heads
    removable step by step (:func:`removable_of`), in the order of ``models``."""
    columns = columns_for(ratios)
    table = Table("models", columns, caption=(
        "Each model's attention (`MHA`: one key/value group per query head; `GQA`: groups of several; `MQA`: one "
        "group a site), sites, query heads and key/value groups in all, and the relative change of its loss with a "
        "share of its query heads closed by gates (`cost_30`, `cost_50`: 30 % and 50 %), one query head at a time "
        "(`head`, Michel's unit) or as whole key/value groups (`group`), in the order of importance or of the "
        "oracle (greedy by measured cost; its job ranks by importance too, on its own few examples); mean over "
        "the replicates of the procedure with a Student-t 95 % interval, from each replication's masking table. "
        "Losses are the model's own task's (per token: next token, or target token given the source; for a "
        "sentence encoder, its contrastive loss per query), so the costs compare as shares of each model's loss, "
        "not across units of text. `removable`: the largest share of the heads pruned step by step in importance "
        "order (5 % at a time) before the model's metric falls past the budget its replication's removable claim "
        "reads (a relative loss of the task's metric; the claim's ledger row says which), mean over shards with "
        "its interval, from that row. `redundant_heads`: the share of the model's query heads with a near-duplicate "
        "sibling (cosine at or above the replication's threshold between their mean-pooled contributions to the "
        "residual stream), mean over shards with its interval, where its replication measures it and the measure "
        "finds a head planted as a copy of its sibling (its positive control)."))
    redundancy = list(redundancy) or [(None, None, None)] * len(models)
    removable = list(removable) or [(None, None, None)] * len(models)
    for (layout, rows), redundant, removed in zip(models, redundancy, removable, strict=True):
        keys = sorted({(r["job"], r["unit"], r["order"]) for r in rows if r["unit"] != "none"})
        for job, unit, order in keys:
            mine = [r for r in rows if (r["job"], r["unit"], r["order"]) == (job, unit, order)]
            by_ratio = {round(float(r["ratio"]), 4): r for r in mine}
            cells: list[Any] = []
            for ratio in ratios:
                cells += list(_cell(by_ratio.get(round(ratio, 4))))
            table.rows.append([layout.model, layout.task, layout.attention, layout.params, layout.sites,
                               layout.heads, layout.groups, job, unit, order,
                               max(int(r["n_replicates"]) for r in mine), *cells, *removed, *redundant])
    table.rows += [list(row) for row in earlier]
    keys = [tuple(row[:2]) + tuple(row[7:10]) for row in table.rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"cross-model table: {', '.join('/'.join(k) for k in twice)} given twice (a model's "
                         "battery rendered apart and again beside the others?)")
    table.rows.sort(key=lambda row: tuple(row[:2]) + tuple(row[7:10]))
    return table


def cross_model_figure(table: Table, path: Path) -> Path:
    """The cost at each share, one bar per model, unit and order, with its interval."""
    from heads.report.figures import PALETTE, _plt, _save

    plt = _plt()
    records = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    shares = [c for c in table.columns if c.startswith("cost_") and c.count("_") == 1]
    fig, axes = plt.subplots(1, max(1, len(shares)), figsize=(5.0 * max(1, len(shares)), 3.8), squeeze=False)
    fig.suptitle("Loss with heads masked, across models")
    labels = [f"{r['model']}\n{r['unit']} {r['order']}\n({r['job']} job)" for r in records]
    for ax, share in zip(axes[0], shares, strict=False):
        values = [r[share] if r[share] is not None else float("nan") for r in records]
        lows = [max(0.0, v - (r[f"{share}_ci_low"] if r[f"{share}_ci_low"] is not None else v))
                for v, r in zip(values, records, strict=True)]
        highs = [max(0.0, (r[f"{share}_ci_high"] if r[f"{share}_ci_high"] is not None else v) - v)
                 for v, r in zip(values, records, strict=True)]
        colors = [PALETTE[sorted({r["model"] for r in records}).index(r["model"]) % len(PALETTE)] for r in records]
        ax.bar(range(len(records)), values, yerr=[lows, highs], color=colors, capsize=3)
        ax.set_xticks(range(len(records)), labels, rotation=60, ha="right", fontsize=6)
        ax.set_ylabel("relative loss change")
        ax.set_title(f"{share.split('_')[1]} % of the query heads closed")
        ax.axhline(0.01, color=PALETTE[7], linestyle="--", linewidth=1, label="harmless budget (1 %)")
        ax.legend(fontsize=6)
    if not records:
        axes[0][0].text(0.5, 0.5, "no masking tables", ha="center", va="center", transform=axes[0][0].transAxes)
    fig.tight_layout()
    return _save(fig, path)
