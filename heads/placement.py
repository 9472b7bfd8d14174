"""Where and at what precision a model runs: the device, autocast, the fp16 gradient scaler, batches moved to
the model, and peak memory read on the device actually used.

Training and every command that runs a model take these from ``train.device`` and ``train.precision``.
Weights stay fp32 (the optimizer's master copy); ``bf16`` and ``fp16`` run matmuls under autocast, and
``fp16`` scales the loss so small gradients survive (bf16 has fp32's range and needs no scaler).
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from heads.config import ConfigError
from heads.env import record_precision

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(spec: str, local_rank: int | None = None) -> torch.device:
    """``auto``: CUDA if present (the launcher's local rank picks the GPU), else CPU. A device that is not
    there is refused by name rather than failing at the first tensor moved to it."""
    spec = str(spec)
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec == "cuda" and local_rank is not None:
        spec = f"cuda:{local_rank}"
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise ConfigError(f"train.device: {spec!r} is not one of {list(DEVICES)}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"train.device: {spec!r} asked for, but torch sees no CUDA device (use auto or cpu)")
        index = 0 if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ConfigError(f"train.device: {spec!r} asked for, but torch sees {torch.cuda.device_count()} GPUs")
        return torch.device("cuda", index)
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("train.device: 'mps' asked for, but this torch has no usable MPS backend")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"train.device: {spec!r} is not one of {list(DEVICES)}")
    return device


@dataclass
class Placement:
    """One process's device and precision."""

    device: torch.device
    precision: str = "fp32"

    @classmethod
    def of(cls, train: Any, local_rank: int | None = None) -> Placement:
        """From a run's ``train`` config section (``device``, ``precision``, ``tf32``)."""
        if train.precision not in PRECISIONS:
            raise ConfigError(f"train.precision: {train.precision!r} is not one of {list(PRECISIONS)}")
        placement = cls(resolve_device(train.device, local_rank), train.precision)
        record_precision(str(placement.dtype).removeprefix("torch."))
        if placement.device.type == "cuda":
            torch.cuda.set_device(placement.device)
            # TF32 matmuls: ~8x the fp32 throughput of recent GPUs for a 10-bit mantissa in products; off makes
            # fp32 runs comparable across GPU generations.
            torch.backends.cuda.matmul.allow_tf32 = bool(train.tf32)
            torch.backends.cudnn.allow_tf32 = bool(train.tf32)
        return placement

    @property
    def dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]

    def autocast(self) -> contextlib.AbstractContextManager:
        """Mixed precision for forward passes (a no-op at fp32)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def scaler(self) -> torch.amp.GradScaler | None:
        """The loss scaler fp16 needs (None otherwise)."""
        return torch.amp.GradScaler(self.device.type) if self.precision == "fp16" else None

    def to(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        return to_device(batch, self.device)

    def synchronize(self) -> None:
        """Wait for queued kernels: a clock read after this times the work, not its launch."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def peak_memory_mb(self, reset: bool = False) -> float:
        """Peak memory since the last reset on this device: CUDA's allocator peak; on CPU the process's
        resident-set peak, which the kernel cannot reset (so it is the peak since the process started)."""
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
            if reset:
                torch.cuda.reset_peak_memory_stats(self.device)
            return peak
        if self.device.type == "mps":
            return torch.mps.driver_allocated_memory() / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def to_device(batch: Mapping[str, Any], device: torch.device | str) -> dict[str, Any]:
    """A batch's tensors on ``device`` (a no-op for those already there); pinned tensors copy asynchronously."""
    return {
        k: v.to(device, non_blocking=v.is_pinned()) if torch.is_tensor(v) else v for k, v in batch.items()
    }


def on_model(batch: Mapping[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """A batch on the device of ``model``'s parameters: every forward pass of a loaded model goes through here."""
    param = next(model.parameters(), None)
    return dict(batch) if param is None else to_device(batch, param.device)


def tensor_megabytes(tensors: Iterator[torch.Tensor]) -> float:
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


def optimizer_state_mb(optimizer: torch.optim.Optimizer) -> float:
    """Memory held by the optimizer's state (AdamW: two moments per parameter) in MiB."""
    return tensor_megabytes(v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v))

