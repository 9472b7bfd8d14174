"""Voita et al. 2019 head confidence: mean over query tokens of the head's largest attention weight."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from heads.scoring.capture import attention_weights
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.scoring.session import scoring_mode
from heads.surgery import head_layout


@register_scorer("confidence")
class Confidence(Scorer):
    """Voita et al. 2019: mean max attention weight over real query tokens (higher = more confident = keep).

    Every real query token counts (Voita et al. leave out the end-of-sentence
    token; here batches decide what is in them). In causal sites the first
    token can only attend to itself, which adds the same 1 to every head.
    """

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: Any) -> Scores:
        sums: dict[str, torch.Tensor] = {}
        rows: dict[str, int] = {}

        def sink(name: str, p: torch.Tensor) -> None:
            sums[name] = sums.get(name, 0) + p.amax(-1).double().sum(0).cpu()
            rows[name] = rows.get(name, 0) + p.shape[0]

        with scoring_mode(model, eager=True):
            layout = head_layout(model)
            attention_weights(model, batches, sink)
        return {
            name: (sums[name] / max(rows[name], 1)).float() if name in sums else torch.zeros(len(kept))
            for name, kept in layout.items()
        }
