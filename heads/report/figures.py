"""Per-replication figures (matplotlib, Agg, PNG): fixed panel sizes and no timestamp or software metadata,
so the same inputs give the same bytes. Figures draw from the tables (means with 95 % CIs over seeds);
a figure without data still renders, saying so, so a workflow can declare every file as an output."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from heads.io import write_bytes
from heads.report.collect import RunTree
from heads.report.table_spec import group_by
from heads.report.tables import Tables

PANEL = (5.0, 3.8)  # inches per panel
DPI = 100
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "svg.hashsalt": "heads", "path.simplify": False})
    return plt


def _thresholds(ax, rows: list[dict], linestyle: str = "--") -> None:
    """The cosine thresholds the probes behind ``rows`` used, as horizontal lines (one per distinct value)."""
    for threshold in sorted({r["threshold"] for r in rows if r.get("threshold") is not None}):
        ax.axhline(threshold, color=PALETTE[7], linestyle=linestyle, linewidth=1, label=f"threshold {threshold:g}")


def _colors(names) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(sorted(set(names), key=str))}


def _panels(groups: dict, title: str, rows: int = 1) -> tuple[Any, list[tuple]]:
    """A figure of one column of ``rows`` panels per group, and its columns as ``(*axes, key, group)``; without
    groups one panel says so, so a workflow can still declare the file."""
    plt = _plt()
    n = max(1, len(groups))
    fig, axes = plt.subplots(rows, n, figsize=(PANEL[0] * n, PANEL[1] * rows), squeeze=False)
    fig.suptitle(title)
    if not groups:
        axes[0][0].text(0.5, 0.5, "no data in the run tree", ha="center", va="center", transform=axes[0][0].transAxes)
        for ax in axes[:, 0]:
            ax.set_axis_off()
    return fig, [(*axes[:, i], key, group) for i, (key, group) in enumerate(groups.items())]


def _save(fig, path: Path) -> Path:
    """``fig`` as PNG bytes that depend on nothing but what it draws, written atomically; the figure closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return write_bytes(path, buf.getvalue())


def _by(rows: list[dict], key: str) -> dict:
    """``rows`` in groups by their ``key`` field, the groups in order of the key as text."""
    return dict(sorted(group_by(rows, lambda r: r[key]).items(), key=lambda kv: str(kv[0])))


def _yerr(means: list, lows: list, highs: list) -> list[list[float]]:
    """Error-bar lengths below and above each mean (none where a bound is missing, and never negative: a mean
    of values outside a metric's range lies outside its clipped interval, which matplotlib refuses)."""
    return [[max(0.0, m - lo) if m is not None and lo is not None else 0.0 for m, lo in zip(means, lows, strict=True)],
            [max(0.0, hi - m) if m is not None and hi is not None else 0.0 for m, hi in zip(means, highs, strict=True)]]


def _err(rows: list[dict], lo: str = "ci_low", hi: str = "ci_high", m: str = "mean") -> list[list[float]]:
    return _yerr([r[m] for r in rows], [r[lo] for r in rows], [r[hi] for r in rows])


def _nan(values: Iterable[float | None]) -> list[float]:
    """Missing values as NaN, which matplotlib leaves undrawn."""
    return [v if v is not None else float("nan") for v in values]


def _beside(x: Iterable[int], k: int) -> list[float]:
    """Where the ``k``-th (0 or 1) of two bars 0.4 wide stands beside the other at each of ``x``."""
    return [i + (k - 0.5) * 0.4 for i in x]


# The two similarity definitions a redundancy probe reports, with their legend labels.
POOLINGS = (("token", "per token"), ("mean", "sequence mean (the report's)"))


# -- michel2019 ----------------------------------------------------------------------------------------
def curves_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("curve") if r["mean"] is not None]
    fig, panels = _panels(_by(rows, "task"), "Iterative pruning curves (mean, 95 % CI band over seeds)")
    colors = _colors(r["scorer"] for r in rows)
    for ax, task, trows in panels:
        for scorer, srows in _by(trows, "scorer").items():
            x = [100 * r["ratio"] for r in srows]
            ax.plot(x, [r["mean"] for r in srows], marker="o", ms=3, color=colors[scorer], label=scorer)
            low = [r["mean"] if r["ci_low"] is None else r["ci_low"] for r in srows]  # one seed: no band
            high = [r["mean"] if r["ci_high"] is None else r["ci_high"] for r in srows]
            ax.fill_between(x, low, high, color=colors[scorer], alpha=0.2, linewidth=0)
        ax.set(title=task, xlabel="% heads pruned", ylabel=trows[0]["metric"])
        ax.legend()
    return _save(fig, path)


