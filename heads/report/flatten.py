"""One seed's analysis JSON flattened to tidy rows: a function per shape of result, which
:mod:`heads.report.kinds` assigns to the kinds of rows that read it.

Every flattener takes ``(data, arm, knob)`` (the seed's JSON, the arm it belongs to and the number the run sheet
declared that arm with) and yields flat mappings; a field that is missing or not what it should be yields no
row rather than failing, so one damaged file costs its rows, not the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from heads.report.collect import as_dict, as_list, number
from heads.report.curves import curve_series
from heads.report.site_labels import parse_site, site_kind, site_label

Flatten = Callable[[Any, str, "float | None"], Iterator[dict]]
BLEU_ALPHA = 0.01  # the level Michel et al. test single heads at, as the claims do


def _site(site: str) -> dict:
    return {"site": site, "label": site_label(site), "kind": site_kind(site)}


def heads(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
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
            # BLEU's bootstrap: the size of a change the test left undetected at the claims' p < 0.01 (a head
            # significant there has none), so a table can say how large a change could go unnoticed
            p, delta_bleu = number(r.get("p_value")), number(r.get("delta_bleu"))
            undetected = abs(delta_bleu) if test == "bleu" and delta_bleu is not None and p is not None and \
                p >= BLEU_ALPHA else None
            parsed = parse_site(r["site"])
            yield {**r, **_site(r["site"]), "head": int(r["head"]), "test": test,
                   "lowers_loss": r["delta_loss"] < 0, "detectable_scaled": scaled, "undetected_bleu": undetected,
                   "layer": parsed[1] if parsed else None, "examples": number(data.get("examples"))}


def all_but_one(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Each site reduced to its best head: the loss it adds, alone and relative to the full model's."""
    table = data.get("all_but_one")
    for site, r in (sorted(table.items()) if isinstance(table, dict) else ()):
        base = number(r.get("baseline_loss")) if isinstance(r, dict) else None
        if base is None or "loss" not in r:
            continue
        loss = number(r["loss"])  # the loss with the site's best head alone, against the full model's
        delta = loss - base if loss is not None else None
        accuracy = [r.get(k) for k in ("accuracy", "baseline_accuracy")]
        best = number(r.get("best_head"))
        yield {**_site(site), "best_head": int(best) if best is not None else None, "delta": delta,
               "relative_delta": delta / base if delta is not None and base else None,
               "delta_accuracy": accuracy[0] - accuracy[1] if None not in map(number, accuracy) else None}


def curve(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A pruning curve's levels: the metric, its share of the unpruned model's and the loss."""
    curve = curve_series(data) if isinstance(data.get("points"), list) else None
    if curve is None:
        return
    params = data.get("params")
    orders = number(params.get("orders")) or 1 if isinstance(params, dict) else 1  # random orders averaged
    for x, v, y, p in zip(curve.ratios, curve.values, curve.retained, curve.points, strict=True):
        yield {"ratio": round(x, 6), "value": v, "retained": y, "loss": p.get("loss"), "metric": curve.field,
               "step": int(knob) if knob is not None else None, "orders": orders, "examples": p.get("examples")}


SCALED = {"param_mb": ("param_bytes", 2**-20), "optimizer_mb": ("optimizer_bytes", 2**-20),
          "peak_mb": ("peak_bytes", 2**-20), "step_ms": ("step_s", 1e3), "cpu_step_ms": ("cpu_step_s", 1e3)}


def models(labels: dict[str, str | None]) -> Flatten:
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


def shifted(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A pruned model against its reference (``heads shift``): in domain, then each shifted corpus (a genre)."""
    if isinstance(data.get("in_domain"), dict):
        yield {**data["in_domain"], "domain": "in", "genre": None}
    for genre, r in sorted(as_dict(data.get("shifted")).items()):
        if isinstance(r, dict):
            yield {**r, "domain": "shifted", "genre": genre}


def definitions(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A redundancy probe: a row per similarity definition (``heads redundancy``)."""
    for r in as_list(data.get("rows")):
        if isinstance(r, dict):
            yield {**r, "step": int(knob) if knob is not None else "final"}


def roles(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Head roles (``heads roles``): a row per head, kept by the L0 model or not."""
    for r in as_list(data.get("heads")):
        if isinstance(r, dict):
            yield {**r, "kind": r.get("kind") or site_kind(str(r.get("site", ""))), "kept": bool(r.get("kept"))}


def timed(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A speed job (``heads speed``): a row per (pruned share, batch) timed."""
    yield from (r for r in as_list(data.get("rows")) if isinstance(r, dict))


MIB = {"cache_mib": "cache_bytes", "peak_rise_mib": "peak_rise_bytes", "weight_mib": "weight_bytes",
       "decode_weight_mib": "decode_weight_bytes"}


def decoding(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """A cached-decoding job (``heads decode-speed``): a row per (variant, phase, context, batch), bytes also in
    MiB and prefill FLOPs in GFLOPs."""
    for r in as_list(data.get("rows")):
        if isinstance(r, dict):
            scaled = {name: r[k] / 2**20 for name, k in MIB.items() if number(r.get(k)) is not None}
            gflops = r["flops"] / 1e9 if number(r.get("flops")) is not None else None
            yield {**r, **scaled, "gflops": gflops, "reference": data.get("reference")}


def masks(data: Any, arm: str, knob: float | None) -> Iterator[dict]:
    """Masked pruning (``heads mask``): the unmasked model (``unit`` none), then a row per (unit, order, ratio)."""
    base = as_dict(data.get("baseline"))
    if number(base.get("loss")) is None:
        return
    yield {"unit": "none", "order": "none", "ratio": 0.0, "loss": base["loss"], "perplexity": base.get("perplexity"),
           "delta_loss": 0.0, "relative": 0.0, "heads_closed": 0, "units_closed": 0}
    for r in as_list(data.get("rows")):
        if isinstance(r, dict) and number(r.get("loss")) is not None and number(r.get("ratio")) is not None:
            # the model's count of the row's unit (query heads, or key/value groups of equal size)
            heads, closed, units = (number(r.get(k)) for k in ("heads", "heads_closed", "units_closed"))
            total = round(heads * units / closed) if heads and closed and units is not None else None
            yield {**{k: v for k, v in r.items() if k != "closed"}, "units": total}
