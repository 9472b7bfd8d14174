"""One seed's value for a claim's side, from its tidy rows (:mod:`heads.report.flatten`): the named estimators
a claim selector's ``measure`` picks where filtering rows and taking a field cannot say it (a share of
significant heads, a curve's area, a model's row of a side-by-side job).

Each takes ``(rows, selector)`` (a curve's: its JSON) and returns a number, a :class:`Share` of countable units,
or None when the seed has nothing to measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from heads.report.collect import number
from heads.report.curves import curve_area, curve_series, interpolate, removable


@dataclass(frozen=True)
class Share:
    """A measure that is ``k`` of ``n`` units: :func:`_per_seed` keeps its value and its counts."""

    k: int
    n: int


def site_kinds(sel: Mapping[str, Any]) -> set[str] | None:
    """The kinds of site (self, cross, ...) a selector's ``site_kind`` keeps; None: every site."""
    kinds = sel.get("site_kind")
    if kinds is None:
        return None
    return {kinds} if isinstance(kinds, str) else set(kinds)


def ablation(rows: list[dict], sel: Mapping[str, Any]) -> float | Share | None:
    """Single-head ablation over the heads of ``site_kind``: the share (or count) whose removal was significant,
    at the analysis's level or at ``alpha`` (Michel et al. report p < 0.01), or their mean loss change."""
    if sel.get("test") is not None and any(r["test"] != sel["test"] for r in rows):
        return None  # significance by another test than the claim's (a loss t-test is not BLEU's bootstrap)
    kinds, alpha = site_kinds(sel), sel.get("alpha")
    rows = [r for r in rows if kinds is None or r["kind"] in kinds]
    if not rows:
        return None
    if sel["measure"] == "mean_delta_loss":
        return sum(float(r["delta_loss"]) for r in rows) / len(rows)
    if sel["measure"] == "detectable":
        # the power of the tests that called a head harmless (not significant at alpha): the change (relative to
        # the loss, or in accuracy points) that 90 % of them would have detected; an upper quantile, since a head
        # whose removal changes nothing has no spread and so a flattering value
        found = sorted(float(r["detectable_scaled"]) for r in rows
                       if number(r.get("detectable_scaled")) is not None and not (
                           bool(r.get("significant")) if alpha is None else
                           isinstance(r.get("p_value"), (int, float)) and r["p_value"] < float(alpha)))
        return found[min(len(found) - 1, math.ceil(0.9 * len(found)) - 1)] if found else None
    count = sum(bool(r.get("significant")) if alpha is None else
                isinstance(r.get("p_value"), (int, float)) and r["p_value"] < float(alpha) for r in rows)
    return Share(count, len(rows)) if sel["measure"] == "significant_share" else float(count)


def all_but_one(rows: list[dict], sel: Mapping[str, Any]) -> float | Share | None:
    """Sites reduced to their best head: the share within ``budget`` of the loss, or the mean or largest change."""
    kinds, key = site_kinds(sel), "relative_delta" if sel.get("relative", True) else "delta"
    deltas = [float(r[key]) for r in rows if (kinds is None or r["kind"] in kinds) and r[key] is not None]
    if not deltas:
        return None
    if sel["measure"] == "harmless_share":
        return Share(sum(d <= float(sel.get("budget", 0.05)) for d in deltas), len(deltas))
    return max(deltas) if sel["measure"] == "max_delta" else sum(deltas) / len(deltas)


def curve_value(data: Mapping[str, Any], sel: Mapping[str, Any]) -> float | None:
    curve = curve_series(data, sel.get("field"))
    if curve is None:
        return None
    xs, how = curve.ratios, sel["measure"]
    if how in ("area", "removable", "retained") and None in curve.retained:
        return None  # the unpruned model scores too near zero for a share of it to mean anything
    if how == "area":
        return curve_area(xs, curve.retained, float(sel.get("upto", xs[-1])))
    if how == "removable":
        return removable(xs, curve.retained, float(sel.get("budget", 0.03)))
    if how == "step":  # the curve's resolution: the largest share pruned between two measured levels
        return max((b - a for a, b in zip(xs, xs[1:], strict=False)), default=None)
    if "ratio" not in sel:
        return None
    return interpolate(xs, curve.retained if how == "retained" else curve.values, float(sel["ratio"]))


def roles(rows: list[dict], sel: Mapping[str, Any]) -> float | Share | None:
    """The mean of ``field`` over the heads the L0 model kept, over those it pruned, or kept minus pruned; or, as
    Voita et al. state C2, a test over the heads *classified* by a role (``is_positional``: the job's threshold,
    Voita's 90 %): how many there are (``classified``), and the share of them kept (``classified_kept``)."""
    kinds, fld, how = site_kinds(sel), str(sel.get("field", "confidence")), sel["measure"]
    rows = [r for r in rows if kinds is None or r["kind"] in kinds]  # Voita et al.: the encoder's self-attention
    if how in ("classified", "classified_kept"):
        classified = [r for r in rows if r.get("is_positional")]
        if how == "classified":
            return float(len(classified))
        return Share(sum(bool(r.get("kept")) for r in classified), len(classified)) if classified else None
    kept = [float(r[fld]) for r in rows if r.get("kept") and isinstance(r.get(fld), (int, float))]
    gone = [float(r[fld]) for r in rows if not r.get("kept") and isinstance(r.get(fld), (int, float))]
    k = sum(kept) / len(kept) if kept else None
    g = sum(gone) / len(gone) if gone else None
    if how != "kept_minus_pruned":
        return k if how == "kept_mean" else g
    return None if k is None or g is None else k - g


