"""Paired significance tests between two systems evaluated on the same examples."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# the paired t-tests live torch-free beside the package, so the report recomputes them without loading torch
from heads.paired import detectable_shift, paired_ttest, paired_ttests

__all__ = ["BootstrapResult", "detectable_shift", "paired_bootstrap", "paired_ttest", "paired_ttests"]


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
