"""``oneshot``: after a short proxy pass, rank heads by output similarity and remove the top r at once (D2)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import PruneOnce, Selection
from heads.strategies.registry import register_strategy


@dataclass
class OneshotParams(Selection):
    ratio: float = 0.0  # share of heads removed; 0 = do nothing
    proxy_steps: int = 0  # training steps before scoring (they count in the run's budget and clock)
    probe_batches: int = 4  # batches the similarity is measured on
    scorer: str = "similarity"
    scope: str = "per_site"
    reinit: bool = False  # re-initialise the survivors (and their optimizer state) after pruning

    def check(self) -> None:
        check_ratio("ratio", self.ratio)
        self.check_selection()
        if self.proxy_steps < 0 or self.probe_batches < 1:
            raise ConfigError("strategy.params: proxy_steps must be >= 0 and probe_batches >= 1")


@register_strategy("oneshot")
class Oneshot(Strategy):
    """One-shot at (or just after) the start: proxy pass, similarity ranking, remove the top r, optional re-init."""

    Params = OneshotParams

    def hooks(self, cfg):
        p = self.params
        if p.ratio <= 0:
            return []
        return [PruneOnce(p.proxy_steps, p.ratio, p, p.probe_batches, f"oneshot {p.scorer} r={p.ratio}", p.reinit)]
