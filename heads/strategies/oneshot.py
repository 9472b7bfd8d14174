"""``oneshot``: after a short proxy pass, rank heads by output similarity and remove the top r at once (D2)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import reinitialise, score_and_select
from heads.strategies.registry import register_strategy
from heads.train.loop import Hook


@dataclass
class OneshotParams:
    ratio: float = 0.0  # share of heads removed; 0 = do nothing
    proxy_steps: int = 0  # training steps before scoring (they count in the run's budget and clock)
    probe_batches: int = 4  # batches the similarity is measured on
    scorer: str = "similarity"
    scope: str = "per_site"
    floor: int = 1
    reinit: bool = False  # re-initialise the survivors (and their optimizer state) after pruning
    seed: int = 0

    def check(self) -> None:
        check_ratio("ratio", self.ratio)
        if self.proxy_steps < 0 or self.probe_batches < 1:
            raise ConfigError("strategy.params: proxy_steps must be >= 0 and probe_batches >= 1")


class _Oneshot(Hook):
    def __init__(self, p: OneshotParams):
        self.p = p
        self.done = False

    def _act(self, trainer) -> None:
        p = self.p
        remove = score_and_select(
            trainer.model, trainer.probe_batches(p.probe_batches), p.scorer, p.ratio, p.scope, p.floor, p.seed
        )
        trainer.prune(remove, reason=f"oneshot {p.scorer} r={p.ratio}")
        if p.reinit:
            reinitialise(trainer.model)
            trainer.optimizer.state.clear()
        self.done = True

    def on_start(self, trainer) -> None:
        if self.p.proxy_steps == 0:
            self._act(trainer)

    def on_step_end(self, trainer) -> None:
        if not self.done and trainer.step == self.p.proxy_steps:
            self._act(trainer)

    def state_dict(self) -> dict:
        return {"done": self.done}

    def load_state_dict(self, state: dict) -> None:
        self.done = state["done"]


@register_strategy("oneshot")
class Oneshot(Strategy):
    """One-shot at (or just after) the start: proxy pass, similarity ranking, remove the top r, optional re-init."""

    Params = OneshotParams

    def hooks(self, cfg):
        return [_Oneshot(self.params)] if self.params.ratio > 0 else []
