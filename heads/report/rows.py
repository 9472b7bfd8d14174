"""Tidy rows of a run tree: one flat mapping per thing measured, what the table specs filter and group.

``rows(tree, "runs")`` is one row per run (its record, :mod:`heads.report.collect`). Every other kind is one
row per unit an analysis measured, per seed (a head, a site, a curve's level, a model, a genre, a similarity
definition), carrying ``task``, ``arm``, the arm's ``knob`` and ``seed`` beside the unit's own fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from heads.report.collect import RunTree, as_dict, as_list, number
from heads.report.curves import curve_series
from heads.report.sites import site_kind, site_label


def _site(site: str) -> dict:
    return {"site": site, "label": site_label(site), "kind": site_kind(site)}


def _heads(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Single-head ablation: one row per head (``heads ablate``)."""
    for r in as_list(data.get("heads")):
        if isinstance(r, dict) and isinstance(r.get("site"), str) and all(
                number(r.get(k)) is not None for k in ("head", "delta_loss")):
            # the smallest change its test detects in the claims' unit: relative to the model's loss for a loss
            # test, in accuracy points (a share of examples) for an accuracy test
            base, detectable = number(data.get("baseline_loss")), number(r.get("detectable"))
            test = data.get("test")
            scaled = None if detectable is None else detectable / base if test == "loss" and base else (
                detectable if test == "accuracy" else None)
            yield {**r, **_site(r["site"]), "head": int(r["head"]), "test": test,
                   "lowers_loss": r["delta_loss"] < 0, "detectable_scaled": scaled}


def _all_but_one(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Each site reduced to its best head: the loss it adds, alone and relative to the full model's."""
    table = data.get("all_but_one")
    for site, r in (sorted(table.items()) if isinstance(table, dict) else ()):
        base = r.get("baseline_loss") if isinstance(r, dict) else None
        if number(base) is None or not ("delta_loss" in r or "loss" in r):
            continue
        loss = number(r.get("loss"))  # a delta the analysis did not write: its loss against the full model's
        delta = number(r["delta_loss"]) if "delta_loss" in r else loss - base if loss is not None else None
        accuracy = [r.get(k) for k in ("accuracy", "baseline_accuracy")]
        best = number(r.get("best_head"))
        yield {**_site(site), "best_head": int(best) if best is not None else None, "delta": delta,
               "relative_delta": delta / base if delta is not None and base else None,
               "delta_accuracy": accuracy[0] - accuracy[1] if None not in map(number, accuracy) else None}


def _curve(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A pruning curve's levels: the metric, its share of the unpruned model's and the loss."""
    curve = curve_series(data) if isinstance(data.get("points"), list) else None
    if curve is None:
        return
    for x, v, y, p in zip(curve.ratios, curve.values, curve.retained, curve.points, strict=True):
        yield {"ratio": round(x, 6), "value": v, "retained": y, "loss": p.get("loss"), "metric": curve.field,
               "step": int(knob) if knob is not None else None}


SCALED = {"param_mb": ("param_bytes", 2**-20), "optimizer_mb": ("optimizer_bytes", 2**-20),
          "peak_mb": ("peak_bytes", 2**-20), "step_ms": ("step_s", 1e3), "cpu_step_ms": ("cpu_step_s", 1e3)}


def _models(labels: dict[str, str | None]) -> Callable[[Any, str, float | None], Iterator[dict]]:
    """A job that measured several models side by side (``heads memory``, ``heads clock``): a row per model,
    named as ``labels`` says (None: the arm's own name), bytes in MiB and seconds in milliseconds."""

    def flatten(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
        models = data.get("models")
        for key, label in labels.items():
            r = models.get(key) if isinstance(models, dict) else None
            if isinstance(r, dict):
                scaled = {name: r[k] * scale for name, (k, scale) in SCALED.items() if number(r.get(k)) is not None}
                yield {**r, **scaled, "role": key, "model": label or arm, "cap_batch": data.get("cap_batch")}

    return flatten


def _shifted(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A pruned model against its reference (``heads shift``): in domain, then each shifted corpus (a genre)."""
    if isinstance(data.get("in_domain"), dict):
        yield {**data["in_domain"], "domain": "in", "genre": None}
    for genre, r in sorted(as_dict(data.get("shifted")).items()):
        if isinstance(r, dict):
            yield {**r, "domain": "shifted", "genre": genre}


def _definitions(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A redundancy probe: a row per similarity definition (``heads redundancy``)."""
    for r in as_list(data.get("rows")):
        if isinstance(r, dict):
            yield {**r, "step": int(knob) if knob is not None else "final"}


def _roles(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Head roles (``heads roles``): a row per head, kept by the L0 model or not."""
    for r in as_list(data.get("heads") if isinstance(data, dict) else data):
        if isinstance(r, dict):
            yield {**r, "kind": r.get("kind") or site_kind(str(r.get("site", ""))), "kept": bool(r.get("kept"))}


def _timed(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A speed job (``heads speed``): a row per (pruned share, batch) timed."""
    yield from (r for r in as_list(data.get("rows")) if isinstance(r, dict))


# kind of rows -> (kind of analysis it reads, flatten one seed's JSON)
KINDS: dict[str, tuple[str, Callable[[Any, str, float | None], Iterator[dict]]]] = {
    "ablation": ("ablation", _heads),
    "all_but_one": ("ablation", _all_but_one),
    "curve": ("curve", _curve),
    "curve_at": ("curve_at", _curve),
    "speed": ("speed", _timed),
    "roles": ("roles", _roles),
    "memory": ("memory", _models({"reference": "baseline", "model": None})),
    "clock": ("clock", _models({"reference": "baseline", "model": None, "dropout": "baseline + dropout"})),
    "shift": ("shift", _shifted),
    **{kind: (kind, _definitions) for kind in ("redundancy", "redundancy_at", "redundancy_genre")},
}


def by_seed(tree: RunTree, kind: str, task: str, arm: str) -> dict[int, list[dict]]:
    """One analysis arm's tidy rows by seed: every seed that wrote a result, those with no rows too."""
    if kind not in KINDS:
        raise KeyError(f"no rows of kind {kind!r}; known: {['runs', *KINDS]}")
    analysis, flatten = KINDS[kind]
    knob = tree.knob(task, analysis, arm)
    found = {}
    for seed, data in tree.analyses(task, analysis, arm).items():
        if isinstance(data, dict) or kind == "roles":  # head roles were once written as a bare list
            found[seed] = [{"task": task, "arm": arm, "knob": knob, "seed": seed, **r}
                           for r in flatten(data, arm, knob)]
    return found


def rows(tree: RunTree, kind: str) -> list[dict]:
    """The tidy rows of one kind, in the tree's order: tasks, then arms, then seeds (sorted)."""
    if kind == "runs":
        return [{**r.record, "knob": r.knob, "method": r.method, "from_run": r.from_run} for r in tree.runs]
    analysis = KINDS[kind][0] if kind in KINDS else kind
    return [r for task in tree.tasks for arm in tree.arm_names(task, analysis)
            for seeded in by_seed(tree, kind, task, arm).values() for r in seeded]


def frame(tree: RunTree, kind: str = "runs"):
    """The tidy rows of one kind as a pandas DataFrame, for looking at results beyond the declared tables."""
    import pandas as pd

    return pd.DataFrame(rows(tree, kind))
