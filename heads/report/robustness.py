"""Which verdicts survive a perturbation that imitates another machine.

``benchmarks/bench_perturbation.py`` re-runs the runs that decide verdicts under
another kernel instruction set and thread count and records, per claim, the
verdict of the run it compared against (``base``) and the perturbed one. The
ledger says per claim what that measurement found: the same verdict, a
*fragile* one, or nothing (not measured, or measured on an earlier run whose
verdict was not this one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NOT_MEASURED = "not measured"
FRAGILE = "fragile"


def load(path: str | Path | None) -> dict | None:
    """The measurement (``perturbation.json``), or None when there is none; a malformed file is an error."""
    if path is None or not Path(path).is_file():
        return None
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("claims"), dict) or "perturbation" not in data:
        raise ValueError(f"{path}: not a perturbation measurement (needs 'perturbation' and 'claims')")
    return data


def robustness(claim_id: str, verdict: str, measurement: dict[str, Any] | None) -> str:
    """What the measurement says about this claim's current verdict."""
    if measurement is None:
        return NOT_MEASURED
    found = measurement["claims"].get(claim_id)
    if not isinstance(found, dict):
        return NOT_MEASURED
    # a verdict carried over from an earlier measurement names its own perturbation
    under = found.get("under") or measurement["perturbation"].get("label", "the perturbation")
    if found.get("base") != verdict:
        return f"{NOT_MEASURED} for this verdict (the measurement compared a run that gave {found.get('base')})"
    if found.get("perturbed") == verdict:
        return f"same verdict under {under}"
    return f"{FRAGILE}: {found.get('perturbed')} under {under}"
