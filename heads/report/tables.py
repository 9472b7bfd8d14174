"""Tables built in Python, where a spec (heads.report.table_spec) cannot say them: scratch minus pruned paired by
seed across groups, paired timing repeats, models joined with their redundancy probes, nested genre views.
:class:`Tables` builds a replication's tables, declared or built in, each once."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from heads.report import speed_records
from heads.report.collect import BASELINE, Run, RunTree, as_dict, mean, number
from heads.report.fmt import Table, records
from heads.report.rows import by_seed
from heads.report.table_spec import TableSpec, ci, group_by
from heads.task_metrics import higher_is_better

CI = ["mean", "ci_low", "ci_high"]


def _ok(runs: list[Run], fld: str) -> list[float | None]:
    return [r.record.get(fld) for r in runs if not r.failed]


def _value_probes(per_seed: Mapping[int, list[dict]], pooling: str) -> list[dict]:
    """The seeds' redundancy probes of the heads' value outputs pooled by ``pooling`` (``token`` or ``mean``), in
    each job's first unit (the order of its --units; the model's own unit when it named none), never two mixed."""
    out = []
    for rows in per_seed.values():
        unit = next((r.get("unit") for r in rows), None)
        out += [r for r in rows if r.get("space") == "value" and r.get("pooling") == pooling and r.get("unit") == unit]
    return out


# -- michel2019 ----------------------------------------------------------------------------------------
def speed_table(tree: RunTree) -> Table:
    cols = ["task", "ratio", "batch", "n_seeds", "repeats", "heads", "params", "examples_per_s", "speedup", "ci_low",
            "ci_high", "cpu_speedup"]
    rows = []
    for task in tree.tasks:
        # rows without a numeric ratio and batch are skipped, not fatal
        per_seed = {seed: [r for r in rs if all(isinstance(r.get(k), (int, float)) for k in ("ratio", "batch"))]
                    for seed, rs in by_seed(tree, "speed", task, "none").items()}
        cells = sorted({(float(r["ratio"]), int(r["batch"])) for rs in per_seed.values() for r in rs},
                       key=lambda c: (c[1], c[0]))
        for ratio, batch in cells:
            found = [r for rs in per_seed.values() if (r := speed_records.row_at(rs, ratio, batch)) is not None]
            # the claims' replicates (heads.report.speed_records): the seeds' jobs, or one job's paired repeats
            speedup, low, high = ci(speed_records.replicates(per_seed, "speedup", ratio, batch).values.values())
            repeats = mean(len(speed_records.samples([r], ratio, batch)) for r in found)
            rows.append([task, ratio, batch, len(found), repeats,
                         *(mean(r.get(k) for r in found) for k in ("heads", "params", "examples_per_s")),
                         speedup, low, high, mean(r.get("cpu_speedup") for r in found)])
    rows.sort(key=lambda r: (r[0], r[2], r[1]))
    return Table("Inference speed", cols, rows, caption=(
        "Examples per second of the pruned model by batch size (median pass of each seed's speed job, mean over "
        "seeds); `speedup` against the unpruned model at the same batch, the mean and 95 % CI over the seeds' "
        "jobs (over one job's timed repeats, each paired with the unpruned model's of the same round, when there "
        "is one) (Michel: about +17 % at batch 16-64, ~2 % at batch 1-4, at 50 % pruned); `cpu_speedup`: of "
        "median CPU seconds."))


# -- overprovisioning ----------------------------------------------------------------------------------
def _op_groups(tree: RunTree, task: str) -> dict[tuple, list[Run]]:
    """The task's baseline runs and its pruned and scratch ones above ratio 0, by (task, variant, arm, ratio)."""
    runs = [r for r in tree.select(task) if (r.variant in ("posthoc", "posthoc_ft", "scratch") and r.ratio > 0)
            or (r.variant == "baseline")]
    return dict(sorted(group_by(runs, lambda r: (r.task, r.variant, r.arm, r.ratio)).items()))


def paired(a: list[Run], b: list[Run], fld: str, op: Callable[[float, float], float]) -> list[float]:
    bv = {r.seed: r.record.get(fld) for r in b if not r.failed}
    return [op(r.record[fld], bv[r.seed]) for r in a if not r.failed and r.record.get(fld) is not None
            and bv.get(r.seed) is not None]


