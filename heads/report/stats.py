"""Seed statistics and the verdict rule of the claims ledger.

Per-seed values (paired by seed where a claim compares two arms) are summarised
by their mean and a Student-t interval, whose coverage is exact for normal data
at any n (tests/test_report_stats.py simulates it). The percentile bootstrap
used before is not: over 3 seeds it returns the seeds' range, which covers the
mean about 74 % of the time, not 95 %.

Two tests, both at 2.5 % per side (the two-sided 95 % interval):

- **directional** (``greater`` / ``less`` than a threshold): *supported* when
  the whole interval lies on the claimed side, *not supported* when it lies
  wholly on the other side; the p-value is the one-sided t-test's against the
  threshold (supported exactly when p < 0.025).
- **equivalence** ("no noticeable loss", "the same quality"): two one-sided
  tests against ``null ± margin``; *supported* when the interval lies inside
  the band, *not supported* when it lies wholly outside it; the p-value is the
  larger of the two one-sided ones.

No verdict rests on fewer than :data:`MIN_SEEDS` values or on values that are
all equal (a zero-width interval says nothing varied, not that we are sure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

LEVEL = 0.95
MIN_SEEDS = 3

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive"
FAILED = "failed"
NOT_TESTED = "not tested at this scale"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, FAILED, NOT_TESTED)
DIRECTIONS = ("greater", "less")
TESTS = ("directional", "equivalence")
METHOD = {"directional": "one-sided t-test, Student-t 95 % interval over seeds",
          "equivalence": "equivalence (TOST), Student-t 95 % interval over seeds"}


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds with its Student-t interval; ``sd`` is the sample standard deviation (None for n < 2)."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    sd: float | None


@dataclass(frozen=True)
class Decision:
    """A verdict with its p-value (None where no test ran) and, when it is not definite, why."""

    verdict: str
    p_value: float | None = None
    reason: str = ""


def _finite(values: Sequence[float]) -> np.ndarray:
    x = np.asarray([float(v) for v in values], dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"non-finite values in {list(values)}")
    return x


def interval(values: Sequence[float], confidence: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of the mean of ``values`` (independent seeds, or paired differences of them).

    Needs two values at least; all-equal values give a zero-width interval (the verdict rule refuses to
    decide on it)."""
    x = _finite(values)
    if x.size < 2:
        raise ValueError(f"an interval needs at least two values, got {x.size}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    half = float(_st.t.ppf(0.5 + confidence / 2, x.size - 1)) * float(np.std(x, ddof=1)) / math.sqrt(x.size)
    mean = float(x.mean())
    return mean - half, mean + half


def estimate(values: Sequence[float], confidence: float = LEVEL) -> Estimate:
    """Mean, interval and standard deviation of per-seed values (interval None for fewer than two)."""
    x = _finite(values)
    if x.size == 0:
        return Estimate(0, None, None, None, None)
    if x.size == 1:
        return Estimate(1, float(x[0]), None, None, None)
    if np.ptp(x) == 0:  # all equal: zero spread exactly (np.std can leave rounding dust)
        return Estimate(int(x.size), float(x[0]), float(x[0]), float(x[0]), 0.0)
    low, high = interval(x, confidence)
    return Estimate(int(x.size), float(x.mean()), low, high, float(np.std(x, ddof=1)))


def effect_size(est: Estimate, null: float = 0.0) -> float | None:
    """Standardised effect (Cohen's d_z for paired differences): (mean - null) / sd; None without spread."""
    if est.mean is None or est.sd is None or est.sd == 0 or not math.isfinite(est.sd):
        return None
    return (est.mean - null) / est.sd


def _one_sided_p(est: Estimate, threshold: float, side: str) -> float:
    """p of a one-sided t-test whose alternative is ``mean side threshold`` (side: greater | less)."""
    t = (est.mean - threshold) / (est.sd / math.sqrt(est.n))
    return float(_st.t.sf(t, est.n - 1) if side == "greater" else _st.t.cdf(t, est.n - 1))


def _usable(est: Estimate) -> str:
    """Why these values cannot carry a verdict ('' when they can)."""
    if est.n < MIN_SEEDS:
        return f"{est.n} value{'s' if est.n != 1 else ''}: a verdict needs {MIN_SEEDS} at least"
    if not est.sd:
        return f"every value is {est.mean:.4g}: no spread to estimate an interval from"
    return ""


def decide(est: Estimate, direction: str, threshold: float) -> Decision:
    """The directional rule (see the module docstring)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    why = _usable(est)
    if why:
        return Decision(INCONCLUSIVE, None, why)
    p = _one_sided_p(est, threshold, direction)
    above, below = est.ci_low > threshold, est.ci_high < threshold
    claimed, other = (above, below) if direction == "greater" else (below, above)
    if claimed:
        return Decision(SUPPORTED, p)
    if other:
        return Decision(NOT_SUPPORTED, p)
    return Decision(INCONCLUSIVE, p, f"the interval reaches the threshold {threshold:+.4g}")


def decide_equivalence(est: Estimate, null: float, margin: float) -> Decision:
    """Two one-sided tests against ``null ± margin`` (see the module docstring)."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}")
    why = _usable(est)
    if why:
        return Decision(INCONCLUSIVE, None, why)
    low, high = null - margin, null + margin
    p = max(_one_sided_p(est, low, "greater"), _one_sided_p(est, high, "less"))
    if low < est.ci_low and est.ci_high < high:
        return Decision(SUPPORTED, p)
    if est.ci_high < low or est.ci_low > high:
        return Decision(NOT_SUPPORTED, p)
    return Decision(INCONCLUSIVE, p, f"the interval leaves the band [{low:+.4g}, {high:+.4g}]")


def verdict(est: Estimate, direction: str, threshold: float) -> str:
    """The directional verdict alone."""
    return decide(est, direction, threshold).verdict