def ablation_figure(tables: Tables, path: Path) -> Path:
    import numpy as np

    fig, panels = _panels(_by(tables.records("ablation"), "task"),
                          "Single-head ablation: Δ loss (* significant in most seeds)")
    for ax, task, trows in panels:
        sites = list(dict.fromkeys(r["site"] for r in trows))
        heads = sorted({r["head"] for r in trows})
        grid = np.full((len(sites), len(heads)), np.nan)
        for r in trows:
            i, j = sites.index(r["site"]), heads.index(r["head"])
            grid[i, j] = r["delta_loss"]
            if r["significant"]:
                ax.text(j, i, "*", ha="center", va="center", fontsize=10)
        lim = float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0
        im = ax.imshow(grid, cmap="RdBu_r", vmin=-lim or -1, vmax=lim or 1, aspect="auto")
        labels = {r["site"]: r["label"] for r in trows}
        ax.set_yticks(range(len(sites)), [labels[s] for s in sites])
        ax.set_xticks(range(len(heads)), [str(h) for h in heads])
        ax.set(title=task, xlabel="head")
        fig.colorbar(im, ax=ax, label="Δ loss")
    return _save(fig, path)


def curve_at_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("curve_at") if r["retained"] is not None]
    final = [r for r in tables.records("curve") if r["scorer"] == "importance" and r["retained"] is not None]
    fig, panels = _panels(_by(rows, "task"), "Importance pruning from snapshots over training")
    cmap = _plt().get_cmap("viridis")
    for ax, task, trows in panels:
        steps = _by(trows, "step")
        for k, (step, srows) in enumerate(sorted(steps.items(), key=lambda kv: int(kv[0]))):
            ax.plot([100 * r["ratio"] for r in srows], [r["retained"] for r in srows], marker="o", ms=3,
                    color=cmap(k / max(1, len(steps) - 1)), label=f"step {step}")
        frows = [r for r in final if r["task"] == task]
        if frows:
            ax.plot([100 * r["ratio"] for r in frows], [r["retained"] for r in frows], "k--", label="final")
        ax.set(title=task, xlabel="% heads pruned", ylabel="metric retained (1 = unpruned)")
        ax.legend()
    return _save(fig, path)


def speed_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("speed") if r["speedup"] is not None and r["ratio"] > 0]
    fig, panels = _panels(_by(rows, "task"), "Inference speed-up of pruned models by batch size")
    for ax, task, trows in panels:
        for ratio, rrows in _by(trows, "ratio").items():
            rrows.sort(key=lambda r: r["batch"])
            ax.plot([r["batch"] for r in rrows], [r["speedup"] for r in rrows], marker="o",
                    label=f"{100 * ratio:g} % pruned")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set(title=task, xlabel="batch size", ylabel="examples/s vs unpruned")
        ax.legend()
    return _save(fig, path)


def decoding_figure(tables: Tables, path: Path) -> Path:
    """Speed-up against the share of query heads removed, per model and phase, one colour per (context, batch):
    the measured speed-up with its interval on the rounds' log ratios (solid), the bound it cannot exceed
    (dashed: bytes moved per decoded token, FLOPs of a prefill). Variants that keep every key/value group (query
    heads dropped within their groups) are the open squares, off the line."""
    rows = [{**r, "panel": f"{r['arm']}: {r['phase']}", "cell": f"{r['context']} x {r['batch']}"}
            for r in tables.records("decoding") if r["speedup"] is not None and r["phase"] != "total"]
    fig, panels = _panels(_by(rows, "panel"), "Cached decoding and prefill: speed-up vs share pruned, bound dashed")
    for ax, panel, prows in panels:
        cells = _by(prows, "cell")
        colors = _colors(cells)
        for cell, crows in cells.items():
            line = sorted((r for r in crows if r["kv_share"] > 0 or r["share"] == 0), key=lambda r: r["share"])
            other = [r for r in crows if r not in line]
            for group, style in ((line, "o-"), (other, "s")):
                if not group:
                    continue
                x = [100 * r["share"] for r in group]
                ax.errorbar(x, [r["speedup"] for r in group], yerr=_err(group, m="speedup"), fmt=style,
                            color=colors[cell], capsize=3, mfc="none" if style == "s" else colors[cell],
                            label=cell if group is line else None)
                ax.plot(x, _nan(r["bound"] for r in group), "--" if group is line else "x", color=colors[cell],
                        linewidth=1)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=panel, xlabel="% query heads removed", ylabel="speed-up vs unpruned")
        ax.legend(fontsize=7)
    return _save(fig, path)


