"""``posthoc``: score a trained model, prune to a ratio (then evaluate; optionally fine-tune)."""

from __future__ import annotations

from dataclasses import dataclass, field

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import score_and_select
from heads.strategies.registry import register_strategy


@dataclass
class PosthocParams:
    scorer: str = "importance"
    ratio: float = 0.0  # share of the current heads to remove
    scope: str = "global"  # global | per_site
    floor: int = 1
    seed: int = 0
    batches: int = 8  # scoring batches
    scorer_params: dict = field(default_factory=dict)

    def check(self) -> None:
        check_ratio("ratio", self.ratio)
        if self.scope not in ("global", "per_site"):
            raise ConfigError(f"strategy.params.scope: {self.scope!r} is not one of ['global', 'per_site']")


@register_strategy("posthoc")
class Posthoc(Strategy):
    """Score a trained model and prune the lowest-scoring share of heads; optional fine-tune."""

    Params = PosthocParams

    def select(self, model, batches):
        p = self.params
        return score_and_select(model, batches, p.scorer, p.ratio, p.scope, p.floor, p.seed, p.scorer_params)
