"""Pruning curves (``heads curve``): a curve's usable levels, its retained share, and the numbers claims read
off it (the value at a share, the mean retained up to a share, the share removable within a budget)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from heads.report.collect import number
from heads.task_metrics import higher_is_better, retained_defined


@dataclass(frozen=True)
class Curve:
    """One pruning curve: pruned share, the field's value and its retained share at each level, and the points."""

    field: str
    ratios: list[float]
    values: list[float]
    retained: list[float | None]
    points: list[dict]


def curve_series(data: Mapping[str, Any], fld: str | None = None) -> Curve | None:
    """The usable points of one curve JSON; ``retained`` is the field relative to level 0, oriented so that
    1 = nothing lost and smaller = worse (None at every level where level 0 scores too near zero:
    :func:`heads.task_metrics.retained_defined`). None when there is no level 0 or no usable value."""
    fld = fld or data.get("metric") or "loss"
    points = [p for p in data.get("points", []) if isinstance(p, dict) and number(p.get("ratio")) is not None
              and number(p.get(fld)) is not None]
    points.sort(key=lambda p: p["ratio"])
    if not points or points[0]["ratio"] != 0 or points[0][fld] == 0:
        return None
    values = [float(p[fld]) for p in points]
    name = fld.rsplit(".", 1)[-1]  # eval.bleu -> bleu; retained shares are the report's own, larger is better
    higher = name in ("value_retained", "retained") or higher_is_better(name)
    if not higher and any(v <= 0 for v in values):
        return None
    retained: list[float | None] = [v / values[0] if higher else values[0] / v for v in values]
    if not retained_defined(fld, values[0]):  # an unpruned model near zero: the values stand, no share
        retained = [None] * len(values)
    return Curve(fld, [float(p["ratio"]) for p in points], values, retained, points)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """Linear interpolation inside ``xs`` (sorted); None outside."""
    for i in range(len(xs)):
        if abs(xs[i] - x) < 1e-9:
            return ys[i]
        if i and xs[i - 1] < x < xs[i]:
            w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
            return ys[i - 1] + w * (ys[i] - ys[i - 1])
    return None


def curve_area(xs: Sequence[float], ys: Sequence[float], upto: float) -> float | None:
    """Mean of ``ys`` over [0, upto] (trapezoids); None when the curve stops before ``upto``."""
    if upto <= 0 or not xs or xs[-1] < upto - 1e-9:
        return None
    end = interpolate(xs, ys, upto)
    px = [x for x in xs if x < upto - 1e-9] + [upto]
    py = [y for x, y in zip(xs, ys, strict=True) if x < upto - 1e-9] + [end]
    area = sum((px[i] - px[i - 1]) * (py[i] + py[i - 1]) / 2 for i in range(1, len(px)))
    return area / upto


def removable(xs: Sequence[float], ys: Sequence[float], budget: float) -> float:
    """The largest pruned share before the first level that loses more than ``budget`` (relative)."""
    best = 0.0
    for x, y in zip(xs, ys, strict=True):
        if y < 1 - budget - 1e-12:
            break
        best = x
    return best