# -- voita2019 -----------------------------------------------------------------------------------------
def l0_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("l0") if r["mean"] is not None]
    fig, panels = _panels(_by(rows, "task"), "L0 gates: heads kept vs metric (95 % CI)")
    for ax, task, trows in panels:
        # rows come ordered by penalty (l0_table sorts by the run sheet's knob)
        x = [r["heads"] for r in trows]
        ax.errorbar(x, [r["mean"] for r in trows], yerr=_err(trows), marker="o", capsize=3, label="L0-pruned")
        for r in trows:
            ax.annotate(r["lam"], (r["heads"], r["mean"]), textcoords="offset points", xytext=(3, 3), fontsize=7)
        scratch = [r for r in trows if r["scratch_mean"] is not None]
        if scratch:
            ax.errorbar([r["heads"] for r in scratch], [r["scratch_mean"] for r in scratch],
                        yerr=_err(scratch, "scratch_ci_low", "scratch_ci_high", "scratch_mean"), marker="s",
                        ls="none", capsize=3, label="same layout from scratch")
        if trows[0]["baseline"] is not None:
            ax.axhline(trows[0]["baseline"], color="grey", ls="--", label="baseline")
        ax.set(title=task, xlabel="heads kept", ylabel=trows[0]["metric"])
        ax.legend()
    return _save(fig, path)


def roles_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("roles") if r["n_seeds"]]
    keys = sorted({(r["task"], r["lam"]) for r in rows})
    groups = {key: [r for r in rows if (r["task"], r["lam"]) == key] for key in keys}
    fig, panels = _panels(groups, "Kept vs pruned heads: confidence and positional share (95 % CI)")
    for ax, key, krows in panels:
        for k, kept in enumerate((True, False)):
            r = next((r for r in krows if r["kept"] == kept), None)
            if r is None or r["confidence"] is None:
                continue
            xs = [k * 0.35, 1 + k * 0.35]
            means = [r["confidence"], r["positional"] or 0.0]
            errs = _yerr(means, [r["ci_low"], r["positional_ci_low"]], [r["ci_high"], r["positional_ci_high"]])
            ax.bar(xs, means, width=0.35, yerr=errs, capsize=3, label="kept" if kept else "pruned")
        ax.set_xticks([0.175, 1.175], ["confidence", "positional"])
        ax.set(title=f"{key[0]} {key[1]}", ylim=(0, 1))
        ax.legend()
    return _save(fig, path)


# -- overprovisioning ----------------------------------------------------------------------------------
def pruned_vs_scratch_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("pruned_vs_scratch") if r["mean"] is not None]
    fig, panels = _panels(_by(rows, "task"), "Pruned vs trained from scratch (mean, 95 % CI)")
    for ax, task, trows in panels:
        groups = sorted({f"{r['variant']}/{r['arm']}" for r in trows})
        ratios = sorted({r["ratio"] for r in trows})
        colors, width = _colors(groups), 0.8 / max(1, len(groups))
        for g, group in enumerate(groups):
            grows = [r for r in trows if f"{r['variant']}/{r['arm']}" == group]
            xs = [ratios.index(r["ratio"]) + (g - (len(groups) - 1) / 2) * width for r in grows]
            ax.bar(xs, [r["mean"] for r in grows], width=width, yerr=_err(grows), capsize=2, color=colors[group],
                   label=group)
        ax.set_xticks(range(len(ratios)), [f"{100 * q:g} %" for q in ratios])
        ax.set(title=task, xlabel="heads removed", ylabel=trows[0]["metric"])
        ax.legend(fontsize=6)
    return _save(fig, path)


# -- training_time -------------------------------------------------------------------------------------
def _training_tasks(tree: RunTree) -> list[str]:
    """Tasks with training-time pruning runs (all tasks with a baseline when none has any)."""
    during = sorted({r.task for r in tree.runs if r.variant == "during"})
    return during or sorted({r.task for r in tree.runs if r.variant == "baseline"})


