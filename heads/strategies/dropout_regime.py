"""``dropout_regime``: warm up under high attention dropout, prune by similarity, continue at the low rate (D4)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.config import ConfigError
from heads.events import Redundancy
from heads.scoring.similarity import (
    SimilarityParams,
    check_similarity,
    max_similarity,
    redundant_heads,
    share_redundant,
    similarity_matrices,
)
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.common import redundant_to_remove
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, num_heads
from heads.train.loop import Hook


@dataclass
class DropoutRegimeParams:
    high: float | None = None  # attention dropout during warm-up; None = do nothing
    low: float = 0.1  # attention dropout after the switch
    warmup_fraction: float = 0.1
    threshold: float = 0.85  # cosine similarity that makes a head redundant
    prune: bool = True  # False: only switch rates and measure the redundancy ratio
    max_ratio: float = 0.4  # at most this share of heads pruned at the switch
    probe_batches: int = 4
    floor: int = 1
    pooling: str = "token"  # the similarity's definition: token | mean (the report's; heads.scoring.similarity)
    space: str = "value"  # value | residual

    def check(self) -> None:
        check_similarity(self.pooling, self.space)
        for name in ("low", "high"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise ConfigError(f"strategy.params.{name}: {value} is outside [0, 1)")
        check_ratio("max_ratio", self.max_ratio)
        if not 0 < self.warmup_fraction < 1:
            raise ConfigError(f"strategy.params.warmup_fraction: {self.warmup_fraction} is outside (0, 1)")


class _Regime(Hook):
    def __init__(self, p: DropoutRegimeParams, steps: int):
        self.p = p
        self.switch = max(1, round(p.warmup_fraction * steps))

    def on_start(self, trainer) -> None:
        trainer.set_dropout(attention=self.p.high)

    def on_step_end(self, trainer) -> None:
        if trainer.step != self.switch:
            return
        p = self.p
        matrices = similarity_matrices(
            trainer.model,
            trainer.probe_batches(p.probe_batches, seed_offset=trainer.step),
            SimilarityParams(space=p.space, pooling=p.pooling),
        )
        trainer.events.write(Redundancy(
            step=trainer.step, redundancy_ratio=share_redundant(redundant_heads(matrices, p.threshold)),
            max_similarity=max_similarity(matrices), attention_dropout=p.high, threshold=p.threshold,
            pooling=p.pooling).record())
        if p.prune:
            total = num_heads(head_layout(trainer.model))
            remove = redundant_to_remove(
                trainer.model, matrices, p.threshold, p.floor, max_remove=int(p.max_ratio * total)
            )
            trainer.prune(remove, reason=f"dropout regime: cosine > {p.threshold} under attention dropout {p.high}")
        trainer.set_dropout(attention=p.low)


@register_strategy("dropout_regime")
class DropoutRegime(Strategy):
    """Attention dropout high (0.25) in warm-up, prune by similarity, then low (0.1); logs the redundancy ratio."""

    Params = DropoutRegimeParams

    def hooks(self, cfg):
        return [_Regime(self.params, cfg.train.steps)] if self.params.high is not None else []
