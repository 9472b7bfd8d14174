"""Michel et al. 2019 head importance: I_h = E_x |dL(x)/dξ_h| for a gate ξ_h on each head's output."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from heads.scoring.losses import example_stats
from heads.scoring.normalize import l2_normalize
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.scoring.session import base_gates, non_empty, run, scoring_mode
from heads.surgery import set_gates


@dataclass(frozen=True)
class ImportanceParams:
    normalize: bool = True  # l2-normalise each site's scores (the paper's per-layer normalisation)
    per_example: bool = True  # E_x of |grad| per example (exact); False: |grad| of each batch's mean loss


@register_scorer("importance")
class Importance(Scorer):
    """Michel et al. 2019: mean |dL/dgate| per head (higher = more important); per-site l2-normalised.

    Per example, exactly: with ``per_example`` every example of a batch gets its
    own gate row (stacked ``[B, H]`` gates on an un-repeated batch of B), so one
    backward pass of the summed per-example losses gives each example's
    gradient dL(x)/dξ, whose absolute values are averaged over examples. An
    example's loss is its mean token loss (a classifier's: its sentence loss).
    ``per_example=False`` is the cheaper reading of the paper's released code:
    |dL_batch/dξ| of each batch's mean loss, averaged over batches (signs can
    cancel inside a batch, so it is not the same estimator).

    The [CLS] detail: in a classifier's last layer only the [CLS] position gets
    a gradient, so a per-token average would shrink that layer by the sequence
    length; the paper divides it by sentences instead. Here every site is
    averaged over examples (sentences), never tokens, which is that rule for
    all layers at once (and per-site normalisation removes scale anyway).

    Existing [H] gates are the point where the gradient is taken, so heads
    already masked to 0 still get a score.
    """

    Params = ImportanceParams

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: ImportanceParams) -> Scores:
        with scoring_mode(model):
            base = base_gates(model)
            live = [name for name, g in base.items() if g.numel()]
            totals = {name: torch.zeros(base[name].numel(), dtype=torch.float64) for name in base}
            n = 0
            for batch in non_empty(batches):
                size = batch["labels"].shape[0]
                if params.per_example:
                    gate = {name: base[name].expand(size, -1).clone().requires_grad_(True) for name in live}
                else:
                    gate = {name: base[name].clone().requires_grad_(True) for name in live}
                set_gates(model, gate)
                out = run(model, batch)
                stats = example_stats(model, batch, out.logits)
                if params.per_example:
                    # Examples are independent in eval mode, so gate row b only sees example b's loss.
                    loss = (stats.loss_sum / stats.count.clamp(min=1)).sum()  # an empty example adds 0
                    n += int((stats.count > 0).sum())
                else:
                    loss = stats.corpus_loss()
                    n += 1
                grads = torch.autograd.grad(loss, [gate[name] for name in live], allow_unused=True)
                for name, grad in zip(live, grads, strict=True):
                    if grad is not None:  # a site the loss never reaches (e.g. nothing downstream)
                        totals[name] += grad.abs().reshape(-1, grad.shape[-1]).sum(0).double().cpu()
            scores = {name: (t / max(n, 1)).float() for name, t in totals.items()}
        return l2_normalize(scores) if params.normalize else scores
