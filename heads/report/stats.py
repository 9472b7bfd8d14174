"""Seed statistics: percentile bootstrap CIs, effect sizes and the verdict rule of the claims ledger.

The rule: a claim says its effect lies on one side (``greater`` / ``less``) of
a threshold (the comparison's null value plus the claim's tolerance).
*supported* when the whole 95 % CI lies on the claimed side, *not supported*
when it lies wholly on the other side, otherwise *inconclusive*; with fewer
than two seeds the CI is the point itself and the verdict is always
*inconclusive*.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
LEVEL = 0.95
SEED = 2019  # fixed: the same inputs give the same intervals

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive"
FAILED = "failed"
NOT_TESTED = "not tested"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, FAILED, NOT_TESTED)
DIRECTIONS = ("greater", "less")


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds with its bootstrap CI; ``sd`` is the sample standard deviation (None for n < 2)."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    sd: float | None


def _finite(values: Sequence[float]) -> np.ndarray:
    x = np.asarray([float(v) for v in values], dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"non-finite values in {list(values)}")
    return x


def bootstrap_ci(
    values: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean: resample the values with replacement ``resamples`` times."""
    x = _finite(values)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def estimate(values: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED) -> Estimate:
    """Mean, bootstrap CI and standard deviation of per-seed values (all None when there are none)."""
    x = _finite(values)
    if x.size == 0:
        return Estimate(0, None, None, None, None)
    low, high = bootstrap_ci(x, resamples, level, seed)
    sd = float(np.std(x, ddof=1)) if x.size > 1 else None
    return Estimate(int(x.size), float(x.mean()), low, high, sd)


def effect_size(est: Estimate, null: float = 0.0) -> float | None:
    """Standardised effect (Cohen's d_z for paired differences): (mean - null) / sd; None without spread."""
    if est.mean is None or est.sd is None or est.sd == 0 or not math.isfinite(est.sd):
        return None
    return (est.mean - null) / est.sd


def verdict(est: Estimate, direction: str, threshold: float) -> str:
    """The CI rule (see the module docstring)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if est.n < 2 or est.ci_low is None or est.ci_high is None:
        return INCONCLUSIVE
    above, below = est.ci_low > threshold, est.ci_high < threshold
    if direction == "greater":
        return SUPPORTED if above else NOT_SUPPORTED if below else INCONCLUSIVE
    return SUPPORTED if below else NOT_SUPPORTED if above else INCONCLUSIVE
