"""``dropout_regime``: warm up under high attention dropout, prune by similarity, continue at the low rate (D4)."""

from __future__ import annotations

from dataclasses import dataclass

from heads.events import Redundancy
from heads.params import param
from heads.scoring.similarity import (
    SimilarityParams,
    check_similarity,
    max_similarity,
    redundant_heads,
    share_redundant,
    similarity_matrices,
)
from heads.strategies.base import Strategy
from heads.strategies.common import redundant_to_remove
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, num_heads
from heads.train.loop import Hook


@dataclass
class DropoutRegimeParams:
    high: float | None = param(None, ge=0, lt=1)  # attention dropout during warm-up; None = do nothing
    low: float = param(0.1, ge=0, lt=1)  # attention dropout after the switch
    warmup_fraction: float = param(0.1, gt=0, lt=1)
    # cosine similarity above which a head is redundant: a cosine never exceeds 1, so 1 or more never prunes
    threshold: float = param(0.85, ge=-1, lt=1)
    prune: bool = True  # False: only switch rates and measure the redundancy ratio
    max_ratio: float = param(0.4, ge=0, lt=1)  # at most this share of heads pruned at the switch
    probe_batches: int = param(4, ge=1)
    floor: int = param(1, ge=0)
    pooling: str = "token"  # the similarity's definition: token | mean (the report's; heads.scoring.similarity)
    space: str = "value"  # value | residual

    def check(self) -> None:
        check_similarity(self.pooling, self.space)


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
    acts_when = "high is set (the warm-up's attention dropout)"

    def hooks(self, cfg):
        return [_Regime(self.params, cfg.train.steps)] if self.params.high is not None else []
