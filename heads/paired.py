"""Paired t-tests between two systems scored on the same examples (per-example loss or accuracy).

Torch-free, so the report can redo a head's test on resampled examples (heads.report.measures) with exactly the
rules ``heads ablate`` applied (heads.scoring.ablation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _stats():
    """scipy.stats, imported on first use: the report imports this module, and the workflow reads the report's
    specs at every parse (scipy's statistics take over a second to import)."""
    from scipy import stats

    return stats


def paired_ttest(a: Sequence[float], b: Sequence[float], tol: float = 0.0) -> float:
    """Two-sided paired t-test p-value for per-example values ``a`` vs ``b`` (loss or accuracy).

    Examples where either value is NaN are dropped. Differences with
    ``|a - b| <= tol`` count as exactly zero (numerical noise of a different
    batch layout must not look like an effect). No difference at all, or fewer
    than two examples, gives p = 1 (nothing to reject); scipy would give NaN.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal shapes, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    diff = (b - a)[keep]
    diff[np.abs(diff) <= tol] = 0.0
    if diff.size < 2 or not np.any(diff):
        return 1.0
    if np.ptp(diff) <= 1e-12 * np.abs(diff).max():
        return 0.0  # a constant non-zero shift: infinitely significant (scipy would divide by ~0)
    return float(_stats().ttest_1samp(diff, 0.0).pvalue)


def paired_ttests(base: np.ndarray, other: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """:func:`paired_ttest` of ``base`` ([N]) against each row of ``other`` ([M, N]) at once, with its rules
    (differences within ``tol`` are 0; none at all gives 1; a constant shift 0); examples NaN in the baseline
    are dropped for every row (an example with nothing to score is so for every ablation)."""
    base, other = np.asarray(base, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if other.ndim != 2 or other.shape[1] != base.shape[0]:
        raise ValueError(f"paired values need [M, {base.shape[0]}] rows, got {other.shape}")
    keep = ~np.isnan(base)
    diff = other[:, keep] - base[keep]
    diff[np.abs(diff) <= tol] = 0.0
    n = diff.shape[1]
    p = np.ones(other.shape[0])
    if n < 2:
        return p
    mean, sd = diff.mean(axis=1), diff.std(axis=1, ddof=1)
    scale = np.abs(diff).max(axis=1)
    moved = scale > 0
    constant = moved & (np.ptp(diff, axis=1) <= 1e-12 * scale)
    tested = moved & ~constant
    t = mean[tested] / (sd[tested] / np.sqrt(n))
    p[tested] = 2 * _stats().t.sf(np.abs(t), n - 1)
    p[constant] = 0.0
    return p


def detectable_shift(a: Sequence[float], b: Sequence[float], alpha: float = 0.01, power: float = 0.8) -> float:
    """The smallest mean per-example change a two-sided paired t-test at ``alpha`` detects with ``power``, given
    the spread of the measured differences ``b - a`` (normal approximation of the power: the critical t plus
    the power's normal quantile, times the standard error; slightly optimistic at few pairs: at 16 the power of
    that shift is about 78 %, not 80 %). NaN with fewer than two pairs; 0 with no spread (a head whose removal
    changes nothing has nothing to scale by, which is why claims read an upper quantile over heads)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff = (b - a)[~(np.isnan(a) | np.isnan(b))]
    if diff.size < 2:
        return float("nan")
    se = float(np.std(diff, ddof=1)) / np.sqrt(diff.size)
    return float((_stats().t.ppf(1 - alpha / 2, diff.size - 1) + _stats().norm.ppf(power)) * se)
