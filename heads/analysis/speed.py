"""Measured inference speed of physically pruned models (Michel et al. 2019, B5 / Table 4).

Every pruning ratio is a separate, physically smaller copy of the model. All
copies see the same real examples in the same batches; each timed measurement
is one pass over those batches (forward only, eval mode, no gradients). The
variants are interleaved within every repeat, in an order rotated from repeat
to repeat, so drifting machine load hits all of them alike; each row reports
the median over repeats and the speed-up against ratio 0 at the same batch
size is a ratio of those medians.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from heads.scoring.select import group_sizes, select
from heads.surgery import HeadLayout, apply_layout, head_layout, num_heads, ratio_layout

Batch = Mapping[str, Any]


def layout_at_ratio(
    model: nn.Module,
    ratio: float,
    scores: Mapping[str, torch.Tensor] | None = None,
    scope: str = "global",
    floor: int = 1,
) -> HeadLayout:
    """The layout left after removing ``ratio`` of the current heads.

    Without ``scores``: uniformly, every site loses round(ratio * its heads)
    and keeps its first heads (``heads.surgery.uniform_layout`` for an unpruned
    model; whole key/value groups under grouped-query attention). With
    ``scores`` (higher = keep): the lowest-scoring heads go, as ``select`` picks
    them (``scope``, ``floor``).
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio!r}")
    layout = head_layout(model)
    if ratio == 0:
        return layout
    if scores is not None:
        remove = select(scores, ratio, scope=scope, floor=floor, layout=layout, group_size=group_sizes(model))
        return {name: [h for h in kept if h not in set(remove.get(name, ()))] for name, kept in layout.items()}
    return ratio_layout(model, ratio)


def pruned_copy(model: nn.Module, layout: Mapping[str, list[int]]) -> nn.Module:
    """A physically pruned deep copy of ``model`` in eval mode (the original is left alone)."""
    clone = copy.deepcopy(model)
    apply_layout(clone, layout)
    return clone.eval()


def _time_pass(model: nn.Module, batches: Sequence[Batch]) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one pass over ``batches``."""
    device = next(model.parameters()).device
    start, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        model(**batch)
    if device.type == "cuda":  # kernels run asynchronously: the clock stops when they are done, not launched
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, time.process_time() - cpu


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not every platform has one
        return None


def measure_speed(
    variants: Mapping[float, nn.Module],
    batches: Mapping[int, Sequence[Batch]],
    repeats: int = 5,
    warmup: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Time every variant (ratio -> model) on every batch size (size -> its batches).

    Returns one row per (ratio, batch): ``examples`` per pass, ``seconds``
    (median wall-clock pass time), ``examples_per_s`` (from it), ``times`` (every
    repeat), ``seconds_min`` (the fastest pass), ``cpu_seconds`` (median process
    CPU time of a pass: less sensitive to other processes on a shared machine,
    the sum over threads with several), ``load_avg`` (median 1-minute load
    average sampled after each of the row's passes; this process counts in
    it), ``params``, ``heads``; rows have no speed-ups yet (see :func:`speed_rows`).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    ratios = list(variants)
    times: dict[tuple[float, int], list[float]] = {(r, b): [] for r in ratios for b in batches}
    cpu: dict[tuple[float, int], list[float]] = {key: [] for key in times}
    loads: dict[tuple[float, int], list[float]] = {key: [] for key in times}
    for model in variants.values():
        model.eval()
    with torch.no_grad():
        for group in batches.values():
            for ratio in ratios:
                for _ in range(warmup):
                    _time_pass(variants[ratio], group)
        for rep in range(repeats):
            for size, group in batches.items():
                shift = rep % len(ratios)
                for ratio in ratios[shift:] + ratios[:shift]:
                    wall, used = _time_pass(variants[ratio], group)
                    times[(ratio, size)].append(wall)
                    cpu[(ratio, size)].append(used)
                    load = _load()
                    if load is not None:
                        loads[(ratio, size)].append(load)
            if progress is not None:
                progress(f"repeat {rep + 1}/{repeats} done")
    rows = []
    for size, group in batches.items():
        examples = sum(_batch_size(b) for b in group)
        for ratio in ratios:
            model = variants[ratio]
            seconds = statistics.median(times[(ratio, size)])
            rows.append({
                "ratio": ratio,
                "batch": size,
                "examples": examples,
                "seconds": seconds,
                "examples_per_s": examples / seconds if seconds > 0 else float("inf"),
                "times": times[(ratio, size)],
                "seconds_min": min(times[(ratio, size)]),
                "cpu_seconds": statistics.median(cpu[(ratio, size)]),
                "load_avg": statistics.median(loads[(ratio, size)]) if loads[(ratio, size)] else None,
                "params": sum(p.numel() for p in model.parameters()),
                "heads": num_heads(head_layout(model)),
            })
    return rows


def speed_rows(rows: list[dict]) -> list[dict]:
    """Add speed-ups against ratio 0 at the same batch size (None without a ratio-0 row).

    ``speedup``: ratio of median examples/s (the headline); ``speedup_min``: of
    the fastest passes; ``cpu_speedup``: of median CPU seconds.
    """
    base = {r["batch"]: r for r in rows if r["ratio"] == 0}
    for r in rows:
        ref = base.get(r["batch"])
        r["speedup"] = r["examples_per_s"] / ref["examples_per_s"] if ref else None
        r["speedup_min"] = ref["seconds_min"] / r["seconds_min"] if ref and r["seconds_min"] > 0 else None
        r["cpu_speedup"] = ref["cpu_seconds"] / r["cpu_seconds"] if ref and r["cpu_seconds"] > 0 else None
    return rows


def _batch_size(batch: Batch) -> int:
    for value in batch.values():
        if torch.is_tensor(value) and value.dim() > 0:
            return int(value.shape[0])
    raise ValueError("a batch without tensors")


def fixed_batches(examples: Sequence[Any], size: int, count: int, collate: Callable[[list], dict]) -> list[dict]:
    """``count`` batches of ``size`` consecutive examples from the start (cycling when there are too few)."""
    if not examples:
        raise ValueError("no examples to time on")
    n = len(examples)
    return [collate([examples[(i * size + j) % n] for j in range(size)]) for i in range(count)]
