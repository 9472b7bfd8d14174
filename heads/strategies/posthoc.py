"""``posthoc``: score a trained model, prune to a ratio (then evaluate; optionally fine-tune)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.params import param
from heads.strategies.base import Strategy
from heads.strategies.common import Selection
from heads.strategies.registry import register_strategy


@dataclass
class PosthocParams(Selection):
    ratio: float = param(0.0, ge=0, lt=1)  # share of the current heads to remove
    batches: int = param(8, ge=1)  # scoring batches

    def check(self) -> None:
        self.check_selection()


@register_strategy("posthoc")
class Posthoc(Strategy):
    """Score a trained model and prune the lowest-scoring share of heads; optional fine-tune."""

    Params = PosthocParams

    def select(self, model, batches):
        return self.params.choose(model, batches, self.params.ratio)
