"""Cached-decoding speed (``heads decode-speed``) read one way for the tables, the figure and the claims: a row's
rounds against its reference's rounds (the unpruned model's, timed interleaved with it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from heads.report.collect import number

MEASURES = ("speedup", "cpu_speedup", "log_speedup", "of_bound", "gain_share")
PER_ROUND = "n counts paired timing rounds of one job (the variants interleaved, their order shuffled per round)"


def per_round(row: Mapping[str, Any], reference: Mapping[str, Any], measure: str) -> list[float]:
    """One value per round of ``row`` against its reference's row of the same round: ``speedup`` (wall clock),
    ``cpu_speedup`` (process CPU time), ``log_speedup``, ``of_bound`` (the speed-up over its bound) or
    ``gain_share`` (log speed-up over log bound: the share of the gain the bound allows that was reached)."""
    if measure not in MEASURES:
        raise ValueError(f"measure {measure!r}: one of {list(MEASURES)}")
    key = "cpu_times" if measure == "cpu_speedup" else "times"
    pairs = zip(reference.get(key) or [], row.get(key) or [], strict=False)
    ratios = [a / b for a, b in ((number(x), number(y)) for x, y in pairs) if a and b and a > 0 and b > 0]
    if measure in ("speedup", "cpu_speedup"):
        return ratios
    if measure == "log_speedup":
        return [math.log(x) for x in ratios]
    bound = number(row.get("bound"))
    if bound is None or bound <= 0:
        return []
    if measure == "of_bound":
        return [x / bound for x in ratios]
    return [math.log(x) / math.log(bound) for x in ratios] if abs(math.log(bound)) > 1e-9 else []


def matching(rows: Sequence[Mapping[str, Any]], model: str, phase: str, batch: Any = None,
             context: Any = None) -> list[Mapping[str, Any]]:
    """The rows of one variant (``model``) and phase, narrowed by batch and context where given."""
    return [r for r in rows if r.get("model") == model and r.get("phase") == phase
            and (batch is None or r.get("batch") == batch) and (context is None or r.get("context") == context)]


def reference_of(rows: Sequence[Mapping[str, Any]], row: Mapping[str, Any], reference: str) -> Mapping | None:
    """The reference variant's row of the same phase, context and batch."""
    found = matching(rows, reference, str(row.get("phase")), row.get("batch"), row.get("context"))
    return found[0] if found else None
