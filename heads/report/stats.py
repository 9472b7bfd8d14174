"""Seed statistics and the verdict rule of the claims ledger.

Per-seed values (paired by seed where a claim compares two arms) are summarised
by their mean and a Student-t interval, whose coverage is exact for normal data
at any n (tests/test_report_stats.py simulates it). The percentile bootstrap
used before is not: over 3 seeds it returns the seeds' range, which covers the
mean about 74 % of the time, not 95 %.

Two tests, both at 2.5 % per side (the two-sided 95 % interval):

- **directional** (``greater`` / ``less`` than a threshold): *supported* when
  the whole interval lies on the claimed side, *not supported* when it lies
  wholly on the other side.
- **equivalence** ("no noticeable loss", "the same quality"): two one-sided
  tests against ``null ± margin``; *supported* when the interval lies inside
  the band, *not supported* when it lies wholly outside it.

The p-value a decision carries is the one that decided it: the one-sided test
of the side the verdict names (the claimed side for *supported*, the other for
*not supported*; the smaller of the two for *inconclusive*), so a verdict is
definite exactly when that p is under 2.5 %. :func:`holm` adjusts a family of
them for multiplicity (Holm's step-down, which holds the family-wise error at
the same 2.5 % per side whatever the tests' dependence).

No verdict rests on fewer than :data:`MIN_SEEDS` values or on values that are
all equal (a zero-width interval says nothing varied, not that we are sure).

Where the runs kept example-level values of their evaluation, :func:`two_level`
widens the interval by the test examples' sampling (one sample of the task,
shared by every seed), so equal seeds then have the examples' width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
ALPHA = (1 - LEVEL) / 2  # each one-sided test's level: a verdict is definite when its p is under this
MIN_SEEDS = 3

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive"
FAILED = "failed"
NOT_TESTED = "not tested at this scale"
# a merged ledger's claim whose replication does not run at its preset at all: nothing was measured, so it is
# not "not tested at this scale" (the models measured and did not meet a precondition)
NOT_RUN = "not run at this preset"
# a merged ledger's claim whose replication does run at its preset but whose ledger is missing or older than the
# claim: nothing was measured yet, so it is neither "inconclusive" (a test that could not decide) nor "not tested"
NOT_YET = "not run yet"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, FAILED, NOT_TESTED, NOT_YET, NOT_RUN)
DIRECTIONS = ("greater", "less")
TESTS = ("directional", "equivalence", "exact")
METHOD = {"directional": "one-sided t-test, Student-t 95 % interval over seeds",
          "equivalence": "equivalence (TOST), Student-t 95 % interval over seeds",
          "exact": "exact: a deterministic count, checked on every seed"}
# a share of units (heads, sites) on which every seed agreed: the exact binomial over one seed's units
METHOD_BINOMIAL = ("one-sided exact binomial test, Clopper-Pearson 95 % interval over one seed's units (every seed "
                   "gave the same count, so the seeds add no spread)")
# a count to a target, known to its evaluation interval: both ends of every seed's bracket (decide_at_resolution)
AT_RESOLUTION = "; judged at both ends of each seed's evaluation bracket (the evaluation interval's resolution)"
# the same tests on a two-level interval (seeds, and example resamples: :func:`two_level`)
METHOD_EXAMPLES = {
    "exact": METHOD["exact"],
    "directional": "one-sided t-test, two-level 95 % interval (seeds, Student-t; examples, paired bootstrap)",
    "equivalence": "equivalence (TOST), two-level 95 % interval (seeds, Student-t; examples, paired bootstrap)"}


def _st():
    """scipy.stats, imported on first use: the workflow reads this package's specs at every parse, and scipy's
    statistics take over a second to import."""
    from scipy import stats

    return stats


def _opt():
    """scipy.optimize, imported on first use (as :func:`_st`)."""
    from scipy import optimize

    return optimize



@dataclass(frozen=True)
class Estimate:
    """Mean over seeds with its Student-t interval; ``sd`` is the sample standard deviation of the seeds (None for
    n < 2). ``se`` and ``df`` are the standard error and degrees of freedom the interval and tests use: the
    seeds' alone (sd / sqrt(n), n - 1), or with the examples' share added (:func:`two_level`; ``examples`` True)."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    sd: float | None
    se: float | None = None
    df: float | None = None
    examples: bool = False
    # two-level: the half-width over ``se`` at probability ``p`` (the degrees of freedom that match it are found
    # only when a test asks: :attr:`dof`)
    quantile: float | None = None
    p: float = 0.5 + LEVEL / 2

    @property
    def spread(self) -> float | None:
        """The standard error the tests divide by (falls back to the seeds' for estimates built by hand)."""
        if self.se is not None:
            return self.se
        return None if self.sd is None or self.n < 2 else self.sd / math.sqrt(self.n)

    @property
    def dof(self) -> float:
        """Degrees of freedom of the tests: the seeds' n - 1, or (two-level) those whose t quantile gives the
        interval's half-width, so a p-value under 2.5 % is exactly an interval clear of the threshold."""
        if self.df is not None:
            return float(self.df)
        if self.quantile is not None:
            return _matching_df(self.quantile, self.p, self.n - 1)
        return float(self.n - 1)


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
    half = float(_st().t.ppf(0.5 + confidence / 2, x.size - 1)) * float(np.std(x, ddof=1)) / math.sqrt(x.size)
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
        return Estimate(int(x.size), float(x[0]), float(x[0]), float(x[0]), 0.0, 0.0, float(x.size - 1))
    low, high = interval(x, confidence)
    sd = float(np.std(x, ddof=1))
    return Estimate(int(x.size), float(x.mean()), low, high, sd, sd / math.sqrt(x.size), float(x.size - 1))


