"""``early``: prune by importance at a chosen step of training (Michel's training dynamics, B6): the one-shot
schedule (heads.strategies.common.PruneOnce) with Michel's defaults and no proxy pass of its own."""

from __future__ import annotations

from dataclasses import dataclass

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import PruneOnce, Selection
from heads.strategies.registry import register_strategy


@dataclass
class EarlyParams(Selection):
    at_step: int = 0  # 0 = never
    ratio: float = 0.0
    probe_batches: int = 4

    def check(self) -> None:
        check_ratio("ratio", self.ratio)
        self.check_selection()
        if self.at_step < 0:
            raise ConfigError(f"strategy.params.at_step: must be >= 0, got {self.at_step}")


@register_strategy("early")
class Early(Strategy):
    """Prune the least important heads (|dL/dξ|) once, at a chosen training step."""

    Params = EarlyParams

    def hooks(self, cfg):
        p = self.params
        if not (p.at_step and p.ratio > 0):
            return []
        return [PruneOnce(p.at_step, p.ratio, p, p.probe_batches, f"early {p.scorer} at step {p.at_step}")]