def quality_vs_time_figure(tables: Tables, path: Path) -> Path:
    tree = tables.tree
    tasks = _training_tasks(tree)
    runs = [r for r in tree.runs if r.variant in ("baseline", "during") and r.metrics and r.task in tasks]
    groups = {task: [r for r in runs if r.task == task] for task in tasks}
    fig, panels = _panels(groups, "Validation loss vs training seconds (one line per seed)")
    for ax, task, truns in panels:
        colors = _colors(r.group for r in truns)
        labelled = set()
        for run in truns:
            pts = [(m["train_seconds"], m["val_loss"]) for m in run.metrics
                   if m.get("val_loss") is not None and m.get("train_seconds") is not None]
            if not pts:
                continue
            ax.plot(*zip(*pts, strict=True), color=colors[run.group], lw=1, ls="--" if run.failed else "-",
                    label=None if run.group in labelled else run.group)
            labelled.add(run.group)
        target = next((r.record.get("target") for r in truns if r.record.get("target")), None)
        if target:
            ax.axhline(target, color="grey", lw=0.8, ls=":", label="target")
        ax.set(title=task, xlabel="training seconds", ylabel="validation loss")
        ax.legend(fontsize=6)
    return _save(fig, path)


def time_to_target_figure(tables: Tables, path: Path) -> Path:
    keep = _training_tasks(tables.tree)
    rows = [r for r in tables.records("runs") if r["time_to_target"] is not None and r["task"] in keep]
    fig, panels = _panels(_by(rows, "task"), "Time to target loss (mean, 95 % CI; hatched: some runs never reached it)")
    for ax, task, trows in panels:
        names = [f"{r['variant']}/{r['arm']}/{r['ratio']:g}" for r in trows]
        err = _err(trows, "ttt_ci_low", "ttt_ci_high", "time_to_target")
        bars = ax.bar(range(len(trows)), [r["time_to_target"] for r in trows], yerr=err, capsize=3)
        for bar, r in zip(bars, trows, strict=True):
            done, total = (int(x) for x in r["reached"].split("/"))
            if done < total:
                bar.set_hatch("//")
        ax.set_xticks(range(len(trows)), names, rotation=30, ha="right")
        ax.set(title=task, ylabel="training seconds")
    return _save(fig, path)


def redundancy_figure(tables: Tables, path: Path) -> Path:
    rows = [r for r in tables.records("redundancy") if r["redundancy_ratio"] is not None]
    fig, panels = _panels(_by(rows, "task"), "Redundancy ratio after warm-up by attention dropout (95 % CI)")
    for ax, task, trows in panels:
        err = _err(trows, m="redundancy_ratio")
        x = range(len(trows))
        ax.bar(x, [r["redundancy_ratio"] for r in trows], yerr=err, capsize=3, label="share of redundant heads")
        # with no redundant head the bars are empty: the most alike pair against the threshold says how near
        closest = [(i, r["max_similarity"]) for i, r in enumerate(trows) if r.get("max_similarity") is not None]
        if closest:
            ax.plot(*zip(*closest, strict=True), "o", color=PALETTE[1], label="most alike pair (cosine)")
        _thresholds(ax, trows)
        ax.set_xticks(x, [f"{r['attention_dropout']:g}" for r in trows])
        ax.set(title=task, xlabel="attention dropout in warm-up", ylabel="share / cosine", ylim=(0, 1))
        ax.legend(loc="best")
    return _save(fig, path)


def gqa_figure(tables: Tables, path: Path) -> Path:
    """A3: per model, the share of redundant units under both definitions, and what pruning cost it."""
    fig, panels = _panels(_by(tables.records("gqa"), "task"),
                          "Grouped-query attention and size: redundancy and pruning cost", rows=2)
    for left, right, task, trows in panels:
        x = range(len(trows))
        names = [r["model"] for r in trows]
        for k, (key, label) in enumerate((("redundancy_token", "per token"), ("redundancy_mean", "sequence mean"))):
            left.bar(_beside(x, k), [r[key] or 0.0 for r in trows], width=0.4, color=PALETTE[k], label=label)
        left.plot(list(x), _nan(r["max_similarity_mean"] for r in trows), "o", color=PALETTE[3],
                  label="most alike pair (sequence mean)")
        _thresholds(left, trows)
        left.set_xticks(list(x), names, rotation=30, ha="right")
        left.set(title=f"{task}: redundant units", ylabel="share / cosine", ylim=(0, 1))
        left.legend(loc="best", fontsize=7)
        cost = _nan(r["value_change"] for r in trows)
        right.bar(list(x), cost, yerr=_err(trows, m="value_change"), capsize=3, color=PALETTE[2])
        right.set_xticks(list(x), names, rotation=30, ha="right")
        ratio = next((r["pruned_ratio"] for r in trows if r["pruned_ratio"] is not None), None)
        right.set(title=f"{task}: cost of pruning {ratio:g} post hoc" if ratio is not None else task,
                  ylabel="relative change of the metric (95 % CI)")
    return _save(fig, path)


