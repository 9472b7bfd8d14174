"""Training-step time of several models, measured interleaved in one process (the clock claims: D1, D4).

Two training runs timed in different jobs see different machine load: on a shared two-core machine one run's
wall-clock moves by tens of percent with what runs beside it, so a ratio of two runs' seconds measures the
schedule as much as the models. Here every model takes the same number of training steps (forward with labels,
backward, optimizer step) on the same batch in each repeat, the models in an order rotated from repeat to
repeat, so drifting load hits all of them alike. A model's step time is the median over repeats; its ratio to
the reference is the median of the per-repeat ratios (paired within a repeat, where the load was the same).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Any

import torch

from heads.analysis.memory import Trainer

Batch = Mapping[str, Any]


def _time_steps(trainer: Trainer, batch: Batch, steps: int) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of ``steps`` training steps on ``batch``."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        trainer.step(batch)
    if trainer.device.type == "cuda":  # kernels run asynchronously: stop the clock when they are done
        torch.cuda.synchronize(trainer.device)
    return time.perf_counter() - start, time.process_time() - cpu


def clock_rows(trainers: Mapping[str, Trainer], batch: Batch, steps: int = 10, repeats: int = 7,
               reference: str = "reference", warmup: int = 1) -> dict:
    """Per model: ``step_s`` / ``cpu_step_s`` (median seconds of one step over the repeats) and, against
    ``reference``, ``step_ratio`` / ``cpu_step_ratio`` (median per-repeat ratio of its time to the reference's:
    below 1 is faster) and ``throughput_ratio`` / ``cpu_throughput_ratio`` (their inverse: examples per second
    against the reference's), with every repeat's seconds kept."""
    if steps < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1, repeats >= 1, warmup >= 0; got {steps}, {repeats}, {warmup}")
    if reference not in trainers:
        raise ValueError(f"the reference {reference!r} is not among the models {sorted(trainers)}")
    names = list(trainers)
    for name in names if warmup else ():  # first steps allocate and pick kernels: not a long run's step
        _time_steps(trainers[name], batch, warmup)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            w, c = _time_steps(trainers[name], batch, steps)
            wall[name].append(w / steps)
            cpu[name].append(c / steps)
    out: dict[str, Any] = {"steps": steps, "repeats": repeats, "warmup": warmup, "reference": reference,
                           "models": {}}
    for name in names:
        row: dict[str, Any] = {"step_s": statistics.median(wall[name]), "cpu_step_s": statistics.median(cpu[name]),
                               "step_seconds": wall[name], "cpu_step_seconds": cpu[name]}
        for clock, times in (("", wall), ("cpu_", cpu)):
            ratios = [m / r for m, r in zip(times[name], times[reference], strict=True) if r > 0 and m > 0]
            row[f"{clock}step_ratio"] = statistics.median(ratios) if ratios else None
            row[f"{clock}throughput_ratio"] = statistics.median(1 / x for x in ratios) if ratios else None
        out["models"][name] = row
    return out
