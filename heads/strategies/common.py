"""Score -> select, shared by the strategies that prune by a scorer or by redundancy."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from heads.config import ConfigError
from heads.params import param
from heads.scoring import compute_scores, get_scorer, stratified_scores
from heads.scoring.select import group_sizes, select
from heads.surgery import head_layout
from heads.train.loop import Hook

SCOPES = ("global", "per_site")


@dataclass
class Selection:
    """How a strategy that prunes by scores chooses heads: the scorer, global or per-site ranking, the heads
    every site keeps, the seed that breaks ties. Shared by posthoc, iterative, oneshot and early."""

    scorer: str = "importance"
    scope: str = "global"  # global | per_site
    floor: int = param(1, ge=0)
    seed: int = param(0, ge=0)
    scorer_params: dict = field(default_factory=dict)  # checked against the scorer's own (base._check_common)

    def check_selection(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigError(f"strategy.params.scope: {self.scope!r} is not one of {list(SCOPES)}")

    def choose(self, model: nn.Module, batches: Iterable[dict] | Mapping[str, Iterable[dict]], ratio: float,
               seed_offset: int = 0) -> dict:
        """Heads to remove: the lowest-scoring ``ratio`` of the current heads (``{domain: batches}``: stratified)."""
        params = dict(self.scorer_params)
        # A seeded scorer (random) draws from the selection's seed unless told otherwise, so every seed, every
        # level of a curve and every order draws its own scores (a fixed scorer seed made them all one order).
        if "seed" not in params and "seed" in {f.name for f in dataclasses.fields(get_scorer(self.scorer).Params)}:
            params["seed"] = self.seed + seed_offset
        return score_and_select(model, batches, self.scorer, ratio, self.scope, self.floor,
                                self.seed + seed_offset, params)


class PruneOnce(Hook):
    """Prune ``ratio`` of the heads once, at training step ``step`` (0: before the first step), chosen by
    ``selection`` on ``probe_batches`` probe batches; optionally re-initialise the survivors. One schedule
    for one-shot pruning after a proxy pass and Michel's pruning at a chosen step (B6)."""

    def __init__(self, step: int, ratio: float, selection: Selection, probe_batches: int, reason: str,
                 reinit: bool = False):
        self.step, self.ratio, self.selection = step, ratio, selection
        self.probe_batches, self.reason, self.reinit = probe_batches, reason, reinit
        self.done = False

    def _act(self, trainer) -> None:
        remove = self.selection.choose(trainer.model, trainer.probe_batches(self.probe_batches), self.ratio)
        trainer.prune(remove, reason=self.reason)
        if self.reinit:
            reinitialise(trainer.model)
            trainer.optimizer.state.clear()
        self.done = True

    def on_start(self, trainer) -> None:
        if self.step == 0 and not self.done:
            self._act(trainer)

    def on_step_end(self, trainer) -> None:
        if not self.done and trainer.step == self.step:
            self._act(trainer)

    def state_dict(self) -> dict:
        return {"done": self.done}

    def load_state_dict(self, state: dict) -> None:
        self.done = state["done"]


def score_and_select(
    model: nn.Module,
    batches: Iterable[dict],
    scorer: str,
    ratio: float,
    scope: str = "global",
    floor: int = 1,
    seed: int = 0,
    scorer_params: Mapping | None = None,
) -> dict[str, list[int]]:
    """Heads to remove: the lowest-scoring ``ratio`` of the current heads (whole groups under GQA).

    ``batches`` may be ``{domain: batches}``: then each domain is scored apart and a head is as prunable as it is
    in the domain where it matters most (:func:`heads.scoring.stratified_scores`, D7)."""
    if ratio <= 0:
        return {}
    if isinstance(batches, Mapping):
        get = get_scorer(scorer)
        domains = {name: list(b) for name, b in batches.items()}
        scores = stratified_scores(get, model, domains, get.params(**dict(scorer_params or {})))
    else:
        scores = compute_scores(scorer, model, list(batches), **dict(scorer_params or {}))
    return select(
        scores, ratio, scope=scope, floor=floor, seed=seed, layout=head_layout(model), group_size=group_sizes(model)
    )


def redundant_to_remove(
    model: nn.Module,
    matrices: Mapping[str, torch.Tensor],
    threshold: float,
    floor: int = 1,
    max_remove: int | None = None,
) -> dict[str, list[int]]:
    """Per site, drop heads whose output has a kept partner with cosine > ``threshold``.

    ``matrices``: ``similarity_matrices`` of ``model`` on probe batches. Greedy, most redundant first
    (highest summed similarity), so of two copies one survives; never below ``floor`` heads per site; at
    most ``max_remove`` heads in all. Grouped-query models: not supported here (redundancy is per query
    head; removal is per group).
    """
    if any(size > 1 for size in group_sizes(model).values()):
        raise ValueError("redundancy pruning removes single heads; grouped-query models lose whole groups only")
    layout = head_layout(model)
    candidates = []  # (summed similarity, site, position)
    for site, m in matrices.items():
        if m.shape[0] < 2:
            continue
        off = m.clone().fill_diagonal_(0.0)
        for pos, total in enumerate(off.sum(-1).tolist()):
            candidates.append((total, site, pos))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    removed: dict[str, set[int]] = {site: set() for site in matrices}
    budget = max_remove if max_remove is not None else len(candidates)
    for _, site, pos in candidates:
        if budget <= 0:
            break
        m, gone = matrices[site], removed[site]
        if len(layout[site]) - len(gone) <= floor:
            continue
        partners = [p for p in range(m.shape[0]) if p != pos and p not in gone]
        if partners and bool((m[pos, partners] > threshold).any()):
            gone.add(pos)
            budget -= 1
    return {site: sorted(layout[site][p] for p in gone) for site, gone in removed.items() if gone}


def reinitialise(model: nn.Module) -> None:
    """Fresh weights for the (pruned) architecture, as a model built at this layout would get."""
    with torch.no_grad():
        model.apply(model._init_weights)