def scaling_figure(tables: Tables, path: Path) -> Path:
    """Where over-provisioning begins: A1's cost of pruning and A2's gap against the full model's parameters, one
    point per size (mean, 95 % CI over seeds), with each claim's line (A1: under 3.3 %; A2: above 0)."""
    fig, panels = _panels(_by(tables.records("scaling"), "task"), "Over-provisioning by model size", rows=2)
    for top, bottom, task, trows in panels:
        trows = [r for r in trows if r["params"] is not None]
        x = [r["params"] / 1e6 for r in trows]
        names = [f"{r['size']} ({r['heads']} heads)" if r["heads"] is not None else r["size"] for r in trows]
        for ax, key, line, label, title in (
                (top, "a1", 0.033, "A1's bound (3.3 %)", "cost of pruning post hoc (A1)"),
                (bottom, "a2", 0.0, "no gap", "scratch minus pruned and fine-tuned (A2's gap)")):
            mid = "a1_cost" if key == "a1" else "a2_gap"
            ax.errorbar(x, _nan(r[mid] for r in trows), yerr=_err(trows, f"{key}_ci_low", f"{key}_ci_high", mid),
                        fmt="o-", capsize=3, color=PALETTE[0 if key == "a1" else 1])
            for xi, r, name in zip(x, trows, names, strict=True):
                if r[mid] is not None:
                    ax.annotate(name, (xi, r[mid]), textcoords="offset points", xytext=(4, 4), fontsize=7)
            ax.axhline(line, color=PALETTE[7], linestyle="--", linewidth=1, label=label)
            if x:  # log scale, ticked at the sizes themselves
                ax.set_xscale("log")
                ax.minorticks_off()
                ax.set_xticks(x, [f"{v:.3g}" for v in x])
            ratio = next((r["ratio"] for r in trows if r["ratio"] is not None), None)
            ax.set(title=f"{task}: {title}" + (f", {ratio:g} of heads" if ratio is not None else ""),
                   xlabel="parameters of the full model (millions)", ylabel="relative change of the metric (95 % CI)")
            ax.legend(loc="best", fontsize=7)
    return _save(fig, path)


def redundancy_over_training_figure(tables: Tables, path: Path) -> Path:
    """The most alike pair of the baseline's heads, and the share redundant, as it trains, per definition."""
    fig, panels = _panels(_by(tables.records("redundancy_over_training"), "task"),
                          "Redundancy of the baseline over training")
    for ax, task, trows in panels:
        x = list(range(len(trows)))
        for k, (pooling, label) in enumerate(POOLINGS):
            ax.plot(x, _nan(r[f"max_similarity_{pooling}"] for r in trows), "o-", color=PALETTE[k],
                    label=f"most alike pair, {label}")
            ax.plot(x, _nan(r[f"redundancy_{pooling}"] for r in trows), "s--", color=PALETTE[k], alpha=0.6,
                    label=f"share redundant, {label}")
        ax.errorbar(x, _nan(r["max_similarity_mean"] for r in trows), yerr=_err(trows, m="max_similarity_mean"),
                    fmt="none", color=PALETTE[1], capsize=3)
        _thresholds(ax, trows, ":")
        ax.set_xticks(x, [str(r["step"]) for r in trows])
        ax.set(title=task, xlabel="training step (snapshot)", ylabel="cosine / share", ylim=(0, 1))
        ax.legend(loc="best", fontsize=7)
    return _save(fig, path)


