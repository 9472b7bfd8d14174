"""Memory of a training step before and after pruning (D8): does the memory a prune frees allow larger batches?

A training step (forward with labels, backward, AdamW step) holds the parameters, their gradients, the optimizer's
two moments per parameter, and the activations the backward pass needs. Pruned heads take their Q/K/V/O weights,
the moments and the attention activations with them. Each model's *step peak* is measured at batch sizes drawn
from the same real examples: on CUDA the allocator's peak (reset before the step), on CPU the peak of live tensors
in torch.profiler's memory timeline (the process's resident size cannot show it: freed tensors stay in the C
allocator's cache, and the kernel's peak never falls). The *cap* is the unpruned reference's step peak at
``cap_batch``; the question is the largest batch each model trains within it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

Batch = Mapping[str, Any]
NO_FIT = 2**62  # the peak recorded for a batch the device ran out of memory on


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def param_bytes(model: nn.Module) -> int:
    return tensor_bytes(model.parameters())


def optimizer_state_bytes(optimizer: torch.optim.Optimizer, keys: tuple[str, ...] = ("exp_avg", "exp_avg_sq")) -> int:
    """Bytes of the per-parameter moment tensors (AdamW: exp_avg + exp_avg_sq; ``step`` scalars left out)."""
    return tensor_bytes(v for state in optimizer.state.values() for k, v in state.items() if k in keys)


def peak_tensor_bytes(fn: Callable[[], object]) -> tuple[int, int]:
    """(peak, start) bytes of live CPU tensors while ``fn`` runs, from torch.profiler's memory timeline.

    ``start`` counts the tensors alive before the call that the call touches (parameters, optimizer state); the
    peak adds activations, gradients and temporaries. The timeline is a private helper of torch.profiler (the
    public ``export_memory_timeline`` wraps the same data)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        fn()
    timeline = MemoryProfileTimeline(prof._memory_profile())
    _, sizes = timeline._coalesce_timeline(torch.device("cpu"))
    totals = [sum(row) for row in sizes]
    return int(max(totals)), int(totals[0])


def step_peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes of tensors while ``fn`` (one training step) runs on ``device``."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    if device.type != "cpu":
        raise ValueError(f"step peak memory is measured on CPU and CUDA, not {device.type}")
    return peak_tensor_bytes(fn)[0]


class Trainer:
    """One model's training step at any batch size, with an AdamW optimizer whose moments exist (a first step is
    taken before anything is measured, as in any step after the first)."""

    def __init__(self, model: nn.Module, batch_of: Callable[[int], Batch], lr: float = 1e-5) -> None:
        self.model, self.batch_of = model.train(), batch_of
        self.device = next(model.parameters()).device
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        self.step(self.batch_of(1))

    def step(self, batch: Batch) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(**batch)
        out.loss.backward()
        self.optimizer.step()

    def peak(self, size: int) -> int:
        """Step peak bytes at batch ``size`` (the batch is built before the measured step); a step the device
        runs out of memory on does not fit any cap (:data:`NO_FIT`)."""
        batch = self.batch_of(size)
        self.optimizer.zero_grad(set_to_none=True)  # gradients of the last step are not this step's
        try:
            return step_peak_bytes(lambda: self.step(batch), self.device)
        except torch.OutOfMemoryError:
            self.optimizer.zero_grad(set_to_none=True)
            del batch
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            return NO_FIT


def largest_batch(peak_at: Callable[[int], int], cap: int, start: int, limit: int,
                  known: Mapping[int, int] | None = None) -> tuple[int, dict[int, int]]:
    """The largest batch size in ``[1, limit]`` whose step peak stays within ``cap`` (0 when even one example
    does not), assuming the peak grows with the batch: up from ``start`` by doubling, then bisection. Returns it
    with every ``{size: peak}`` measured on the way (``known``: peaks measured already)."""
    if limit < 1 or start < 1:
        raise ValueError(f"batch sizes must be >= 1 (start {start}, limit {limit})")
    seen: dict[int, int] = dict(known or {})

    def fits(size: int) -> bool:
        if size not in seen:
            seen[size] = int(peak_at(size))
        return seen[size] <= cap

    start = min(start, limit)
    if not fits(start):
        if start == 1 or not fits(1):
            return 0, seen
        low, high = 1, start  # low fits, high does not
    else:
        low = start
        while True:
            if low == limit:
                return low, seen
            nxt = min(2 * low, limit)
            if not fits(nxt):
                high = nxt
                break
            low = nxt
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low, seen


def memory_rows(models: Mapping[str, Trainer], cap_batch: int, limit: int, reference: str = "reference") -> dict:
    """Per model (``reference`` is the unpruned one): parameter and optimizer-state bytes, its step peak at
    ``cap_batch``, and the largest batch within the cap (the reference's peak at ``cap_batch``); ``batch_ratio``
    and ``peak_ratio`` compare every other model with the reference."""
    if cap_batch < 1 or limit < cap_batch:
        raise ValueError(f"need 1 <= cap_batch <= limit, got cap_batch {cap_batch}, limit {limit}")
    cap = models[reference].peak(cap_batch)
    out: dict[str, Any] = {"cap_batch": cap_batch, "cap_bytes": cap, "limit": limit, "models": {}}
    for name, trainer in models.items():
        # the reference's peak at cap_batch is the cap itself: measured once, so it fits its own cap exactly
        largest, seen = largest_batch(trainer.peak, cap, cap_batch, limit,
                                      {cap_batch: cap} if name == reference else None)
        out["models"][name] = {
            "param_bytes": param_bytes(trainer.model),
            "optimizer_bytes": optimizer_state_bytes(trainer.optimizer),
            "peak_bytes": seen[cap_batch],
            "largest_batch": largest,
            "measured": {str(k): v for k, v in sorted(seen.items())},
        }
    ref = out["models"][reference]
    for row in out["models"].values():
        row["batch_ratio"] = row["largest_batch"] / ref["largest_batch"] if ref["largest_batch"] else None
        row["peak_ratio"] = row["peak_bytes"] / ref["peak_bytes"] if row["peak_bytes"] and ref["peak_bytes"] else None
        row["optimizer_ratio"] = (row["optimizer_bytes"] / ref["optimizer_bytes"] if ref["optimizer_bytes"]
                                  else None)
    return out
