"""Weight magnitude: the l2 norm of everything a head owns in the q/k/v/o projections."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.surgery import head_layout, sites
from heads.surgery.families import family_of


def _sq(weight: torch.Tensor) -> torch.Tensor:
    return weight.float().pow(2)


@register_scorer("magnitude")
class Magnitude(Scorer):
    """Weight norm: l2 norm of the head's q/k/v rows and o columns (higher = keep); needs no data.

    Weights only (biases left out). Under grouped-query attention a head's
    k/v rows are its group's, shared with the group's other query heads.
    """

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: Any) -> Scores:
        family = family_of(model)
        layout = head_layout(model)
        out = {}
        with torch.no_grad():
            for site in sites(model):
                heads, d = len(layout[site.name]), site.head_dim
                if not heads:
                    out[site.name] = torch.zeros(0)
                    continue
                proj = family.projections(model, site)
                q = _sq(proj.q.weight).reshape(heads, d, -1).sum((1, 2))
                o = _sq(proj.o.weight).reshape(proj.o.weight.shape[0], heads, d).sum((0, 2))
                groups = heads // site.group_size  # kept heads stay in whole, contiguous groups
                kv = (_sq(proj.k.weight) + _sq(proj.v.weight)).reshape(groups, d, -1).sum((1, 2))
                out[site.name] = (q + o + kv.repeat_interleave(site.group_size)).sqrt().cpu()
        return out