def redundancy_genre_figure(tables: Tables, path: Path) -> Path:
    """The baseline's share of redundant heads per genre, on the genres pooled and stratified, per definition,
    with the most alike pair of each against the threshold."""
    fig, panels = _panels(_by(tables.records("redundancy_genre"), "task"),
                          "Redundancy by genre: each genre, pooled and stratified")
    for ax, task, trows in panels:
        views = list(dict.fromkeys(r["genre"] for r in trows))
        x = list(range(len(views)))
        for k, (pooling, label) in enumerate(POOLINGS):
            at = {r["genre"]: r for r in trows if r["pooling"] == pooling}
            found = [at.get(v) for v in views]
            share = [r["redundancy_ratio"] if r and r["redundancy_ratio"] is not None else 0.0 for r in found]
            err = _yerr([r and r["redundancy_ratio"] for r in found], [r and r["ci_low"] for r in found],
                        [r and r["ci_high"] for r in found])
            ax.bar(_beside(x, k), share, width=0.4, yerr=err, capsize=3, color=PALETTE[k],
                   label=f"share redundant, {label}")
            ax.plot(_beside(x, k), _nan(r and r["max_similarity"] for r in found), "o", color=PALETTE[k + 2],
                    label=f"most alike pair, {label}")
        _thresholds(ax, trows)
        ax.set_xticks(x, views, rotation=30, ha="right")
        ax.set(title=task, ylabel="share / cosine", ylim=(0, 1))
        ax.legend(loc="best", fontsize=7)
    return _save(fig, path)


# Every figure by name; a replication lists the ones it renders in replications/<name>/report.yaml.
# What each figure draws from: the tables (by the name report.yaml declares them under) and the columns of each
# it reads. Checked when report.yaml is read (heads.report.render), so a renamed table or column fails the
# workflow's dry run with one line, not the render after the runs; a test draws every figure from rows holding
# only these columns, so the declaration cannot fall behind the code. quality_vs_time reads the runs' metrics.
NEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    "ablation": {"ablation": ("task", "site", "label", "head", "delta_loss", "significant")},
    "curve_at": {"curve_at": ("task", "step", "ratio", "retained"), "curve": ("task", "scorer", "ratio", "retained")},
    "curves": {"curve": ("task", "scorer", "ratio", "mean", "ci_low", "ci_high", "metric")},
    "gqa": {"gqa": ("task", "model", "threshold", "redundancy_mean", "redundancy_token", "ci_low", "ci_high",
                    "max_similarity_mean", "value_change", "pruned_ratio")},
    "l0": {"l0": ("task", "lam", "heads", "mean", "ci_low", "ci_high", "metric", "baseline", "scratch_mean",
                  "scratch_ci_low", "scratch_ci_high")},
    "pruned_vs_scratch": {"pruned_vs_scratch": ("task", "variant", "arm", "ratio", "mean", "ci_low", "ci_high",
                                                "metric")},
    "quality_vs_time": {},
    "redundancy": {"redundancy": ("task", "attention_dropout", "threshold", "redundancy_ratio", "ci_low", "ci_high",
                                  "max_similarity")},
    "redundancy_genre": {"redundancy_genre": ("task", "genre", "pooling", "threshold", "redundancy_ratio", "ci_low",
                                              "ci_high", "max_similarity")},
    "redundancy_over_training": {"redundancy_over_training": ("task", "step", "threshold", "redundancy_mean",
                                                              "redundancy_token", "ci_low", "ci_high",
                                                              "max_similarity_mean", "max_similarity_token")},
    "scaling": {"scaling": ("task", "size", "params", "heads", "ratio", "a1_cost", "a1_ci_low", "a1_ci_high",
                            "a2_gap", "a2_ci_low", "a2_ci_high")},
    "roles": {"roles": ("task", "lam", "kept", "n_seeds", "confidence", "ci_low", "ci_high", "positional",
                        "positional_ci_low", "positional_ci_high")},
    "speed": {"speed": ("task", "ratio", "batch", "speedup")},
    "decoding": {"decoding": ("arm", "phase", "context", "batch", "share", "kv_share", "speedup", "ci_low",
                              "ci_high", "bound")},
    "time_to_target": {"runs": ("task", "variant", "arm", "ratio", "time_to_target", "ttt_ci_low",
                                "ttt_ci_high", "reached")},
}

FIGURES: dict[str, Callable[[Tables, Path], Path]] = {
    "curves": curves_figure, "ablation": ablation_figure, "curve_at": curve_at_figure, "speed": speed_figure,
    "decoding": decoding_figure,
    "l0": l0_figure, "roles": roles_figure,
    "pruned_vs_scratch": pruned_vs_scratch_figure,
    "quality_vs_time": quality_vs_time_figure, "time_to_target": time_to_target_figure,
    "redundancy": redundancy_figure, "gqa": gqa_figure, "scaling": scaling_figure,
    "redundancy_over_training": redundancy_over_training_figure, "redundancy_genre": redundancy_genre_figure,
}
