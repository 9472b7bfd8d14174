"""Which verdicts survive a perturbation that imitates another machine.

``benchmarks/bench_perturbation.py`` re-runs the runs that decide verdicts under
another kernel instruction set and thread count, and ``benchmarks/bench_machines.py``
compares the whole DAG's results with another machine's; each records, per claim,
the verdict of the results it compared against (``base``) and the other one. The
ledger says per claim what the measurements found: the same verdict, a *fragile*
one (any measurement that gave another), or nothing (not measured, or measured on
earlier results whose verdict was not this one, or on other runs: a measurement records the effect of the
results it compared, and a ledger whose effect differs is of other runs, e.g. after the preset changed).

Producing a measurement is logistics and lives with the benchmarks; this module is the ledger's side only: it
reads the file ``heads claims --robustness`` is given and judges what it says about each verdict, a column of
claims.csv, so it stays in the library beside the ledger.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NOT_MEASURED = "not measured"
FRAGILE = "fragile"
SAME = "same verdict under"
OTHER_RUNS = f"{NOT_MEASURED} on these runs"
ANY = object()  # the caller gives no effect: the measurement is taken to be of these runs


def load(path: str | Path | None) -> dict | None:
    """The measurement (``perturbation.json``), or None when there is none; a malformed file is an error."""
    if path is None or not Path(path).is_file():
        return None
    data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # a byte-order mark reads as none
    if not isinstance(data, dict) or not isinstance(data.get("claims"), dict) or "perturbation" not in data:
        raise ValueError(f"{path}: not a perturbation measurement (needs 'perturbation' and 'claims')")
    return data


def robustness(claim_id: str, verdict: str, measurement: dict[str, Any] | list[dict[str, Any]] | None,
               effect: Any = ANY) -> str:
    """What the measurements (one, several, or none) say about this claim's current verdict: *fragile* if any
    of them gave another verdict, else the ones that gave the same, else not measured. ``effect``: the ledger's
    effect (None where it has none); a measurement of results whose effect was another is of other runs and
    says nothing about these."""
    many = measurement if isinstance(measurement, (list, tuple)) else [measurement]
    measurements = [m for m in many if m is not None]
    said = [_one(claim_id, verdict, m, effect) for m in measurements]
    fragile = [s for s in said if s.startswith(FRAGILE)]
    if fragile:
        return "; ".join([fragile[0], *(s[len(FRAGILE) + 2:] for s in fragile[1:])])
    same = [s for s in said if s.startswith(SAME)]
    if same:
        return "; ".join([same[0], *(s[len(SAME) + 1:] for s in same[1:])])
    return next((s for s in said if s != NOT_MEASURED), NOT_MEASURED)


def _identifies(effect: Any) -> bool:
    """An effect that can tell runs apart: a number, not NaN, and not 0 to the ledger's 4 decimals (the full
    mean and the one read back from claims.csv must agree). No effect, or 0 (a claim whose runs found nothing),
    is what any runs may give."""
    return isinstance(effect, (int, float)) and effect == effect and abs(effect) >= 5e-5


def _compared(found: dict[str, Any], effect: float, symmetric: bool) -> bool:
    """Whether ``effect`` is the one the measurement compared (either side's, for two machines); measurements
    keep effects to 4 decimals at least: agree to that, or to 1e-3 relative."""
    sides = [found.get("effect_base"), *([found.get("effect_perturbed")] if symmetric else [])]
    return any(v is not None and abs(effect - v) <= 5e-5 + 1e-3 * abs(v) for v in sides)


def _one(claim_id: str, verdict: str, measurement: dict[str, Any], effect: Any = ANY) -> str:
    found = measurement["claims"].get(claim_id)
    if not isinstance(found, dict):
        return NOT_MEASURED
    if effect is not ANY and "effect_base" in found:  # a measurement that kept no effect cannot be checked
        if not _identifies(effect):
            return f"{OTHER_RUNS} (an effect of none or 0 cannot show these are the runs the measurement compared)"
        if not _compared(found, effect, bool(measurement.get("symmetric"))):
            return f"{OTHER_RUNS} (the measurement compared results of other runs, e.g. of an earlier preset)"
    # a verdict carried over from an earlier measurement names its own perturbation
    under = found.get("under") or measurement["perturbation"].get("label", "the perturbation")
    if measurement.get("symmetric") and found.get("perturbed") == verdict != found.get("base"):
        # two real machines: the ledger may be rendered from either side's results
        return f"{FRAGILE}: {found.get('base')} under {measurement['perturbation'].get('here', 'the other side')}"
    if found.get("base") != verdict:
        return f"{NOT_MEASURED} for this verdict (the measurement compared a run that gave {found.get('base')})"
    if found.get("perturbed") == verdict:
        return f"{SAME} {under}"
    return f"{FRAGILE}: {found.get('perturbed')} under {under}"
