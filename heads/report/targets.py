"""Time- and steps-to-target: the target is a share above the baseline's median final validation loss."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence

DEFAULT_TOL = 0.01


def target_loss(final_losses: Iterable[float | None], tol: float = DEFAULT_TOL) -> float | None:
    """``median(final val_loss over seeds) * (1 + tol)``; None when no seed has a final loss."""
    values = [float(v) for v in final_losses if v is not None]
    return statistics.median(values) * (1 + tol) if values else None


def first_reaching(metrics: Sequence[Mapping], target: float, key: str = "val_loss") -> Mapping | None:
    """The first record whose ``key`` is at or below ``target``; None when the run never got there."""
    for record in metrics:
        value = record.get(key)
        if value is not None and value <= target:
            return record
    return None
