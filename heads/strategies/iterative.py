"""``iterative``: Michel et al.'s loop, pruning a step at a time and re-scoring; records the pruning curve."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from heads.config import ConfigError
from heads.params import param
from heads.scoring.select import round_half_up
from heads.strategies.base import Strategy
from heads.strategies.common import Selection
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, num_heads, prune_heads


@dataclass
class IterativeParams(Selection):
    step: float = param(0.1, gt=0, lt=1)  # share of the ORIGINAL heads removed per level (Michel: 5-10 %)
    max_ratio: float = param(0.0, ge=0, lt=1)  # stop at this share pruned; a curve refuses one that rounds to 0
    batches: int = param(8, ge=1)
    # independent orders averaged level by level: one random order is one draw (single random 25 % cuts of
    # the same classifier score anywhere from 55 % to 94 %), so a random baseline averages several
    orders: int = param(1, ge=1)
    # evaluate every level in one pass under stacked gates on the unpruned model (masked == pruned) instead of
    # the pruned model level by level: one translation pass for a curve instead of one per level, each pass
    # taking a decoding's sequential steps (the first GPU visit's curves ran out of their 60 s)
    together: bool = False

    def check(self) -> None:
        self.check_selection()


# (unpruned model, one {site: [H] gate} per level) -> the metrics of each level, the gates closing its heads
EvaluateLevels = Callable[[nn.Module, list[dict[str, torch.Tensor]]], list[dict]]


def level_gates(model: nn.Module, points: list[dict]) -> list[dict[str, torch.Tensor]]:
    """Per level of a curve, ``[H]`` gates on ``model``'s (unpruned) layout closing every head removed up to
    that level (``points[i]["removed"]``: original head ids per site)."""
    layout = head_layout(model)
    device = next(model.parameters()).device
    closed: dict[str, set[int]] = {}
    out = []
    for point in points:
        for site, heads in point["removed"].items():
            closed.setdefault(site, set()).update(int(h) for h in heads)
        out.append({site: torch.tensor([0.0 if h in closed.get(site, ()) else 1.0 for h in kept], device=device)
                    for site, kept in layout.items()})
    return out


ORDER_STRIDE = 7919  # seed distance between orders (a prime, so no order repeats another's level seeds)


def mean_curve(curves: list[list[dict]]) -> list[dict]:
    """Level-by-level mean of several curves' numbers, over the levels every curve reached."""
    levels = min(len(c) for c in curves)
    out = []
    for i in range(levels):
        rows = [c[i] for c in curves]
        keys = [k for k, v in rows[0].items() if k != "removed" and isinstance(v, (int, float))
                and all(isinstance(r.get(k), (int, float)) for r in rows)]
        out.append({k: sum(r[k] for r in rows) / len(rows) for k in keys} | {"level": rows[0]["level"],
                                                                           "orders": len(rows)})
    return out


@register_strategy("iterative")
class Iterative(Strategy):
    """Michel's iterative pruning: remove a step of heads, re-score, repeat; the metric at every level."""

    Params = IterativeParams

    def curve(self, model: nn.Module, batches: list[dict], evaluate: Callable[[nn.Module], dict],
              evaluate_levels: EvaluateLevels | None = None) -> list[dict]:
        """Prune ``model`` in place level by level; ``evaluate(model)`` gives the metrics of each level (with
        ``together``: ``evaluate_levels(unpruned, gates)`` those of every level at once, one ``[H]`` gate per
        site and level closing the heads pruned by then)."""
        p = self.params
        if p.together and evaluate_levels is None:
            raise ConfigError("strategy.params.together: this task evaluates one model at a time (together needs "
                              "a task that evaluates stacked gates: mt)")
        layout = head_layout(model)
        total = num_heads(layout)
        cap = round_half_up(p.max_ratio * total)
        if cap == 0:  # checked before the first evaluation: a curve of the unpruned model alone is no curve
            raise ConfigError(f"strategy.params.max_ratio: {p.max_ratio} of the {total} heads rounds to no head, so "
                              "the curve would hold the unpruned model alone; give max_ratio, e.g. max_ratio=0.5")
        if all(len(kept) <= p.floor for kept in layout.values()):
            raise ConfigError(f"strategy.params.floor: {p.floor} keeps every head of every site (at most "
                              f"{max(len(k) for k in layout.values())} each), so the curve would hold the unpruned "
                              "model alone; lower it")
        unpruned = copy.deepcopy(model) if p.together else None
        points = [{"level": 0, "pruned": 0, "ratio": 0.0, "removed": {}, **({} if p.together else evaluate(model))}]
        level = 0
        while True:
            level += 1
            target = min(round_half_up(level * p.step * total), cap)
            current = num_heads(head_layout(model))
            need = target - (total - current)
            if need <= 0:
                if target >= cap:
                    break
                continue  # a step of less than one head: this level rounds to the last one's count, the next may not
            try:
                remove = p.choose(model, batches, need / current, seed_offset=level)
            except ValueError:  # the floor makes this level unreachable: the curve ends here
                break
            prune_heads(model, remove)
            pruned = total - num_heads(head_layout(model))
            points.append({"level": level, "pruned": pruned, "ratio": pruned / total, "removed": remove,
                           **({} if p.together else evaluate(model))})
        if unpruned is not None:
            for point, metrics in zip(points, evaluate_levels(unpruned, level_gates(unpruned, points)), strict=True):
                point.update(metrics)
        return points

    def curves(self, model: nn.Module, batches: list[dict], evaluate: Callable[[nn.Module], dict],
               evaluate_levels: EvaluateLevels | None = None) -> tuple[list[dict], list[list[dict]]]:
        """``(points, per_order)``: the curve averaged over ``orders`` independent orders (seeds ``seed``,
        ``seed + ORDER_STRIDE``, ...), each pruning its own copy of ``model``; one order prunes ``model`` itself
        and ``per_order`` is empty."""
        p = self.params
        if p.orders == 1:
            return self.curve(model, batches, evaluate, evaluate_levels), []
        per_order = []
        try:
            for k in range(p.orders):
                self.params = replace(p, seed=p.seed + ORDER_STRIDE * k)
                per_order.append(self.curve(copy.deepcopy(model), batches, evaluate, evaluate_levels))
        finally:
            self.params = p
        return mean_curve(per_order), per_order

    def select(self, model, batches):
        return self.params.choose(model, batches, self.params.max_ratio)