def differences_table(tree: RunTree) -> Table:
    cols = ["task", "ratio", "comparison", "metric", "n_seeds", *CI, "scratch_worse"]
    rows = []
    for task in tree.tasks:
        metric = tree.metric(task, tree.runs)
        higher = higher_is_better(metric or "")  # the metric's own direction (heads.task_metrics), stated once
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

        for arm in sorted(tree.arm_names(task, "redundancy"), key=order):
            trained = tree.select(task, **BASELINE) if arm == "base-mha" else tree.select(task, "gqa", arm, 0.0)
            sources = {t.path.relative_to(tree.root).as_posix() for t in trained}
            pruned = [r for r in tree.runs if r.task == task and r.from_run in sources and r.ratio == ratio
                      and (r.variant == "posthoc_gqa" or (r.variant, r.arm) == ("posthoc", "importance"))]

            probes = by_seed(tree, "redundancy", task, arm)

            def red(pooling: str, key: str = "redundancy_ratio", probes: dict = probes) -> float | None:
                return mean(r.get(key) for r in _value_probes(probes, pooling))

            knob = tree.knob(task, "redundancy", arm)
            rows.append([task, arm, int(knob) if knob is not None else None, len(probes),
                         mean(_ok(trained, "value")), red("token"), red("mean"), red("mean", "max_similarity"),
                         red("mean", "threshold"), ratio, *ci(_ok(pruned, "value_change"))])
    return Table("Grouped-query attention and size: redundancy and the cost of pruning", cols, rows, caption=(
        "A3, per model (`base-mha` the baseline, `base-kvK` its grouped-query variants with K key/value heads, "
        "`narrow-*` a narrower model with as many heads): the task metric; the share of redundant units (cosine "
        "above `threshold` to another of its site; a grouped-query model's unit is its key/value group) per "
        "token and of sequence-mean outputs (the report's definition), and the most alike pair under the latter; "
        "`value_change`: the metric's relative change when pruned post hoc to `pruned_ratio` (means over "
        "seeds, Student-t 95 % intervals)."))


def redundancy_genre_table(tree: RunTree) -> Table:
    """D7's redundancy view: the baseline's share of redundant heads on each genre's held-out text, on the genres
    pooled and stratified (redundant in every genre), under both similarity definitions."""
    cols = ["task", "pooling", "genre", "n_seeds", "redundancy_ratio", "ci_low", "ci_high", "max_similarity",
            "threshold"]
    rows = []
    for task in tree.tasks:
        for arm in tree.arm_names(task, "redundancy_genre"):
            per_seed = by_seed(tree, "redundancy_genre", task, arm)
            for pooling in ("token", "mean"):
                views: dict[str, list[dict]] = defaultdict(list)
                probes = _value_probes(per_seed, pooling)
                # a genre's row is a probe's sub-dict without the threshold: every view shares the probes'
                threshold = mean(r.get("threshold") for r in probes)
                for r in probes:
                    views[str(r.get("view"))].append(r)
                    for genre, d in sorted(as_dict(r.get("domains")).items()):
                        if isinstance(d, dict):
                            views[genre].append(d)
                order = sorted(v for v in views if v not in ("pooled", "stratified")) + ["pooled", "stratified"]
                for view in (v for v in order if v in views):
                    ratio = [v for r in views[view] if (v := number(r.get("redundancy_ratio"))) is not None]
                    rows.append([task, pooling, view, len(ratio), *ci(ratio, "share"),
                                 mean(r.get("max_similarity") for r in views[view]), threshold])
    return Table("Redundancy by genre: each genre, pooled and stratified", cols, rows, caption=(
        "The trained baseline on each genre's held-out chapters: the share of heads with a partner above cosine "
        "`threshold` in that genre, on the genres' text pooled (`pooled`), and in every genre (`stratified`, the "
        "report's safe view), per token and of sequence-mean outputs (the report's definition); the most alike pair of "
        "heads of a site; means over seeds (Student-t 95 % interval of the share). The report: a head redundant "
        "on average was the only one carrying one domain."))


