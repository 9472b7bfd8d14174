"""``oneshot``: after a short proxy pass, rank heads by output similarity and remove the top r at once (D2)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.params import param
from heads.strategies.base import Strategy
from heads.strategies.common import PruneOnce, Selection
from heads.strategies.registry import register_strategy


@dataclass
class OneshotParams(Selection):
    ratio: float = param(0.0, ge=0, lt=1)  # share of heads removed; 0 = do nothing
    proxy_steps: int = param(0, ge=0)  # training steps before scoring (they count in the run's budget and clock)
    probe_batches: int = param(4, ge=1)  # batches the similarity is measured on
    scorer: str = "similarity"
    scope: str = "per_site"
    reinit: bool = False  # re-initialise the survivors (and their optimizer state) after pruning

    def check(self) -> None:
        self.check_selection()


@register_strategy("oneshot")
class Oneshot(Strategy):
    """One-shot at (or just after) the start: proxy pass, similarity ranking, remove the top r, optional re-init."""

    Params = OneshotParams
    acts_when = "ratio > 0"
    prunes_at = "proxy_steps"

    def hooks(self, cfg):
        p = self.params
        if p.ratio <= 0:
            return []
        return [PruneOnce(p.proxy_steps, p.ratio, p, p.probe_batches, f"oneshot {p.scorer} r={p.ratio}", p.reinit)]
