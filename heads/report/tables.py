"""Per-replication tables (CSV + Markdown): means over seeds with Student-t 95 % intervals; failed runs are counted."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from heads.metrics import RANGE
from heads.report.collect import BASELINE, Run, RunTree
from heads.report.fmt import Table
from heads.report.measures import curve_series, speed_of_seed, speed_row, speed_samples
from heads.report.sites import site_kind, site_label, site_order
from heads.report.stats import estimate

CI = ["mean", "ci_low", "ci_high"]


def ci(values: Iterable[float | None], metric: str | None = None) -> list[float | None]:
    """``[mean, ci_low, ci_high]`` over the non-missing values; with a bounded ``metric`` (heads.metrics.RANGE)
    the interval is clipped to the values the metric can take."""
    est = estimate([v for v in values if v is not None])
    low, high = est.ci_low, est.ci_high
    if metric in RANGE and low is not None and high is not None:
        floor, ceiling = RANGE[metric]
        low, high = max(low, floor), min(high, ceiling)
    return [est.mean, low, high]


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _rows(rows, *required: str) -> list[dict]:
    """The mappings of an analysis list that carry ``required`` keys (``site`` a string, the rest numbers);
    malformed rows are skipped, not fatal."""

    def valid(r: dict, key: str) -> bool:
        return isinstance(r.get(key), str) if key == "site" else isinstance(r.get(key), (int, float))

    return [r for r in rows if isinstance(r, dict) and all(valid(r, k) for k in required)] \
        if isinstance(rows, list) else []


def _groups(runs: Iterable[Run]) -> dict[tuple, list[Run]]:
    out: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        out[(run.task, run.variant, run.strategy, run.ratio)].append(run)
    return dict(sorted(out.items()))


def _ok(runs: list[Run], fld: str) -> list[float | None]:
    return [r.record.get(fld) for r in runs if not r.failed]


# -- michel2019 ----------------------------------------------------------------------------------------
def ablation_table(tree: RunTree) -> Table:
    cols = ["task", "site", "label", "kind", "head", "n_seeds", "delta_loss", "ci_low", "ci_high",
            "delta_accuracy", "significant_seeds", "significant", "median_p"]
    rows = []
    for task in tree.tasks:
        cells: dict[tuple, list[dict]] = defaultdict(list)
        for data in tree.ablation(task).values():
            for r in _rows(data.get("heads"), "site", "head", "delta_loss"):
                cells[(r["site"], int(r["head"]))].append(r)
        for (site, head), rs in sorted(cells.items(), key=lambda kv: (site_order(kv[0][0]), kv[0][1])):
            sig = sum(bool(r.get("significant")) for r in rs)
            ps = [r["p_value"] for r in rs if isinstance(r.get("p_value"), (int, float))]
            rows.append([task, site, site_label(site), site_kind(site), head, len(rs),
                         *ci(r.get("delta_loss") for r in rs), mean(r.get("delta_accuracy") for r in rs),
                         f"{sig}/{len(rs)}", "*" if 2 * sig > len(rs) else "",
                         statistics.median(ps) if ps else None])
    return Table("Single-head ablation", cols, rows, caption=(
        "Each head masked alone (Michel et al. Table 1): change in loss (> 0: the head helps), mean over seeds "
        "with a Student-t 95 % interval; `significant_seeds`: seeds where the paired test found p < 0.05; `*`: in most "
        "seeds."))


def ablation_summary_table(tree: RunTree) -> Table:
    cols = ["task", "kind", "heads", "n_seeds", "significant_share", "ci_low", "ci_high", "upward_share"]
    rows = []
    for task in tree.tasks:
        per_kind: dict[str, list[tuple[float, float | None, int]]] = defaultdict(list)
        for data in tree.ablation(task).values():
            by_kind: dict[str, list[dict]] = defaultdict(list)
            for r in _rows(data.get("heads"), "site", "delta_loss"):
                by_kind[site_kind(r["site"])].append(r)
            for kind, rs in by_kind.items():
                sig = [r for r in rs if r.get("significant")]
                up = sum(r.get("delta_loss", 0) < 0 for r in sig) / len(sig) if sig else None
                per_kind[kind].append((len(sig) / len(rs), up, len(rs)))
        for kind, vals in sorted(per_kind.items()):
            rows.append([task, kind, vals[0][2], len(vals), *ci(v[0] for v in vals), mean(v[1] for v in vals)])
    return Table("Significant heads per site kind", cols, rows, caption=(
        "Share of heads whose single ablation changes the loss significantly (Michel: 8 of 96 encoder "
        "self-attention heads); `upward_share`: of those, the share whose removal lowers the loss."))


def all_but_one_table(tree: RunTree) -> Table:
    cols = ["task", "site", "label", "kind", "n_seeds", "best_head", "delta_loss", "ci_low", "ci_high",
            "relative_delta", "delta_accuracy"]
    rows = []
    for task in tree.tasks:
        cells: dict[str, list[dict]] = defaultdict(list)
        for data in tree.ablation(task).values():
            table = data.get("all_but_one")
            for site, r in (table.items() if isinstance(table, dict) else ()):
                if _rows([r], "baseline_loss") and ("delta_loss" in r or "loss" in r):
                    cells[site].append(r)
        for site, rs in sorted(cells.items(), key=lambda kv: site_order(kv[0])):
            heads = Counter(int(r["best_head"]) for r in rs if "best_head" in r)
            best = min(heads, key=lambda h: (-heads[h], h)) if heads else None
            deltas = [r.get("delta_loss", r.get("loss", 0) - r.get("baseline_loss", 0)) for r in rs]
            rel = [d / r["baseline_loss"] for d, r in zip(deltas, rs, strict=True) if r.get("baseline_loss")]
            acc = [r["accuracy"] - r["baseline_accuracy"] for r in rs
                   if all(isinstance(r.get(k), (int, float)) for k in ("accuracy", "baseline_accuracy"))]
            rows.append([task, site, site_label(site), site_kind(site), len(rs), best, *ci(deltas), mean(rel),
                         mean(acc)])
    return Table("All but one head per site", cols, rows, caption=(
        "Each site reduced to its best single head, the rest of the model intact (Michel et al. Table 2): "
        "increase in loss, mean over seeds with 95 % CI; `best_head`: the most frequent best head."))


def _curve_rows(task: str, label: str | int, curves: dict[int, dict]) -> list[list]:
    cells: dict[float, list[tuple[float, float, float | None]]] = defaultdict(list)
    metric = None
    for data in curves.values():
        curve = curve_series(data)
        if curve is None:
            continue
        metric = curve.field
        for x, v, y, p in zip(curve.ratios, curve.values, curve.retained, curve.points, strict=True):
            cells[round(x, 6)].append((v, y, p.get("loss")))
    return [[task, label, ratio, len(v), metric, *ci((x[0] for x in v), metric), mean(x[1] for x in v),
             mean(x[2] for x in v)] for ratio, v in sorted(cells.items())]


def curve_table(tree: RunTree) -> Table:
    cols = ["task", "scorer", "ratio", "n_seeds", "metric", *CI, "retained", "loss"]
    rows = [row for task in tree.tasks for scorer in tree.curve_scorers(task)
            for row in _curve_rows(task, scorer, tree.curves(task, scorer))]
    return Table("Iterative pruning curves", cols, rows, caption=(
        "Metric after pruning the given share of heads, re-scoring at each level (Michel et al. Fig. 3); "
        "`retained`: the metric relative to the unpruned model (1 = nothing lost, oriented so larger is better)."))


def curve_at_table(tree: RunTree) -> Table:
    cols = ["task", "step", "ratio", "n_seeds", "metric", *CI, "retained", "loss"]
    rows = [row for task in tree.tasks for step in tree.curve_steps(task)
            for row in _curve_rows(task, step, tree.curves_at(task, step))]
    return Table("Pruning curves over training", cols, rows, caption=(
        "Importance pruning from snapshots of the baseline (Michel et al. Fig. 6): is a small set of important "
        "heads settled early?"))


def speed_table(tree: RunTree) -> Table:
    cols = ["task", "ratio", "batch", "n_seeds", "repeats", "heads", "params", "examples_per_s", "speedup", "ci_low",
            "ci_high", "cpu_speedup"]
    rows = []
    for task in tree.tasks:
        per_seed = {seed: _rows(r, "ratio", "batch") for seed, r in tree.speeds(task).items()}
        cells = sorted({(float(r["ratio"]), int(r["batch"])) for rs in per_seed.values() for r in rs},
                       key=lambda c: (c[1], c[0]))
        for ratio, batch in cells:
            found = [(rs, r) for rs in per_seed.values() if (r := speed_row(rs, ratio, batch)) is not None]
            if len(per_seed) > 1:  # replicates are the seeds' speed jobs
                speedups = [speed_of_seed(rs, "speedup", ratio, batch) for rs, _ in found]
                low, high = ci(speedups)[1:]
                speedup = mean(speedups)
            else:  # one job: its paired timed repeats
                rs, r = found[0]
                mine, base = speed_samples([r], ratio, batch), speed_samples(rs, 0.0, batch)
                paired = [m / b for m, b in zip(mine, base, strict=True)] if len(mine) == len(base) and base else []
                low, high = ci(paired)[1:] if paired else (None, None)
                speedup = speed_of_seed(rs, "speedup", ratio, batch)
            repeats = mean(len(speed_samples([r], ratio, batch)) for _, r in found)
            rows.append([task, ratio, batch, len(found), repeats, mean(r.get("heads") for _, r in found),
                         mean(r.get("params") for _, r in found), mean(r.get("examples_per_s") for _, r in found),
                         speedup, low, high, mean(r.get("cpu_speedup") for _, r in found)])
    rows.sort(key=lambda r: (r[0], r[2], r[1]))
    return Table("Inference speed", cols, rows, caption=(
        "Examples per second of the pruned model by batch size (median pass of each seed's speed job, mean over "
        "seeds); `speedup` against the unpruned model at the same batch, 95 % CI over the seeds' jobs (over one "
        "job's paired timed repeats when there is one) (Michel: about +17 % at batch 16-64, ~2 % at batch 1-4, at "
        "50 % pruned); `cpu_speedup`: of median CPU seconds."))


# -- voita2019 -----------------------------------------------------------------------------------------
def _started_from_layout_of(run: Run, l0_runs: list[Run]) -> bool:
    """A scratch run trained at the head layout one of these L0 runs ended with (the run sheet's ``from_run``)."""
    source = run.summary.get("run", {}).get("from_run") if isinstance(run.summary.get("run"), dict) else None
    return source is not None and any(r.summary.get("run", {}).get("label") == source for r in l0_runs
                                      if isinstance(r.summary.get("run"), dict))


def l0_table(tree: RunTree) -> Table:
    cols = ["task", "lam", "metric", "n_ok", "n_failed", "heads", "heads_removed_share", *CI, "baseline",
            "scratch_mean", "scratch_ci_low", "scratch_ci_high", "scratch_n"]
    rows = []
    for task in tree.tasks:
        base = tree.select(task, "baseline", "none")
        for (_, _, strategy, _), runs in sorted(_groups(tree.select(task, "l0")).items(),
                                                key=lambda kv: (kv[1][0].knob or 0.0, kv[0])):
            scratch = [r for r in tree.select(task, "scratch") if not r.failed and
                       _started_from_layout_of(r, runs)]
            ok = [r for r in runs if not r.failed]
            metric = tree.metric(task, tree.runs)
            rows.append([task, strategy, metric, len(ok), len(runs) - len(ok),
                         mean(_ok(runs, "heads")), mean(_ok(runs, "heads_removed_share")),
                         *ci(_ok(runs, "value"), metric), mean(_ok(base, "value")),
                         *ci(_ok(scratch, "value"), metric), len(scratch)])
    return Table("Hard-Concrete (L0) head gates", cols, rows, caption=(
        "The baseline fine-tuned with L0 gates at penalty λ, closed heads removed (Voita et al.): heads left, "
        "task metric (mean, 95 % CI); `scratch`: the same head layout trained from initialisation."))


def roles_table(tree: RunTree) -> Table:
    cols = ["task", "lam", "kept", "n_seeds", "heads", "confidence", "ci_low", "ci_high", "positional",
            "positional_ci_low", "positional_ci_high", "rare", "rare_ci_low", "rare_ci_high"]
    rows = []
    for task in tree.tasks:
        for lam in tree.role_lams(task):
            per_seed = tree.roles(task, lam)
            for kept in (True, False):
                conf, pos, rare, counts = [], [], [], []
                for heads in per_seed.values():
                    rs = [h for h in heads if bool(h.get("kept")) == kept]
                    if rs:
                        counts.append(len(rs))
                        conf.append(mean(h.get("confidence") for h in rs))
                        pos.append(mean(h.get("positional") for h in rs))
                        rare.append(mean(h.get("rare") for h in rs))
                rows.append([task, lam, kept, len(counts), mean(counts), *ci(conf, "share"), *ci(pos, "share"),
                             *ci(rare, "share")])
    return Table("Roles of kept and pruned heads", cols, rows, caption=(
        "Per seed, the mean confidence (mean max attention weight), positional share (attention on the "
        "previous/next token) and rare-token share (attention on the sentence's least frequent token; self "
        "sites only) of the heads the L0 model kept vs pruned (Voita et al.); mean over seeds, 95 % CI."))


# -- overprovisioning ----------------------------------------------------------------------------------
def _op_groups(tree: RunTree, task: str) -> dict[tuple, list[Run]]:
    runs = [r for r in tree.select(task) if (r.variant in ("posthoc", "posthoc_ft", "scratch") and r.ratio > 0)
            or (r.variant == "baseline")]
    return _groups(runs)


def pruned_vs_scratch_table(tree: RunTree) -> Table:
    cols = ["task", "ratio", "variant", "strategy", "metric", "n_ok", "n_failed", *CI, "heads", "params"]
    rows = []
    for task in tree.tasks:
        groups = _op_groups(tree, task)
        if all(variant == "baseline" for _, variant, _, _ in groups):
            continue  # a task whose baseline trains only for a precondition has nothing pruned to compare
        for (_, variant, strategy, ratio), runs in groups.items():
            ok = [r for r in runs if not r.failed]
            metric = tree.metric(task, tree.runs)
            rows.append([task, ratio, variant, strategy, metric, len(ok), len(runs) - len(ok),
                         *ci(_ok(runs, "value"), metric), mean(_ok(runs, "heads")), mean(_ok(runs, "params"))])
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    return Table("Pruned vs trained from scratch", cols, rows, caption=(
        "Final task metric (mean over seeds, 95 % CI) of the full model pruned post hoc to a share of heads "
        "(`posthoc`, `posthoc_ft`: fine-tuned after) and of the same head count trained from initialisation "
        "(`scratch/matched`: the exact pruned layout; `scratch/uniform`: the same number per site)."))


def paired(a: list[Run], b: list[Run], fld: str, op: Callable[[float, float], float]) -> list[float]:
    bv = {r.seed: r.record.get(fld) for r in b if not r.failed}
    return [op(r.record[fld], bv[r.seed]) for r in a if not r.failed and r.record.get(fld) is not None
            and bv.get(r.seed) is not None]


def differences_table(tree: RunTree) -> Table:
    cols = ["task", "ratio", "comparison", "metric", "n_seeds", *CI, "scratch_worse"]
    rows = []
    for task in tree.tasks:
        metric = tree.metric(task, tree.runs)
        higher = metric in ("bleu", "chrf", "accuracy")
        groups = _op_groups(tree, task)
        for (_, v1, s1, q1), scratch in groups.items():
            if v1 != "scratch":
                continue
            for (_, v2, s2, q2), pruned in groups.items():
                if v2 not in ("posthoc", "posthoc_ft") or q2 != q1:
                    continue
                diffs = paired(scratch, pruned, "value", lambda x, y: x - y)
                m = ci(diffs)
                worse = None if m[0] is None else (m[0] < 0) == higher
                rows.append([task, q1, f"{v1}/{s1} - {v2}/{s2}", metric, len(diffs), *m, worse])
    return Table("Scratch minus pruned, paired by seed", cols, rows, caption=(
        "Metric of the scratch model minus the pruned one, per seed (mean, 95 % CI); `scratch_worse`: the "
        "over-provisioning claim's direction."))


# -- training_time -------------------------------------------------------------------------------------
def _tt_runs(tree: RunTree, task: str) -> dict[tuple, list[Run]]:
    return _groups(r for r in tree.select(task) if r.variant in ("baseline", "during"))


def training_runs_table(tree: RunTree) -> Table:
    cols = ["task", "variant", "strategy", "ratio", "n_ok", "n_failed", "final_val_loss", "ci_low", "ci_high",
            "value", "train_seconds", "time_to_target", "ttt_ci_low", "ttt_ci_high", "reached", "steps_to_target",
            "time_ratio", "heads", "params", "tokens_per_s", "target"]
    rows = []
    for task in tree.tasks:
        base = {r.seed: r for r in tree.select(task, "baseline", "none", 0.0) if not r.failed}
        for (_, variant, strategy, ratio), runs in _tt_runs(tree, task).items():
            ok = [r for r in runs if not r.failed]
            reached = [r.record.get("reached") for r in ok if r.record.get("reached") is not None]
            ratios = [r.record["time_to_target_or_total"] / base[r.seed].record["time_to_target_or_total"]
                      for r in ok if r.seed in base and r.record.get("time_to_target_or_total")
                      and base[r.seed].record.get("time_to_target_or_total")]
            rows.append([task, variant, strategy, ratio, len(ok), len(runs) - len(ok),
                         *ci(_ok(runs, "final_val_loss"), "loss"),
                         mean(_ok(runs, "value")), mean(_ok(runs, "train_seconds")),
                         *ci(_ok(runs, "time_to_target_or_total")), f"{sum(reached)}/{len(reached)}",
                         mean(_ok(runs, "steps_to_target_or_total")), mean(ratios), mean(_ok(runs, "heads")),
                         mean(_ok(runs, "params")), mean(_ok(runs, "tokens_per_s")),
                         next((r.record.get("target") for r in runs), None)])
    return Table("Training-time pruning: quality, wall-clock and time-to-target", cols, rows, caption=(
        "Target: the baseline's median final validation loss × 1.01. `time_to_target`: training seconds until "
        "the validation loss first reaches it (the run's total time when it never does; `reached` counts the "
        "runs that did); `time_ratio`: per seed against the baseline, mean over seeds."))


def redundancy_table(tree: RunTree) -> Table:
    cols = ["task", "strategy", "ratio", "attention_dropout", "n_ok", "n_failed", "redundancy_ratio", "ci_low",
            "ci_high", "threshold", "max_similarity", "tokens_per_s_early", "throughput_vs_baseline",
            "final_val_loss"]
    rows = []
    for task in tree.tasks:
        base_tps = mean(_ok(tree.select(task, "baseline", "none", 0.0), "tokens_per_s_early"))
        for (_, variant, strategy, ratio), runs in _tt_runs(tree, task).items():
            if variant != "during" or runs[0].method != "dropout_regime":
                continue
            ok = [r for r in runs if not r.failed]
            tps = mean(_ok(runs, "tokens_per_s_early"))
            rows.append([task, strategy, ratio, mean(_ok(runs, "attention_dropout")) or runs[0].knob,
                         len(ok), len(runs) - len(ok), *ci(_ok(runs, "redundancy_ratio"), "share"),
                         mean(_ok(runs, "redundancy_threshold")), mean(_ok(runs, "max_similarity")), tps,
                         tps / base_tps if tps and base_tps else None, mean(_ok(runs, "final_val_loss"))])
    rows.sort(key=lambda r: (r[0], r[3] if r[3] is not None else -1.0, r[1], r[2]))
    return Table("Redundancy after warm-up by attention dropout", cols, rows, caption=(
        "Share of heads with an output-cosine partner above the threshold at the end of warm-up (D4/D5), the "
        "largest cosine between two heads of a site then (`max_similarity`, mean over seeds: how near the "
        "threshold the most alike pair came), and the warm-up throughput against the baseline's (dropout "
        "costs RNG time)."))


def gqa_table(tree: RunTree) -> Table:
    """A3: each model (the baseline, its grouped-query variants, a narrower one) beside its redundancy under
    both similarity definitions and what post-hoc pruning cost it."""
    cols = ["task", "model", "kv_heads", "n_seeds", "value", "redundancy_token", "redundancy_mean",
            "max_similarity_mean", "threshold", "pruned_ratio", "value_change", "ci_low", "ci_high"]
    rows = []
    for task in tree.tasks:
        # the A3 ratio: where the grouped-query variants were pruned (the baseline's run at it is its pair)
        ratios = sorted({r.ratio for r in tree.runs if r.task == task and r.variant == "posthoc_gqa"})
        ratio = ratios[0] if ratios else None
        def order(arm: str, task: str = task) -> tuple:  # the preset's size first, full attention before GQA
            knob = tree.knob(task, "redundancy", arm)
            return (not arm.startswith("base-"), knob is not None, -(knob or 0), arm)

        for arm in sorted(tree.redundancy_arms(task), key=order):
            trained = tree.select(task, **BASELINE) if arm == "base-mha" else tree.select(task, "gqa", arm, 0.0)
            sources = {t.path.relative_to(tree.root).as_posix() for t in trained}
            pruned = [r for r in tree.runs if r.task == task and r.from_run in sources and r.ratio == ratio
                      and (r.variant == "posthoc_gqa" or (r.variant, r.strategy) == ("posthoc", "importance"))]

            def red(pooling: str, key: str = "redundancy_ratio", arm: str = arm, task: str = task) -> float | None:
                vals = [row.get(key) for rows in tree.redundancy(task, arm).values() for row in rows
                        if row.get("pooling") == pooling and row.get("space") == "value"]
                return mean([v for v in vals if isinstance(v, (int, float))])

            knob = tree.knob(task, "redundancy", arm)
            rows.append([task, arm, int(knob) if knob is not None else None, len(tree.redundancy(task, arm)),
                         mean(_ok(trained, "value")), red("token"), red("mean"), red("mean", "max_similarity"),
                         red("mean", "threshold"), ratio, *ci(_ok(pruned, "value_change"))])
    return Table("Grouped-query attention and size: redundancy and the cost of pruning", cols, rows, caption=(
        "A3, per model (`base-mha` the baseline, `base-kvK` its grouped-query variants with K key/value heads, "
        "`narrow-*` a narrower model with as many heads): the task metric; the share of redundant units (cosine "
        "above `threshold` to another of its site; a grouped-query model's unit is its key/value group) per "
        "token and of sequence-mean outputs (the report's definition), and the most alike pair under the latter; "
        "`value_change`: the metric's relative change when pruned post hoc to `pruned_ratio` (means over "
        "seeds, Student-t 95 % intervals)."))


def redundancy_over_training_table(tree: RunTree) -> Table:
    """The baseline's redundancy at its snapshots and at the end, under both similarity definitions."""
    cols = ["task", "step", "n_seeds", "redundancy_token", "redundancy_mean", "max_similarity_token",
            "max_similarity_mean", "ci_low", "ci_high", "threshold"]
    rows = []
    for task in tree.tasks:
        for arm, step in tree.redundancy_steps(task):
            per_seed = tree.redundancy(task, arm, "redundancy_at")

            def of(pooling: str, key: str, per_seed: dict = per_seed) -> list[float]:
                return [r[key] for rows in per_seed.values() for r in rows if r.get("pooling") == pooling
                        and r.get("space") == "value" and isinstance(r.get(key), (int, float))]

            rows.append([task, int(step) if step is not None else "final", len(per_seed),
                         mean(of("token", "redundancy_ratio")), mean(of("mean", "redundancy_ratio")),
                         mean(of("token", "max_similarity")), *ci(of("mean", "max_similarity")),
                         mean(of("mean", "threshold"))])
    return Table("Redundancy of the baseline over training", cols, rows, caption=(
        "The baseline at its training snapshots and at the end (`final`): the share of heads with a partner "
        "above cosine `threshold`, per token and of sequence-mean outputs (the report's definition), and the most "
        "alike pair of heads of a site under each (means over seeds; the interval is the report's definition's)."
        " The report: heads that look distinct early converge later."))


def memory_table(tree: RunTree) -> Table:
    """D8: each pruned arm's training step beside the unpruned baseline's (``heads memory``)."""
    cols = ["task", "arm", "model", "n_seeds", "heads", "param_mb", "optimizer_mb", "peak_mb", "cap_batch",
            "largest_batch", "batch_ratio", "peak_ratio"]
    rows = []
    for task in tree.tasks:
        for arm in tree.arm_names(task, "memory"):
            per_seed = tree.analyses(task, "memory", arm)
            for model in ("reference", "model"):
                found = [d["models"][model] for d in per_seed.values()
                         if isinstance(d.get("models"), dict) and isinstance(d["models"].get(model), dict)]

                def of(key: str, scale: float = 1.0, found: list = found) -> float | None:
                    return mean(r[key] / scale for r in found if isinstance(r.get(key), (int, float)))

                caps = sorted({d.get("cap_batch") for d in per_seed.values()} - {None})
                rows.append([task, arm, "baseline" if model == "reference" else arm, len(found), of("heads"),
                             of("param_bytes", 2**20), of("optimizer_bytes", 2**20), of("peak_bytes", 2**20),
                             caps[0] if len(caps) == 1 else None, of("largest_batch"), of("batch_ratio"),
                             of("peak_ratio")])
    return Table("Training-step memory before and after pruning", cols, rows,
                 formats={"largest_batch": ".1f", "param_mb": ".3f", "optimizer_mb": ".3f", "peak_mb": ".1f"},
                 caption=(
        "Each pruned arm against the unpruned baseline it is compared with, one training step (forward, backward, "
        "AdamW step) on the same examples: parameter and optimizer-state (AdamW moments) MiB, the step's peak "
        "tensor MiB at `cap_batch`, and the largest batch each trains within the baseline's peak at `cap_batch` "
        "(the memory cap); means over seeds. CPU peaks are live tensor bytes from torch.profiler's memory "
        "timeline, CUDA peaks the allocator's."))


def clock_table(tree: RunTree) -> Table:
    """D1, D4: training-step times of each pruned arm, its baseline and the baseline under warm-up attention
    dropout, measured interleaved in one job per seed (``heads clock``)."""
    cols = ["task", "arm", "model", "n_seeds", "heads", "step_ms", "cpu_step_ms", "step_ratio", "ci_low", "ci_high",
            "cpu_step_ratio"]
    rows = []
    for task in tree.tasks:
        for arm in tree.arm_names(task, "clock"):
            per_seed = tree.analyses(task, "clock", arm)
            for model in ("reference", "model", "dropout"):
                found = [d["models"][model] for d in per_seed.values()
                         if isinstance(d.get("models"), dict) and isinstance(d["models"].get(model), dict)]
                if not found:
                    continue

                def of(key: str, scale: float = 1.0, found: list = found) -> list[float]:
                    return [r[key] * scale for r in found if isinstance(r.get(key), (int, float))]

                rows.append([task, arm, {"reference": "baseline", "model": arm}.get(model, "baseline + dropout"),
                             len(found), mean(of("heads")), mean(of("step_s", 1e3)), mean(of("cpu_step_s", 1e3)),
                             *ci(of("step_ratio")), mean(of("cpu_step_ratio"))])
    return Table("Training-step time, measured interleaved", cols, rows, caption=(
        "Each pruned arm, the unpruned baseline and the baseline under warm-up attention dropout, training on the "
        "same batch in one job, their order rotated from repeat to repeat: median milliseconds a step and the "
        "median per-repeat ratio to the baseline's (below 1: faster), means over seeds (Student-t 95 % interval). "
        "D1 weighs the runs' exact step counts by these times; D4's throughput cost is the dropout row."))


def genres_table(tree: RunTree) -> Table:
    """D7, genres as domains: the baseline pruned by similarity pooled over genres vs stratified by genre, its
    cost on each genre's held-out text (``heads shift`` on the genre corpora)."""
    cols = ["task", "arm", "genre", "n_seeds", "change", "ci_low", "ci_high"]
    rows = []
    for task in tree.tasks:
        for arm in (a for a in tree.arm_names(task, "shift") if a.startswith("genre-")):
            per_seed = tree.analyses(task, "shift", arm)
            genres = sorted({g for d in per_seed.values() for g in (d.get("shifted") or {})})
            for genre in genres:
                values = [d["shifted"][genre].get("change") for d in per_seed.values()
                          if isinstance((d.get("shifted") or {}).get(genre), dict)]
                values = [v for v in values if isinstance(v, (int, float))]
                rows.append([task, arm, genre, len(values), *ci(values)])
    return Table("Pruning by genre: pooled vs stratified similarity", cols, rows, caption=(
        "The trained baseline pruned by the report's similarity on the training books of several genres, the genres "
        "pooled (`genre-pooled`) or stratified (`genre-stratified`: a head goes only if it is redundant in every "
        "genre); `change`: the pruned model's relative perplexity increase over the baseline on each genre's "
        "held-out chapters (mean over seeds, Student-t 95 % interval). The report: a head redundant on average "
        "was the only one carrying one domain."))


def redundancy_genre_table(tree: RunTree) -> Table:
    """D7's redundancy view: the baseline's share of redundant heads on each genre's held-out text, on the genres
    pooled and stratified (redundant in every genre), under both similarity definitions."""
    cols = ["task", "pooling", "genre", "n_seeds", "redundancy_ratio", "ci_low", "ci_high", "max_similarity",
            "threshold"]
    rows = []
    for task in tree.tasks:
        for arm in tree.redundancy_arms(task, "redundancy_genre"):
            per_seed = tree.redundancy(task, arm, "redundancy_genre")
            found = [r for seed_rows in per_seed.values() for r in seed_rows if r.get("space") == "value"]
            for pooling in ("token", "mean"):
                views: dict[str, list[dict]] = defaultdict(list)
                probes = [r for r in found if r.get("pooling") == pooling]
                # a genre's row is a probe's sub-dict without the threshold: every view shares the probes'
                threshold = mean(r.get("threshold") for r in probes if isinstance(r.get("threshold"), (int, float)))
                for r in probes:
                    views[str(r.get("view"))].append(r)
                    for genre, d in sorted((r.get("domains") or {}).items()):
                        if isinstance(d, dict):
                            views[genre].append(d)
                order = sorted(v for v in views if v not in ("pooled", "stratified")) + ["pooled", "stratified"]
                for view in (v for v in order if v in views):
                    ratio = [r.get("redundancy_ratio") for r in views[view]]
                    ratio = [v for v in ratio if isinstance(v, (int, float))]
                    rows.append([task, pooling, view, len(ratio), *ci(ratio, "share"),
                                 mean(r.get("max_similarity") for r in views[view]
                                      if isinstance(r.get("max_similarity"), (int, float))), threshold])
    return Table("Redundancy by genre: each genre, pooled and stratified", cols, rows, caption=(
        "The trained baseline on each genre's held-out chapters: the share of heads with a partner above cosine "
        "`threshold` in that genre, on the genres' text pooled (`pooled`), and in every genre (`stratified`, the "
        "report's safe view), per token and of sequence-mean outputs (the report's definition); the most alike pair of "
        "heads of a site; means over seeds (Student-t 95 % interval of the share). The report: a head redundant "
        "on average was the only one carrying one domain."))


# Every table by name; a replication lists the ones it renders in replications/<name>/report.yaml.
TABLES: dict[str, Callable[[RunTree], Table]] = {
    "ablation": ablation_table, "ablation_summary": ablation_summary_table, "all_but_one": all_but_one_table,
    "curve": curve_table, "curve_at": curve_at_table, "speed": speed_table,
    "l0": l0_table, "roles": roles_table,
    "pruned_vs_scratch": pruned_vs_scratch_table, "differences": differences_table,
    "runs": training_runs_table, "redundancy": redundancy_table, "gqa": gqa_table,
    "redundancy_over_training": redundancy_over_training_table, "memory": memory_table, "clock": clock_table,
    "genres": genres_table,
    "redundancy_genre": redundancy_genre_table,
}
