"""A strategy defined outside the package, as docs/ADDING_A_STRATEGY.md walks through."""

from dataclasses import dataclass

from heads.strategies import Strategy, register_strategy
from heads.train.loop import Hook


@dataclass
class LastLayerParams:
    at_step: int = 0  # 0 = never


class _DropLastLayer(Hook):
    def __init__(self, p):
        self.p = p

    def on_step_end(self, trainer):
        if trainer.step == self.p.at_step:
            from heads.surgery import head_layout

            layout = head_layout(trainer.model)
            last = list(layout)[-1]
            trainer.prune({last: layout[last][1:]}, reason="last layer keeps one head")


@register_strategy("last_layer_one_head")
class LastLayerOneHead(Strategy):
    """Keep one head in the last layer from a chosen step on."""

    Params = LastLayerParams

    def hooks(self, cfg):
        return [_DropLastLayer(self.params)] if self.params.at_step else []
