"""Leave-one-head-out ablation (Michel et al. 2019 Table 1) and keep-only-one-head per site (their B2)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from heads.params import param
from heads.scoring.evaluate import evaluate_closures
from heads.scoring.losses import FIELDS, ExampleStats
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.scoring.session import scoring_mode
from heads.scoring.significance import detectable_shift, paired_ttest
from heads.surgery import head_layout


@dataclass(frozen=True)
class AblationParams:
    chunk: int = param(8, ge=1)  # ablations per forward pass (the batch is repeated this many times)
    alpha: float = param(0.05, gt=0, lt=1)  # significance level of the paired t-test
    test: Literal["loss", "accuracy"] = "loss"  # which per-example statistic the t-test compares
    # Changes this small are float noise (the stacked batch runs other kernel shapes than the baseline):
    # per-example differences and deltas within it count as exactly 0.
    noise_tol: float = param(1e-6, ge=0)
    # Only the sites of these layers (None: every layer): a large model's heads are ablated on a stated sample
    # of its layers, so each ablation can afford enough examples to detect a small change.
    layers: tuple[int, ...] | None = param(None, ge=0, min_len=1)
    # The power statement of each head's test: the smallest per-example change it detects at this level with
    # 80 % power (detectable_shift), so a count of heads significant at that level (a claim's alpha: 0.01) says
    # what size it could see; `significant` itself is at `alpha`.
    power_alpha: float = param(0.01, gt=0, lt=1)


@dataclass(frozen=True)
class HeadAblation:
    """One head masked alone: the change it causes and whether that change is significant."""

    site: str
    position: int  # index within the site's kept heads
    head: int  # original head id
    delta_loss: float  # loss without the head - baseline loss (> 0: the head helps)
    delta_accuracy: float  # accuracy without the head - baseline accuracy
    p_value: float  # paired t-test over examples on the `test` statistic
    significant: bool
    # smallest mean per-example change of the `test` statistic its test detects (alpha params.power_alpha,
    # 80 % power), from the spread of this head's paired differences
    detectable: float = float("nan")


@dataclass
class AblationTable:
    """All leave-one-out results of a model on some batches."""

    baseline_loss: float
    baseline_accuracy: float
    examples: int
    rows: list[HeadAblation] = field(default_factory=list)
    layout: dict[str, list[int]] = field(default_factory=dict)
    # the `test` statistic per example: the baseline's [N] and each row's ablation [len(rows), N], so a share
    # of significant heads can be recomputed on resamples of the examples (they share one test set)
    per_example: tuple[np.ndarray, np.ndarray] | None = None

    def scores(self) -> Scores:
        """Increase in loss when the head is removed, per site in layout order (higher = keep)."""
        out = {name: torch.zeros(len(kept)) for name, kept in self.layout.items()}
        for row in self.rows:
            out[row.site][row.position] = row.delta_loss
        return out

    def significant(self) -> list[HeadAblation]:
        return [row for row in self.rows if row.significant]

    def examples_record(self, test: str, noise_tol: float) -> dict[str, Any] | None:
        """What ``heads ablate`` keeps beside its result (``NAME.examples.json``): the ``test`` statistic per
        example, the baseline's and each head's ablation (rows in ``heads`` order, NaN written as null), from
        which heads.report recomputes every head's test on a resample of the examples."""
        if self.per_example is None:
            return None
        base, ablated = self.per_example

        def plain(values: np.ndarray) -> list:
            return [None if math.isnan(v) else float(v) for v in values]

        return {"units": int(base.shape[0]), "test": test, "noise_tol": noise_tol,
                "heads": [[r.site, r.position] for r in self.rows],
                "columns": {"base": plain(base), "ablated": [plain(row) for row in ablated]}}


def ablation_table(
    model: nn.Module, batches: Iterable[Mapping[str, Any]], params: AblationParams | None = None
) -> AblationTable:
    """Mask each head alone (stacked gates, ``params.chunk`` ablations per forward) and test each change.

    Loss is item-weighted over all examples (tokens for LMs, sentences for
    classifiers), as the model reports it; the t-test pairs per-example mean
    losses (or accuracies) with and without the head.
    """
    params = params or AblationParams()
    if params.test not in ("loss", "accuracy"):
        raise ValueError(f"test must be 'loss' or 'accuracy', got {params.test!r}")
    with scoring_mode(model):
        layout = of_layers(model, head_layout(model), params.layers)
        where = [(name, p) for name, kept in layout.items() for p in range(len(kept))]
        base, ablated = evaluate_closures(model, batches, [{name: [p]} for name, p in where], params.chunk)
    base_loss, base_acc = float(base.corpus_loss()), float(base.corpus_accuracy())
    losses, accs = ablated.corpus_loss(), ablated.corpus_accuracy()
    per_base = base.mean_loss() if params.test == "loss" else base.accuracy()
    per_ablated = ablated.mean_loss() if params.test == "loss" else ablated.accuracy()
    rows = []
    for i, (name, p) in enumerate(where):
        p_value = paired_ttest(per_base.numpy(), per_ablated[i].numpy(), tol=params.noise_tol)
        rows.append(
            HeadAblation(
                site=name,
                position=p,
                head=layout[name][p],
                delta_loss=_snap(float(losses[i]) - base_loss, params.noise_tol),
                delta_accuracy=_snap(float(accs[i]) - base_acc, params.noise_tol),
                p_value=p_value,
                significant=p_value < params.alpha,
                detectable=detectable_shift(per_base.numpy(), per_ablated[i].numpy(), params.power_alpha),
            )
        )
    return AblationTable(base_loss, base_acc, int((base.count > 0).sum()), rows, layout,
                         (per_base.numpy().astype(np.float64), per_ablated.numpy().astype(np.float64)))


