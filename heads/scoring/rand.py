"""Random scores: the baseline every real scorer has to beat."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from heads.params import param
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.surgery import head_layout


@dataclass(frozen=True)
class RandomParams:
    seed: int = param(0, ge=0)


@register_scorer("random")
class Random(Scorer):
    """Seeded uniform noise in [0, 1) per head (the no-information baseline); needs no data."""

    Params = RandomParams

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: RandomParams) -> Scores:
        # A private generator: the same seed gives the same scores whatever else used the global RNG.
        gen = torch.Generator().manual_seed(params.seed)
        return {name: torch.rand(len(kept), generator=gen) for name, kept in head_layout(model).items()}
