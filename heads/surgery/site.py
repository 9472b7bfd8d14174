"""What a site is: one attention module, where it sits and how it attends (data only; finding the sites of a
model is :mod:`heads.surgery.model_sites`, through the model's family)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from heads.site_patterns import SiteKind  # how a site attends: defined once, beside the families' site patterns

HeadLayout = dict[str, list[int]]


@dataclass(frozen=True)
class Site:
    """One attention module: where it sits and how it attends."""

    name: str  # module path inside the model
    layer: int  # layer index within its stack
    kind: SiteKind
    stack: str  # "encoder", "decoder" or "" for single-stack models
    num_heads: int  # original (unpruned) query heads
    num_kv_heads: int  # original key/value heads (== num_heads unless grouped-query)
    head_dim: int

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.num_heads // self.num_kv_heads

    @property
    def label(self) -> str:
        """Short human name, e.g. ``dec2.cross`` or ``L0.causal``."""
        prefix = {"encoder": "enc", "decoder": "dec"}.get(self.stack, "L")
        return f"{prefix}{self.layer}.{self.kind}"


def round_half_up(x: float) -> int:
    """Round to nearest, halves up (2.5 -> 3); the epsilon absorbs float error such as 0.3 * 10."""
    return math.floor(x + 0.5 + 1e-9)