def of_layers(model: nn.Module, layout: dict[str, list[int]], layers: Iterable[int] | None) -> dict[str, list[int]]:
    """The layout's sites in ``layers`` (all with None); a layer the model does not have is refused."""
    if layers is None:
        return layout
    from heads.surgery import sites

    at = {s.name: s.layer for s in sites(model)}
    wanted = set(layers)
    unknown = sorted(wanted - set(at.values()))
    if unknown:
        raise ValueError(f"layers {unknown} are not layers of this model (0 to {max(at.values())})")
    return {name: kept for name, kept in layout.items() if at.get(name) in wanted}


def spread_layers(model: nn.Module, count: int) -> tuple[int, ...]:
    """``count`` of the model's layers spread evenly over its depth, first and last included (all of them where
    it has no more): a stated sample that carries over to a model of another depth. Layer ``i`` of ``count`` is
    the one at ``round(i * n / (count - 1))`` of ``n``, clamped to the last: 30 layers give 0, 6, 12, 18, 24, 29;
    12 give 0, 2, 5, 7, 10, 11."""
    from heads.surgery import sites

    if count < 1:
        raise ValueError(f"a spread of layers needs a count >= 1, got {count}")
    have = sorted({s.layer for s in sites(model)})
    n = len(have)
    if count >= n:
        return tuple(have)
    if count == 1:
        return (have[0],)
    return tuple(sorted({have[min(n - 1, round(i * n / (count - 1)))] for i in range(count)}))


def _snap(delta: float, tol: float) -> float:
    return 0.0 if abs(delta) <= tol else delta


@register_scorer("ablation")
class Ablation(Scorer):
    """Leave-one-out: increase in loss when the head alone is masked (higher = more important)."""

    Params = AblationParams

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: AblationParams) -> Scores:
        return ablation_table(model, batches, params).scores()


@dataclass(frozen=True)
class AllButOne:
    """A site reduced to its single best head (all others masked) vs the full model."""

    site: str
    best_head: int  # original id of the head that, kept alone, gives the lowest loss
    loss: float
    baseline_loss: float
    accuracy: float
    baseline_accuracy: float

    @property
    def delta_loss(self) -> float:
        return self.loss - self.baseline_loss


def all_but_one(model: nn.Module, batches: Iterable[Mapping[str, Any]], chunk: int = 8,
                layers: Iterable[int] | None = None, held_out: bool = False) -> dict[str, AllButOne]:
    """Per site: every choice of one kept head is evaluated; report the best against the baseline.

    Other sites keep all their heads. Sites without heads are left out; a
    one-head site reports its baseline. ``held_out``: the best head is chosen on the first half of the examples
    and its loss (and the baseline's) reported on the second half, so the choice is not scored on the windows
    that made it (the minimum of several noisy losses, scored where it was found, flatters the best head).
    """
    with scoring_mode(model):
        layout = of_layers(model, head_layout(model), layers)
        where = [(name, p) for name, kept in layout.items() for p in range(len(kept))]
        closures = [{name: [q for q in range(len(layout[name])) if q != p]} for name, p in where]
        base, kept_one = evaluate_closures(model, batches, closures, chunk)
    choose = score = slice(None)
    if held_out:
        n = base.count.numel()
        if n < 2:
            raise ValueError(f"held_out needs at least two examples to choose on one half and score on the other, "
                             f"got {n}")
        choose, score = slice(0, n // 2), slice(n // 2, n)
    picked = ExampleStats(*(getattr(kept_one, f)[:, choose] for f in FIELDS)).corpus_loss()
    scored = ExampleStats(*(getattr(kept_one, f)[:, score] for f in FIELDS))
    base = ExampleStats(*(getattr(base, f)[score] for f in FIELDS))
    base_loss, base_acc = float(base.corpus_loss()), float(base.corpus_accuracy())
    losses, accs = scored.corpus_loss(), scored.corpus_accuracy()
    out: dict[str, AllButOne] = {}
    best: dict[str, float] = {}
    for i, (name, p) in enumerate(where):
        if name not in out or float(picked[i]) < best[name]:
            best[name] = float(picked[i])
            out[name] = AllButOne(name, layout[name][p], float(losses[i]), base_loss, float(accs[i]), base_acc)
    return out
