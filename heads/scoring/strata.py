"""Domain-stratified scores (D7): a head counts as unimportant only if it is so in every domain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from heads.scoring.registry import Scorer, Scores, get_scorer


def stratified_scores(
    scorer: Scorer | str,
    model: nn.Module,
    domains: Mapping[str, Iterable[Mapping[str, Any]]],
    params: Any = None,
) -> Scores:
    """Score each domain's batches separately and keep, per head, its highest score over domains.

    With higher = keep, the maximum makes a head low (prunable) only if it is
    low in every domain: a head redundant on average but the only one carrying
    one domain's patterns keeps that domain's high score. For similarity this
    is the minimum over domains of the summed similarity, negated.
    """
    scorer = get_scorer(scorer) if isinstance(scorer, str) else scorer
    if not domains:
        raise ValueError("no domains to score")
    per_domain = [scorer.score(model, batches, params) for batches in domains.values()]
    return {name: torch.stack([s[name] for s in per_domain]).amax(0) for name in per_domain[0]}