def definition(rows: list[dict], sel: Mapping[str, Any]) -> float | Share | None:
    """The row of one similarity definition (``pooling``, default the report's ``mean``; ``space``, default
    ``value``, or ``attention`` for the JS row, which has one pooling; ``unit``, ``head`` or ``group``, default
    the first row that matches, the model's own unit when a job measured one) of a ``heads redundancy``
    result. Its ``redundancy_ratio`` is a :class:`Share` of the units counted per site where the row has them, so
    a share every seed measures alike (none redundant on every shard) is still tested, by the exact binomial
    over the units, rather than left undecidable for want of spread."""
    space = str(sel.get("space", "value"))
    pooling = str(sel["pooling"]) if "pooling" in sel else None if space == "attention" else "mean"
    found = [r for r in rows if (pooling is None or r.get("pooling") == pooling) and r.get("space") == space
             and ("unit" not in sel or r.get("unit") == str(sel["unit"]))]
    if not found:
        return None
    value = number(found[0].get(sel["measure"]))
    sites = found[0].get("sites")
    if sel["measure"] == "redundancy_ratio" and value is not None and isinstance(sites, Mapping) and sites:
        try:
            k = sum(int(v["redundant"]) for v in sites.values())
            n = sum(int(v["units"]) for v in sites.values())
        except (KeyError, TypeError, ValueError):
            return value
        if n and abs(k / n - value) < 1e-9:  # the counts the ratio was taken over
            return Share(k, n)
    return value


def shift(rows: list[dict], sel: Mapping[str, Any]) -> float | None:
    """A pruned model against its reference (``heads shift``): ``change`` (its relative loss of quality; in
    domain unless ``dataset`` names a shifted corpus), ``gap`` (a shifted corpus's change minus the in-domain
    one: positive when pruning costs more under the shift) or ``worst`` (the largest change over the corpora it
    was scored on: the domain pruning hurt most) or ``gap_nats`` (``gap`` in the loss the pruning adds, nats per
    token: the shifted corpus's minus the in-domain one)."""
    how, dataset = sel["measure"], sel.get("dataset")
    if how == "gap_nats":  # the loss pruning adds (nats per token) on the shifted corpus minus in domain
        home = next((r for r in rows if r["domain"] == "in"), None)
        away = next((r for r in rows if r["domain"] == "shifted" and r["genre"] == str(dataset)), None)
        parts = [number(r.get(k)) for r in (home, away) if r for k in ("model_loss", "reference_loss")]
        if len(parts) != 4 or None in parts:
            return None
        return (parts[2] - parts[3]) - (parts[0] - parts[1])
    if how == "worst":
        changes = [number(r.get("change")) for r in rows if r["domain"] == "shifted"]
        return max(changes) if changes and None not in changes else None
    row = next((r for r in rows if (r["domain"] == "in" if dataset is None else r["genre"] == str(dataset))), None)
    return number(row.get(how)) if row else None


def model_row(rows: list[dict], sel: Mapping[str, Any]) -> float | None:
    """One model of a job that measured several side by side (``heads memory``: the pruned one against its
    reference, largest batch within the reference's step peak and peak and optimizer ratios; ``heads clock``:
    ``model`` (the pruned arm, default) or ``dropout`` (the baseline under warm-up attention dropout), step and
    throughput ratios against the baseline on the wall or CPU clock)."""
    return next((number(r.get(sel["measure"])) for r in rows if r["role"] == str(sel.get("model", "model"))), None)


MASK_UNITS = ("head", "group", "none")


def mask_row(rows: list[dict], sel: Mapping[str, Any]) -> dict | None:
    """The row of ``heads mask`` a selector names: its ``unit`` (head, group; ``none``: the unmasked model) at
    its ``ratio``, in its ``order`` (importance, random, oracle; needed where the job ranked by several)."""
    unit = str(sel.get("unit", "head"))
    ratio = 0.0 if unit == "none" else number(sel.get("ratio"))
    order = sel.get("order")
    found = [r for r in rows if r.get("unit") == unit and ratio is not None and abs(float(r["ratio"]) - ratio) < 1e-9
             and (unit == "none" or order is None or r.get("order") == order)]
    return found[0] if len(found) == 1 else None  # several orders and none named: nothing to pick


def mask(rows: list[dict], sel: Mapping[str, Any]) -> float | None:
    """A mask's ``loss`` (nats per token), ``delta_loss`` (against the unmasked model) or ``relative`` change."""
    row = mask_row(rows, sel)
    return number(row.get(sel["measure"])) if row else None
