"""Learning-rate schedules as pure functions of the step: nothing to save, resume is exact."""

from __future__ import annotations

import math


def lr_at(step: int, base: float, warmup: int, total: int, kind: str) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warm-up, then ``kind`` decay."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    if kind == "constant":
        return base
    if kind == "inverse_sqrt":
        return base * math.sqrt(max(1, warmup) / (step + 1))
    progress = (step - warmup) / max(1, total - warmup)
    progress = min(1.0, max(0.0, progress))
    if kind == "linear":
        return base * (1.0 - progress)
    if kind == "cosine":
        return base * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {kind!r}; known: constant, cosine, inverse_sqrt, linear")