def two_level(values: Sequence[float], replicates: Sequence[float], confidence: float = LEVEL) -> Estimate:
    """Mean of per-seed ``values`` with an interval that counts both sources of its uncertainty.

    The seeds vary with training; the examples every seed is scored on are one sample of the task, the same for
    every seed, so their share does not shrink with more seeds. ``replicates`` are the seed-mean recomputed on
    example resamples (the same resample for every seed and arm, so pairing is kept): their variance is the
    examples' share. The half-width adds the two shares' half-widths in quadrature: Student-t over the seeds
    (n - 1 degrees of freedom) and normal over the examples (many of them), so with equal seeds the interval is
    the examples' alone instead of zero width, and without example noise it is :func:`interval` exactly.
    Welch-Satterthwaite degrees of freedom would be narrower and under-cover at n = 3 (about 92.5 %, simulated);
    this covers 95-98 % there and about 95 % from n = 10 (tests/test_report_stats.py). ``se`` is the combined
    standard error; the tests use the degrees of freedom at which a t quantile gives this half-width
    (:attr:`Estimate.dof`), so their p-values agree with the interval."""
    x, reps = _finite(values), _finite(replicates)
    if x.size < 2:
        raise ValueError(f"an interval needs at least two seeds, got {x.size}")
    if reps.size < 2:
        raise ValueError(f"the examples' share needs at least two resamples, got {reps.size}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    sd = float(np.std(x, ddof=1)) if np.ptp(x) > 0 else 0.0
    between, within = sd ** 2 / x.size, float(np.var(reps, ddof=1))
    se, mean = math.sqrt(between + within), float(x.mean())
    if se == 0:
        return Estimate(int(x.size), mean, mean, mean, sd, 0.0, float(x.size - 1), True)
    p = 0.5 + confidence / 2
    t_seeds, z = float(_st().t.ppf(p, x.size - 1)), float(_st().norm.ppf(p))
    half = math.hypot(t_seeds * math.sqrt(between), z * math.sqrt(within))
    return Estimate(int(x.size), mean, mean - half, mean + half, sd, se, None, True, half / se, p)


def _matching_df(quantile: float, p: float, lowest: int) -> float:
    """The degrees of freedom whose t quantile at ``p`` is ``quantile`` (between the normal's and t(lowest)'s)."""
    if quantile >= float(_st().t.ppf(p, lowest)):
        return float(lowest)
    if float(_st().t.cdf(quantile, 1e9)) <= p:  # at (or within rounding of) the normal quantile: no bracket
        return math.inf
    # on log(df), where the quantile changes smoothly: a dozen evaluations of the cdf
    log_df = _opt().brentq(lambda u: float(_st().t.cdf(quantile, math.exp(u))) - p, math.log(lowest), math.log(1e9),
                         xtol=1e-10)
    return math.exp(log_df)


def effect_size(est: Estimate, null: float = 0.0) -> float | None:
    """Standardised effect (Cohen's d_z for paired differences): (mean - null) / sd; None without spread."""
    if est.mean is None or est.sd is None or est.sd == 0 or not math.isfinite(est.sd):
        return None
    return (est.mean - null) / est.sd


def _one_sided_p(est: Estimate, threshold: float, side: str) -> float:
    """p of a one-sided t-test whose alternative is ``mean side threshold`` (side: greater | less)."""
    t = (est.mean - threshold) / est.spread
    return float(_st().t.sf(t, est.dof) if side == "greater" else _st().t.cdf(t, est.dof))


_OTHER = {"greater": "less", "less": "greater"}


def _usable(est: Estimate) -> str:
    """Why these values cannot carry a verdict ('' when they can)."""
    if est.n < MIN_SEEDS:
        return f"{est.n} value{'s' if est.n != 1 else ''}: a verdict needs {MIN_SEEDS} at least"
    if not est.spread:
        return f"every value is {est.mean:.4g}: no spread to estimate an interval from"
    return ""


def _decision(claimed: bool, other: bool, p: float, p_other: float, why: str) -> Decision:
    """*supported* (with the claimed side's p) when the interval lies wholly on the claimed side, *not supported*
    (with the other side's) when wholly on the other, else *inconclusive* with the smaller p and ``why``."""
    if claimed:
        return Decision(SUPPORTED, p)
    if other:
        return Decision(NOT_SUPPORTED, p_other)
    return Decision(INCONCLUSIVE, min(p, p_other), why)


def decide(est: Estimate, direction: str, threshold: float) -> Decision:
    """The directional rule (see the module docstring)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    why = _usable(est)
    if why:
        return Decision(INCONCLUSIVE, None, why)
    p = _one_sided_p(est, threshold, direction)
    p_other = _one_sided_p(est, threshold, _OTHER[direction])
    above, below = est.ci_low > threshold, est.ci_high < threshold
    claimed, other = (above, below) if direction == "greater" else (below, above)
    return _decision(claimed, other, p, p_other, f"the interval reaches the threshold {threshold:+.4g}")


def clopper_pearson(k: int, n: int, confidence: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial share ``k / n``: it never has zero width, so a share
    of 0 (or 1) still says how small (or large) the true share can be."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(_st().beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(_st().beta.ppf(1 - tail, k + 1, n - k))
    return low, high


def decide_binomial(k: int, n: int, direction: str, threshold: float) -> Decision:
    """The directional rule on a share of ``n`` units (heads, sites) ``k`` of which count, by the exact binomial
    interval and test: *supported* when the whole Clopper-Pearson interval lies on the claimed side of the
    threshold (the one-sided binomial test at 2.5 %), *not supported* when it lies wholly on the other side."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    low, high = clopper_pearson(k, n)
    if not 0 < threshold < 1:  # a share is always on one side of a threshold outside (0, 1)
        side = threshold <= 0 if direction == "greater" else threshold >= 1
        return Decision(SUPPORTED if side else NOT_SUPPORTED, 0.0)
    # one-sided p of "the true share is below (above) the threshold", against a share at the threshold
    below, above = float(_st().binom.cdf(k, n, threshold)), float(_st().binom.sf(k - 1, n, threshold))
    p, p_other = (below, above) if direction == "less" else (above, below)
    claimed, other = (low > threshold, high < threshold)[:: 1 if direction == "greater" else -1]
    return _decision(claimed, other, p, p_other, f"the exact interval [{low:.4g}, {high:.4g}] reaches the "
                                                 f"threshold {threshold:+.4g}")


def decide_equivalence(est: Estimate, null: float, margin: float) -> Decision:
    """Two one-sided tests against ``null ± margin`` (see the module docstring)."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}")
    why = _usable(est)
    if why:
        return Decision(INCONCLUSIVE, None, why)
    low, high = null - margin, null + margin
    p = max(_one_sided_p(est, low, "greater"), _one_sided_p(est, high, "less"))
    # outside the band: below it or above it, whichever side the effect lies on
    p_out = min(_one_sided_p(est, low, "less"), _one_sided_p(est, high, "greater"))
    return _decision(low < est.ci_low and est.ci_high < high, est.ci_high < low or est.ci_low > high, p, p_out,
                     f"the interval leaves the band [{low:+.4g}, {high:+.4g}]")


def decide_at_resolution(low: Estimate, high: Estimate, decide_one: Callable[[Estimate], Decision]) -> Decision:
    """A quantity each seed knows only to a bracket (a step or time count between two evaluations): ``low`` and
    ``high`` are the estimates with every seed at the low and at the high end of its bracket. A verdict is
    definite only where both ends give it, so it holds wherever in their brackets the seeds crossed; its p is
    the larger of the two ends' (the end least in its favour)."""
    ends = decide_one(low), decide_one(high)
    ps = [d.p_value for d in ends if d.p_value is not None]
    p = max(ps) if len(ps) == 2 else None
    if ends[0].verdict == ends[1].verdict and ends[0].verdict in (SUPPORTED, NOT_SUPPORTED):
        return Decision(ends[0].verdict, p)
    if ends[0].verdict == ends[1].verdict:
        return Decision(INCONCLUSIVE, p, ends[0].reason)
    return Decision(INCONCLUSIVE, p, f"at the evaluation interval's resolution the ends disagree: {ends[0].verdict} "
                                     f"with every seed at its bracket's low end, {ends[1].verdict} at its high end")


def decide_exact(values: Sequence[float], holds: Callable[[float], bool], condition: str) -> Decision:
    """A deterministic quantity (a byte count, fixed by the model's shapes): no interval, since nothing varies
    but the seed, and every seed must give the same value. *supported* when it meets ``condition`` (``holds``)
    on every seed, *not supported* when on none; seeds that disagree mean it was not deterministic."""
    x = _finite(values)
    if x.size < MIN_SEEDS:
        return Decision(INCONCLUSIVE, None, f"{x.size} value{'s' if x.size != 1 else ''}: a verdict needs "
                                            f"{MIN_SEEDS} at least")
    if np.ptp(x) > 1e-9 * max(1.0, float(np.abs(x).max())):
        return Decision(INCONCLUSIVE, None, f"seeds disagree ({x.min():.6g} to {x.max():.6g}): not a deterministic "
                                            "count")
    met = [holds(float(v)) for v in x]
    if all(met):
        return Decision(SUPPORTED)
    return Decision(NOT_SUPPORTED, None, f"{x[0]:.6g} on every seed, not {condition}")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values, in their order: the i-th smallest times the number
    of tests not yet passed (m - i + 1), made monotone and capped at 1. A test is rejected at level alpha
    exactly when its adjusted p is under alpha."""
    p = _finite(p_values)
    m = p.size
    out = np.empty(m)
    running = 0.0
    for rank, i in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        out[i] = running
    return [float(x) for x in out]
