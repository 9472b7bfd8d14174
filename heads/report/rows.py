"""Tidy rows of a run tree: one flat mapping per thing measured, what the table specs filter and group.

``rows(tree, "runs")`` is one row per run (its record, :mod:`heads.report.collect`). Every other kind is one
row per unit an analysis measured, per seed (a head, a site, a curve's level, a model, a genre, a similarity
definition), carrying ``task``, ``arm``, the arm's ``knob`` and ``seed`` beside the unit's own fields.
"""

from __future__ import annotations

from heads.report.collect import RunTree
from heads.report.kinds import KINDS


def by_seed(tree: RunTree, kind: str, task: str, arm: str) -> dict[int, list[dict]]:
    """One analysis arm's tidy rows by seed: every seed that wrote a result, those with no rows too."""
    if kind not in KINDS:
        raise KeyError(f"no rows of kind {kind!r}; known: {['runs', *KINDS]}")
    analysis, flatten = KINDS[kind].analysis, KINDS[kind].flatten
    knob = tree.knob(task, analysis, arm)
    found = {}
    for seed, data in tree.analyses(task, analysis, arm).items():
        if isinstance(data, dict):
            found[seed] = [{"task": task, "arm": arm, "knob": knob, "seed": seed, **r}
                           for r in flatten(data, arm, knob)]
    return found


def rows(tree: RunTree, kind: str) -> list[dict]:
    """The tidy rows of one kind, in the tree's order: tasks, then arms, then seeds (sorted)."""
    if kind == "runs":
        return [{**r.record, "knob": r.knob, "strategy": r.strategy, "from_run": r.from_run} for r in tree.runs]
    analysis = KINDS[kind].analysis if kind in KINDS else kind
    return [r for task in tree.tasks for arm in tree.arm_names(task, analysis)
            for seeded in by_seed(tree, kind, task, arm).values() for r in seeded]


def frame(tree: RunTree, kind: str = "runs"):
    """The tidy rows of one kind as a pandas DataFrame, for looking at results beyond the declared tables."""
    import pandas as pd

    return pd.DataFrame(rows(tree, kind))
