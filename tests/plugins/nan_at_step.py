"""A strategy that breaks training on purpose: the reliability tests' way to make a run diverge in the workflow."""

from dataclasses import dataclass

import torch

from heads.strategies import Strategy, register_strategy
from heads.train.loop import Hook


@dataclass
class NanParams:
    at_step: int = 0  # 0 = never; after this step every weight is NaN, so the next loss is not finite


class _Poison(Hook):
    def __init__(self, p: NanParams):
        self.p = p

    def on_step_end(self, trainer) -> None:
        if trainer.step == self.p.at_step:
            with torch.no_grad():
                for weight in trainer.model.parameters():
                    weight.fill_(float("nan"))


@register_strategy("nan_at_step")
class NanAtStep(Strategy):
    """Fill every weight with NaN after a chosen step (a divergence on demand, for tests)."""

    Params = NanParams

    def hooks(self, cfg):
        return [_Poison(self.params)] if self.params.at_step else []
