"""``early``: prune by importance at a chosen step of training (Michel's training dynamics, B6)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import score_and_select
from heads.strategies.registry import register_strategy
from heads.train.loop import Hook


@dataclass
class EarlyParams:
    at_step: int = 0  # 0 = never
    ratio: float = 0.0
    scorer: str = "importance"
    scope: str = "global"
    floor: int = 1
    probe_batches: int = 4
    seed: int = 0

    def check(self) -> None:
        check_ratio("ratio", self.ratio)
        if self.at_step < 0:
            raise ConfigError(f"strategy.params.at_step: must be >= 0, got {self.at_step}")


class _Early(Hook):
    def __init__(self, p: EarlyParams):
        self.p = p

    def on_step_end(self, trainer) -> None:
        p = self.p
        if trainer.step == p.at_step:
            remove = score_and_select(
                trainer.model, trainer.probe_batches(p.probe_batches), p.scorer, p.ratio, p.scope, p.floor, p.seed
            )
            trainer.prune(remove, reason=f"early {p.scorer} at step {p.at_step}")


@register_strategy("early")
class Early(Strategy):
    """Prune the least important heads (|dL/dξ|) once, at a chosen training step."""

    Params = EarlyParams

    def hooks(self, cfg):
        return [_Early(self.params)] if self.params.at_step and self.params.ratio > 0 else []
