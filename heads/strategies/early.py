"""``early``: prune by importance at a chosen step of training (Michel's training dynamics, B6): the one-shot
schedule (heads.strategies.common.PruneOnce) with Michel's defaults and no proxy pass of its own."""

from __future__ import annotations

from dataclasses import dataclass

from heads.params import param
from heads.strategies.base import Strategy
from heads.strategies.common import PruneOnce, Selection
from heads.strategies.registry import register_strategy


@dataclass
class EarlyParams(Selection):
    at_step: int = param(0, ge=0)  # 0 = never
    ratio: float = param(0.0, ge=0, lt=1)
    probe_batches: int = param(4, ge=1)

    def check(self) -> None:
        self.check_selection()


@register_strategy("early")
class Early(Strategy):
    """Prune the least important heads (|dL/dξ|) once, at a chosen training step."""

    Params = EarlyParams
    acts_when = "at_step > 0 and ratio > 0"
    prunes_at = "at_step"

    def hooks(self, cfg):
        p = self.params
        if not (p.at_step and p.ratio > 0):
            return []
        return [PruneOnce(p.at_step, p.ratio, p, p.probe_batches, f"early {p.scorer} at step {p.at_step}")]
