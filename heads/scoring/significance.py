"""Paired significance tests between two systems evaluated on the same examples."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


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
    return float(stats.ttest_1samp(diff, 0.0).pvalue)


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
    return float((stats.t.ppf(1 - alpha / 2, diff.size - 1) + stats.norm.ppf(power)) * se)


@dataclass(frozen=True)
class BootstrapResult:
    delta: float  # metric(b) - metric(a) on all examples
    p_value: float  # two-sided, see paired_bootstrap
    samples: int


def paired_bootstrap(
    metric: Callable[[Sequence[Any]], float],
    a: Sequence[Any],
    b: Sequence[Any],
    samples: int = 1000,
    seed: int = 0,
) -> BootstrapResult:
    """Paired bootstrap for corpus metrics (BLEU, chrF, ...) that do not decompose over examples.

    ``a`` and ``b`` hold per-example statistics of two systems on the same
    examples (e.g. sacrebleu sufficient statistics, or (hypothesis, reference)
    pairs); ``metric`` turns a list of them into the corpus score. Each sample
    draws example indices with replacement, the same for both systems. The
    p-value is the shifted-bootstrap estimate (Berg-Kirkpatrick et al. 2012,
    two-sided): the share of samples whose difference lies at least |delta| away
    from delta, with add-one smoothing, so it is never exactly 0.
    """
    if len(a) != len(b):
        raise ValueError(f"paired statistics need the same examples, got {len(a)} and {len(b)}")
    if not len(a):
        raise ValueError("no examples to bootstrap")
    n = len(a)
    delta = float(metric(list(b)) - metric(list(a)))
    if delta == 0.0:
        return BootstrapResult(0.0, 1.0, samples)
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(samples):
        idx = rng.integers(0, n, size=n)
        d = metric([b[i] for i in idx]) - metric([a[i] for i in idx])
        extreme += abs(d - delta) >= abs(delta)
    return BootstrapResult(delta, (extreme + 1) / (samples + 1), samples)
