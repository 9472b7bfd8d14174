"""GPU classes ``heads plan`` costs against: data only, so the command line builds its help without importing
torch or transformers (every job's start-up paid for that)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    """A GPU class: peak dense bf16 tensor throughput and memory, from the vendor's datasheet."""

    name: str
    tflops: float  # dense bf16, no 2:4 sparsity
    memory_gib: float


# NVIDIA datasheets, dense BF16 tensor-core TFLOP/s (the datasheets' headline figures are twice these, "with
# sparsity"); H200 is the SXM part, whose compute equals the H100 SXM's.
GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("A100-40GB", 312, 40), Gpu("A100-80GB", 312, 80), Gpu("H100-PCIe", 756, 80), Gpu("H100-SXM", 989, 80),
    Gpu("H200", 989, 141), Gpu("L4", 121, 24), Gpu("L40S", 362, 48),
)}
DEFAULT_GPU = "H100-SXM"
DEFAULT_MFU = 0.35
