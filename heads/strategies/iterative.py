"""``iterative``: Michel et al.'s loop, pruning a step at a time and re-scoring; records the pruning curve."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from heads.config import ConfigError
from heads.scoring.select import round_half_up
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import Selection
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, num_heads, prune_heads


@dataclass
class IterativeParams(Selection):
    step: float = 0.1  # share of the ORIGINAL heads removed per level (Michel: 5-10 %)
    max_ratio: float = 0.0  # stop at this share pruned; 0 = do nothing
    batches: int = 8

    def check(self) -> None:
        check_ratio("max_ratio", self.max_ratio)
        self.check_selection()
        if not 0.0 < self.step < 1.0:
            raise ConfigError(f"strategy.params.step: {self.step} is outside (0, 1)")


@register_strategy("iterative")
class Iterative(Strategy):
    """Michel's iterative pruning: remove a step of heads, re-score, repeat; the metric at every level."""

    Params = IterativeParams

    def curve(self, model: nn.Module, batches: list[dict], evaluate: Callable[[nn.Module], dict]) -> list[dict]:
        """Prune ``model`` in place level by level; ``evaluate(model)`` gives the metrics of each level."""
        p = self.params
        total = num_heads(head_layout(model))
        points = [{"level": 0, "pruned": 0, "ratio": 0.0, "removed": {}, **evaluate(model)}]
        level = 0
        while True:
            level += 1
            target = min(round_half_up(level * p.step * total), round_half_up(p.max_ratio * total))
            current = num_heads(head_layout(model))
            need = target - (total - current)
            if need <= 0:
                break
            try:
                remove = p.choose(model, batches, need / current, seed_offset=level)
            except ValueError:  # the floor makes this level unreachable: the curve ends here
                break
            prune_heads(model, remove)
            pruned = total - num_heads(head_layout(model))
            points.append(
                {"level": level, "pruned": pruned, "ratio": pruned / total, "removed": remove, **evaluate(model)}
            )
        return points

    def select(self, model, batches):
        return self.params.choose(model, batches, self.params.max_ratio)