# -- scaling ------------------------------------------------------------------------------------------
# The scaling sweep's variants (replications/scaling/runs.py): per size (the arm), the baseline pruned post hoc,
# that pruned model fine-tuned, and its layout trained from scratch.
SIZE_POSTHOC, SIZE_FINETUNED, SIZE_SCRATCH = "size_posthoc", "size_posthoc_ft", "size_scratch"


def scaling_table(tree: RunTree) -> Table:
    """Where over-provisioning begins: per task and size, the full model's parameters, heads and metric, what
    pruning it post hoc cost (A1: the pruned model's ``value_change`` against its own baseline, per seed) and A2's
    gap (the pruned layout from scratch against the pruned model fine-tuned, relative, paired by seed); smallest
    size first. Each size's baseline is the run its pruned models start from (``from_run``), so the preset's shared
    baseline (arm ``none``) and a size's own (arm = the size) read alike."""
    cols = ["task", "size", "params", "heads", "metric", "n_seeds", "baseline", "a1_cost", "a1_ci_low",
            "a1_ci_high", "a2_gap", "a2_ci_low", "a2_ci_high", "a2_n", "ratio"]
    rows = []
    for task in tree.tasks:
        runs = tree.select(task)
        metric = tree.metric(task, runs)
        by_label = {r.path.relative_to(tree.root).as_posix(): r for r in runs}
        for (size, ratio), pruned in group_by([r for r in runs if r.variant == SIZE_POSTHOC],
                                              lambda r: (r.arm, r.ratio)).items():
            bases = [b for r in pruned if (b := by_label.get(r.from_run or "")) is not None]
            same = [r for r in runs if r.arm == size and r.ratio == ratio]
            gaps = paired([r for r in same if r.variant == SIZE_SCRATCH],
                          [r for r in same if r.variant == SIZE_FINETUNED],
                          "value", lambda x, y: (x - y) / abs(y) if y else float("nan"))
            gaps = [g for g in gaps if number(g) is not None]
            heads = mean(_ok(bases, "heads"))
            rows.append([task, size, mean(_ok(bases, "params")), None if heads is None else round(heads), metric,
                         len([b for b in bases if not b.failed]), mean(_ok(bases, "value")),
                         *ci(_ok(pruned, "value_change")), *ci(gaps), len(gaps), ratio])
    rows.sort(key=lambda r: (r[0], r[2] is None, r[2] or 0.0, r[1]))
    return Table("Where over-provisioning begins: the cost of pruning and A2's gap by model size", cols, rows,
                 formats={"params": ".0f"}, caption=(
        "Per model size (smallest first; `params` and `heads` of the full model, `heads` over all layers): the full "
        "model's metric (`baseline`), what pruning `ratio` of its heads post hoc by importance cost it (`a1_cost`: "
        "the relative change of the metric, (pruned - full) / full, per seed; A1 holds under 0.033), and A2's gap "
        "(`a2_gap`: the pruned layout trained from scratch under the full model's budget minus the pruned model "
        "after a short fine-tune, relative to the latter, per seed; over-provisioning when above 0, scratch "
        "worse). Means over seeds with Student-t 95 % intervals; the ledger (claims.md) judges each, its "
        "preconditions and multiplicity included."))


# The built-in tables by name; a replication's report.yaml names one by leaving its spec empty.
BUILT_IN: dict[str, Callable[[RunTree], Table]] = {
    "speed": speed_table,
    "differences": differences_table, "gqa": gqa_table,
    "redundancy_genre": redundancy_genre_table, "scaling": scaling_table,
}


class Tables:
    """A replication's tables over one run tree, each built once (figures draw from them): declared ones from
    their spec, the rest built in."""

    def __init__(self, tree: RunTree, specs: Mapping[str, TableSpec | None]):
        self.tree, self.specs, self._built = tree, specs, {}

    def __call__(self, name: str) -> Table:
        if name not in self._built:
            spec = self.specs.get(name)
            self._built[name] = spec.build(self.tree) if spec is not None else BUILT_IN[name](self.tree)
        return self._built[name]

    def records(self, name: str) -> list[dict]:
        return records(self(name))
