"""What each task's models reach before anything is pruned: the trained baseline beside the trivial baselines.

A claim is only testable where its models can show it (replications/preconditions.yaml); this table puts the
numbers those preconditions read side by side, per task, over seeds: the baseline's task metric on the
evaluation split, each yardstick precondition's value (lm-converged: the final validation loss over the same
model's trained twice as long, on the seeds that longer run has), how much its validation loss still fell over
its last half of training, and the trivial baselines of the same examples (``heads trivial``: word overlap for
pair tasks). ``heads claims`` writes it beside the ledger (``OUT/baselines.csv``).
"""

from __future__ import annotations

from collections.abc import Iterable

from heads.report.collect import BASELINE, RunTree, as_dict, number
from heads.report.fmt import Table
from heads.report.measures import precondition_values
from heads.report.spec import Precondition
from heads.report.table_spec import ci

COLUMNS = ["task", "model", "metric", "value", "ci_low", "ci_high", "n_seeds", "name", "n_failed"]
# how much a trained baseline's validation loss still fell over its last half, shown for every one
CONVERGENCE = "late_improvement"


def baselines_table(tree: RunTree, yardsticks: Iterable[Precondition] = ()) -> Table:
    """One row per (task, model, metric): ``model`` is ``baseline`` for the trained model and ``trivial`` for a
    trivial one (``name`` says which); a mean over seeds with a Student-t 95 % interval. Each precondition of
    ``yardsticks`` that compares a run with a yardstick (``b``) adds its value, ``metric`` its name, exactly as
    the ledger reads it."""
    yardsticks = sorted({p.name: p for p in yardsticks if p.b is not None}.values(), key=lambda p: p.name)
    rows = []
    for task in tree.tasks:
        runs = tree.select(task, **BASELINE)
        ok = [r for r in runs if not r.failed]
        metric = tree.metric(task, runs)
        failed = len(runs) - len(ok)
        if runs:
            for fld, name in ((metric, "value"), (CONVERGENCE, CONVERGENCE)):
                values = [number(r.record.get(name)) for r in ok]
                values = [v for v in values if v is not None]
                if values or failed:
                    rows.append([task, "baseline", fld, *ci(values, fld), len(values), runs[0].group, failed])
            rows += [_yardstick_row(tree, p) for p in yardsticks if p.a.get("task") == task]
        trivial: dict[str, list[float]] = {}
        for data in tree.analyses(task, "trivial").values():
            for name, result in sorted(as_dict(as_dict(data).get("baselines")).items()):
                value = number(result.get(metric)) if isinstance(result, dict) else None
                if value is not None:
                    trivial.setdefault(name, []).append(value)
        for name, values in trivial.items():
            rows.append([task, "trivial", metric, *ci(values, metric), len(values), name, 0])
    return Table("Baselines", COLUMNS, rows, caption=baselines_caption())


def _yardstick_row(tree: RunTree, pre: Precondition) -> list:
    """``pre``'s value per seed of its yardstick, ``(a - b) / |b|``, over seeds: what the ledger reads."""
    gaps, problems = precondition_values(tree, pre.a, pre.b)
    values = list(gaps.values())
    where = "/".join(str(pre.b.get(k, "*")) for k in ("variant", "arm", "ratio")) if pre.b else ""
    return [pre.a["task"], "baseline", pre.name, *ci(values), len(values), where, len(problems)]


def baselines_caption() -> str:
    return ("What each task's models reach before pruning: the trained baseline's metric on the evaluation split, "
            "the value of each precondition that compares it with a yardstick run (`lm-converged`: its final "
            "validation loss relative to the same model's trained twice as long, on the seeds that run has, `name`; "
            "at most 0.02 when converged, negative when the longer run overfits) and "
            f"`{CONVERGENCE}` (its validation loss's relative fall over the last half of training), beside trivial "
            "baselines of the same examples (`name`: word overlap for pair tasks); means "
            "over seeds with Student-t 95 % intervals, clipped to what the metric can take. The claims' "
            "preconditions (replications/preconditions.yaml) read these numbers.")
