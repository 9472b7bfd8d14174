"""``curriculum``: waves of redundancy pruning at fractions of training with falling thresholds (D3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from heads.config import ConfigError
from heads.events import Wave
from heads.params import param
from heads.scoring.similarity import SimilarityParams, check_similarity, max_similarity, similarity_matrices
from heads.strategies.base import Strategy
from heads.strategies.common import redundant_to_remove
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, num_heads
from heads.train.loop import Hook


@dataclass
class CurriculumParams:
    # [fraction of training, cosine threshold]: heads with a kept partner above the threshold go
    waves: list = param(default_factory=lambda: [[0.1, 0.9], [0.3, 0.85], [0.9, 0.8]], min_len=1)
    max_ratio: float = param(0.0, ge=0, lt=1)  # never prune more than this share of the original heads; 0 = nothing
    probe_batches: int = param(4, ge=1)
    floor: int = param(1, ge=0)
    pooling: str = "token"  # the similarity's definition: token | mean (the report's; heads.scoring.similarity)
    space: str = "value"  # value | residual

    def check(self) -> None:
        check_similarity(self.pooling, self.space)
        for wave in self.waves:
            # a threshold of 1 or more is never exceeded by a cosine: a wave that could never prune
            if not (isinstance(wave, (list, tuple)) and len(wave) == 2 and all(_number(x) for x in wave)
                    and 0 < wave[0] < 1 and -1 <= wave[1] < 1):
                raise ConfigError(f"strategy.params.waves: {wave!r} is not a wave: each is [fraction of training in "
                                  "(0, 1), cosine threshold in [-1, 1)], e.g. waves=[[0.1, 0.9], [0.3, 0.85]]")
        fractions = [w[0] for w in self.waves]
        if len(set(fractions)) != len(fractions):
            raise ConfigError(f"strategy.params.waves: two waves at one fraction of training ({fractions})")

    def steps(self, steps: int) -> dict[int, float]:
        """The training step of each wave (a fraction of ``steps``, at least 1) -> its threshold."""
        return {max(1, round(f * steps)): t for f, t in self.waves}


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class _Waves(Hook):
    def __init__(self, p: CurriculumParams, steps: int):
        self.p = p
        self.at = p.steps(steps)
        self.original: int | None = None

    def on_start(self, trainer) -> None:
        self.original = num_heads(head_layout(trainer.model))

    def on_step_end(self, trainer) -> None:
        threshold = self.at.get(trainer.step)
        if threshold is None:
            return
        budget = int(self.p.max_ratio * self.original) - (self.original - num_heads(head_layout(trainer.model)))
        if budget <= 0:
            return
        matrices = similarity_matrices(
            trainer.model,
            trainer.probe_batches(self.p.probe_batches, seed_offset=trainer.step),
            SimilarityParams(space=self.p.space, pooling=self.p.pooling),
        )
        remove = redundant_to_remove(trainer.model, matrices, threshold, self.p.floor, max_remove=budget)
        # logged even when nothing goes: a wave that finds no pair above its threshold says how close it came
        trainer.events.write(Wave(
            step=trainer.step, threshold=threshold, pooling=self.p.pooling, max_similarity=max_similarity(matrices),
            removed=sum(len(v) for v in remove.values())).record())
        trainer.prune(remove, reason=f"curriculum wave at step {trainer.step}, cosine > {threshold}")

    def state_dict(self) -> dict:
        return {"original": self.original}

    def load_state_dict(self, state: dict) -> None:
        self.original = state["original"]


@register_strategy("curriculum")
class Curriculum(Strategy):
    """Curriculum waves: prune heads whose outputs duplicate another's, at 10/30/90 % with thresholds 0.9/0.85/0.8."""

    Params = CurriculumParams
    acts_when = "max_ratio > 0"

    def check_config(self, config) -> None:
        super().check_config(config)
        at, steps = self.params.steps(config.train.steps), config.train.steps
        if self.params.max_ratio > 0 and len(at) < len(self.params.waves):
            raise ConfigError(f"strategy.params.waves: {self.params.waves} share steps of the run's {steps} "
                              "(train.steps), so a wave would never act; space their fractions further apart")

    def hooks(self, cfg):
        return [_Waves(self.params, cfg.train.steps)] if self.params.max_ratio > 0 else []
