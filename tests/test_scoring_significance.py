"""Paired significance: t-test for per-example statistics, bootstrap for corpus metrics."""

import numpy as np
import pytest

from heads.scoring import paired_bootstrap, paired_ttest


def test_ttest_no_change_is_not_significant():
    a = np.linspace(1, 2, 20)
    assert paired_ttest(a, a) == 1.0
    assert paired_ttest(a, a + 1e-9, tol=1e-6) == 1.0  # float noise is no effect
    assert paired_ttest([1.0], [2.0]) == 1.0  # one pair: nothing to test


def test_ttest_detects_a_consistent_shift_and_drops_nan():
    rng = np.random.default_rng(0)
    a = rng.normal(size=50)
    b = a + 0.5 + rng.normal(scale=0.1, size=50)
    assert paired_ttest(a, b) < 1e-10
    assert paired_ttest(a, a + 0.3) == 0.0  # constant shift: scipy would divide by zero
    noisy = a + rng.normal(scale=1.0, size=50)
    assert paired_ttest(a, noisy) > 0.01
    b[3] = np.nan
    assert paired_ttest(a, b) < 1e-10
    with pytest.raises(ValueError, match="equal shapes"):
        paired_ttest(a, b[:-1])


def ratio_of_sums(stats):
    """A corpus metric that does not decompose over examples (like BLEU's n-gram precisions)."""
    matches = sum(m for m, _ in stats)
    total = sum(n for _, n in stats)
    return matches / total


def test_bootstrap_for_corpus_metrics():
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, 30, size=200)
    a = [(int(rng.binomial(n, 0.5)), int(n)) for n in lengths]
    better = [(min(n, m + int(rng.binomial(n, 0.1))), n) for m, n in a]
    same = paired_bootstrap(ratio_of_sums, a, a, samples=200)
    assert same.delta == 0.0 and same.p_value == 1.0
    result = paired_bootstrap(ratio_of_sums, a, better, samples=200, seed=0)
    assert result.delta > 0 and result.p_value == pytest.approx(1 / 201)  # never exactly 0
    assert paired_bootstrap(ratio_of_sums, a, better, samples=200, seed=0) == result  # seeded
    flipped = [(m, n) for m, n in a]
    flipped[0] = (a[0][0] + 1, a[0][1])  # one extra match in 200 examples: noise
    assert paired_bootstrap(ratio_of_sums, a, flipped, samples=200).p_value > 0.5
    with pytest.raises(ValueError, match="same examples"):
        paired_bootstrap(ratio_of_sums, a, a[:-1])
