"""Evaluate many gate configurations at once: stacked [K, H] gates on a batch repeated K times."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from heads.scoring.losses import FIELDS, ExampleStats, example_stats
from heads.scoring.session import base_gates, non_empty, run
from heads.surgery import repeat_batch, set_gates

# One configuration: site name -> positions (in head_layout order) whose gates are closed.
Closure = Mapping[str, Sequence[int]]

# Most logits one stacked forward may hold (elements; 2 GiB in float32). The loss then takes as much again
# (float32 log-probabilities), so a forward's peak is about twice this. The gpu preset's batch of 512 x 64
# target tokens x 8000 words is 2.1e9 logits at chunk 8: ~17 GB for each of a visit's three ablations, beside
# its other jobs on one GPU (an H100 holds 80 GB). The small presets' batches keep their whole chunk.
MAX_LOGITS = 2**29


def fitting_chunk(chunk: int, logits_per_copy: int, max_logits: int = MAX_LOGITS) -> int:
    """How many of ``chunk`` stacked copies one forward takes when each copy's logits are ``logits_per_copy``
    elements: all of them while they fit ``max_logits``, never fewer than one."""
    return max(1, min(chunk, max_logits // max(1, logits_per_copy)))


@torch.no_grad()
def evaluate_closures(
    model: nn.Module, batches: Iterable[Mapping[str, Any]], closures: Sequence[Closure], chunk: int = 8,
    max_logits: int = MAX_LOGITS,
) -> tuple[ExampleStats, ExampleStats]:
    """Per-example stats of the baseline ([N]) and of each closure ([M, N]), N = all examples.

    Call inside ``scoring_mode``. Closures start from ``base_gates`` (so existing
    masks stay) and are evaluated ``chunk`` at a time: one forward pass of the
    batch repeated ``chunk`` times with stacked gates, which gives the same
    numbers as one gated forward per closure, only faster. A batch whose ``chunk`` copies would hold more than
    ``max_logits`` logits is repeated fewer times (``fitting_chunk``): the same numbers, in more forwards.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    base = base_gates(model)
    live = [name for name, g in base.items() if g.numel()]
    for closure in closures:
        for name, positions in closure.items():
            if name not in base:
                raise KeyError(f"unknown site {name!r}")
            bad = [p for p in positions if not 0 <= p < base[name].numel()]
            if bad:
                raise IndexError(f"site {name}: positions {bad} outside its {base[name].numel()} heads")
    baseline_parts: list[ExampleStats] = []
    closure_parts: list[ExampleStats] = []
    for batch in non_empty(batches):
        size = batch["labels"].shape[0]
        set_gates(model, {name: base[name] for name in live})
        logits = run(model, batch).logits
        baseline_parts.append(example_stats(model, batch, logits).cpu())
        step = fitting_chunk(chunk, logits.numel(), max_logits)
        del logits  # not held through the stacked forwards
        rows = []
        for start in range(0, len(closures), step):
            group = closures[start : start + step]
            k = len(group)
            stacked = {name: base[name].repeat(k, 1) for name in live}
            for row, closure in enumerate(group):
                for name, positions in closure.items():
                    if positions:
                        stacked[name][row, list(positions)] = 0.0
            set_gates(model, stacked)
            repeated = repeat_batch(batch, k)
            stats = example_stats(model, repeated, run(model, repeated).logits)
            rows.append(stats.cpu().view(k, size))  # k-major, as repeat_batch lays it out
        if rows:
            closure_parts.append(ExampleStats(*(torch.cat([getattr(r, f) for r in rows]) for f in FIELDS)))
    set_gates(model, {name: base[name] for name in live})  # the gates it started from, not the last stack
    baseline = ExampleStats.cat(baseline_parts)
    if closure_parts:
        return baseline, ExampleStats.cat(closure_parts)
    empty = torch.zeros(0, baseline.count.numel(), dtype=torch.float64)
    return baseline, ExampleStats(empty, empty.clone(), empty.clone())
