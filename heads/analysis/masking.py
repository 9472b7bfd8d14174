"""Michel et al.'s masked pruning on any layout: heads closed by gates, never removed, so a grouped-query model can
lose single query heads (Michel's unit) as well as whole key/value groups (the unit physical pruning allows), and
the two are compared at an equal share of query heads on the same test windows.

A *unit* is one query head (``head``) or one key/value group of query heads (``group``; a plain multi-head model's
groups are its heads). Three orders choose which units go:

- ``importance``: Michel's I = E_x |dL(x)/dxi| per unit, l2-normalised per layer and ranked globally. A group's
  importance is that of one gate tied across its heads, E_x |sum_h dL(x)/dxi_h| (not the mean of its heads'
  scores), from the same per-example gradients as the heads' own.
- ``random``: a seeded uniform order, the no-information baseline.
- ``oracle``: greedy by measurement: at each level, every unit still open is closed alone (on top of the units
  closed so far) on the scoring windows, and those whose closing costs least go; the order an estimator would
  find if it measured instead of estimating. It tells "the model has no spare units" (the oracle fails too) apart
  from "the estimator chose badly" (the oracle succeeds where importance fails).

Scores and the oracle's measurements use the scoring windows only; every mask is then evaluated on the test
windows, whose per-window losses are kept for a bootstrap over texts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from heads.scoring.evaluate import evaluate_closures
from heads.scoring.losses import ExampleStats, example_stats
from heads.scoring.normalize import l2_normalize
from heads.scoring.select import group_sizes
from heads.scoring.session import base_gates, non_empty, run, scoring_mode
from heads.surgery import head_layout, set_gates
from heads.surgery.site import round_half_up

UNITS = ("head", "group")
ORDERS = ("importance", "random", "oracle")


@dataclass(frozen=True, order=True)
class Unit:
    """What one gate decision closes: a query head, or a key/value group of neighbouring query heads."""

    site: str
    index: int  # within its site: the head's position, or the group's
    positions: tuple[int, ...]


def units_of(model: nn.Module, unit: str) -> list[Unit]:
    """Every unit of ``model``, sites in layout order: its query heads (``head``) or key/value groups
    (``group``: Llama's grouped attention serves query head h from key/value head h // group size)."""
    sizes = group_sizes(model)
    out = []
    for site, kept in head_layout(model).items():
        g = 1 if unit == "head" else sizes[site]
        out += [Unit(site, i, tuple(range(i * g, (i + 1) * g))) for i in range(len(kept) // g)]
    return out


@dataclass(frozen=True)
class Mask:
    """One mask: ``ratio`` of the query heads closed, as ``unit``s chosen by ``order``."""

    unit: str
    order: str
    ratio: float
    closed: tuple[Unit, ...]

    def closure(self) -> dict[str, list[int]]:
        """Positions closed per site (for :func:`heads.scoring.evaluate.evaluate_closures`)."""
        out: dict[str, list[int]] = {}
        for u in self.closed:
            out.setdefault(u.site, []).extend(u.positions)
        return {site: sorted(p) for site, p in out.items()}

    def heads(self) -> int:
        return sum(len(u.positions) for u in self.closed)


@dataclass
class Importances:
    """Per unit kind, per site, one importance per unit (heads: [H]; groups: [G])."""

    head: dict[str, torch.Tensor] = field(default_factory=dict)
    group: dict[str, torch.Tensor] = field(default_factory=dict)

    def of(self, unit: str) -> dict[str, torch.Tensor]:
        return self.head if unit == "head" else self.group


def importances(model: nn.Module, batches: Sequence[Mapping[str, Any]], group_size: Mapping[str, int]
                ) -> Importances:
    """Michel's importance of every query head and of every key/value group (one gate tied across its heads),
    from one backward pass per batch: per-example gradients of the per-head gates, |.| averaged over examples
    for heads, summed within the group before |.| for groups; each site l2-normalised (the per-layer step)."""
    with scoring_mode(model):
        base = base_gates(model)
        live = [name for name, g in base.items() if g.numel()]
        heads = {name: torch.zeros(base[name].numel(), dtype=torch.float64) for name in base}
        groups = {name: torch.zeros(base[name].numel() // group_size[name], dtype=torch.float64) for name in base}
        n = 0
        for batch in non_empty(batches):
            size = batch["labels"].shape[0]
            gate = {name: base[name].expand(size, -1).clone().requires_grad_(True) for name in live}
            set_gates(model, gate)
            stats = example_stats(model, batch, run(model, batch).logits)
            loss = (stats.loss_sum / stats.count.clamp(min=1)).sum()  # examples are independent in eval mode
            n += int((stats.count > 0).sum())
            grads = torch.autograd.grad(loss, [gate[name] for name in live], allow_unused=True)
            for name, grad in zip(live, grads, strict=True):
                if grad is None:
                    continue
                grad = grad.double().cpu()  # [B, H]
                heads[name] += grad.abs().sum(0)
                g = group_size[name]
                groups[name] += grad.view(size, -1, g).sum(-1).abs().sum(0)
    scale = 1 / max(n, 1)
    return Importances(l2_normalize({k: v * scale for k, v in heads.items()}),
                       l2_normalize({k: v * scale for k, v in groups.items()}))


def _wanted(units: Sequence[Unit], ratio: float, total_heads: int) -> int:
    """Units to close so that ``ratio`` of the query heads go (whole units: round half up)."""
    size = len(units[0].positions) if units else 1
    return round_half_up(ratio * total_heads / size)


def _lowest(units: Sequence[Unit], values: Mapping[Unit, float], count: int, floor: int, closed: Sequence[Unit],
            seed: int) -> list[Unit]:
    """The ``count`` units with the lowest ``values`` (ties by a seeded permutation), never leaving a site with
    fewer than ``floor`` open units."""
    ranks = torch.randperm(len(units), generator=torch.Generator().manual_seed(seed)).tolist()
    left: dict[str, int] = {}
    for u in units:
        left[u.site] = left.get(u.site, 0) + 1
    for u in closed:
        left[u.site] -= 1
    chosen = []
    for _, _, u in sorted((values[u], r, u) for u, r in zip(units, ranks, strict=True) if u not in closed):
        if len(chosen) == count:
            break
        if left[u.site] > floor:
            left[u.site] -= 1
            chosen.append(u)
    if len(chosen) < count:
        raise ValueError(f"only {len(chosen)} of {count} units can close with {floor} kept per site")
    return chosen


def ranked_masks(units: Sequence[Unit], scores: Mapping[Unit, float], unit: str, order: str,
                 ratios: Sequence[float], total_heads: int, floor: int = 1, seed: int = 0) -> list[Mask]:
    """A mask per ratio from one global ranking (importance, random): the lowest-scoring units close."""
    return [Mask(unit, order, r, tuple(_lowest(units, scores, _wanted(units, r, total_heads), floor, (), seed)))
            for r in ratios]


def oracle_masks(model: nn.Module, batches: Sequence[Mapping[str, Any]], units: Sequence[Unit], unit: str,
                 ratios: Sequence[float], total_heads: int, step: float, floor: int = 1, seed: int = 0,
                 chunk: int = 8) -> tuple[list[Mask], list[dict]]:
    """Greedy masks by measured cost: levels every ``step`` of the query heads (and at each of ``ratios``); at
    each, every open unit is closed alone on top of those closed so far and its loss on ``batches`` measured,
    and the cheapest go. Returns the masks at ``ratios`` and the levels (loss measured on the scoring windows)."""
    targets = sorted({*(round(k * step, 10) for k in range(1, math.floor(max(ratios) / step + 1e-9) + 1)),
                      *ratios})
    closed: list[Unit] = []
    masks, levels = [], []
    with scoring_mode(model):
        for level, target in enumerate(targets, start=1):
            need = _wanted(units, target, total_heads) - len(closed)
            if need > 0:
                open_units = [u for u in units if u not in closed]
                base = {}
                for u in closed:
                    base.setdefault(u.site, []).extend(u.positions)
                closures = [{site: sorted([*base.get(site, []), *(u.positions if site == u.site else [])])
                             for site in {*base, u.site}} for u in open_units]
                _, stats = evaluate_closures(model, batches, closures, chunk)
                cost = {u: float(loss) for u, loss in zip(open_units, stats.corpus_loss(), strict=True)}
                closed += _lowest(units, cost, need, floor, closed, seed + level)
                levels.append({"ratio": target, "units": len(closed), "measured": len(open_units),
                               "scoring_loss": min(cost[u] for u in closed[-need:])})
            if any(abs(target - r) < 1e-9 for r in ratios):
                masks.append(Mask(unit, "oracle", target, tuple(closed)))
    return masks, levels


def evaluate_masks(model: nn.Module, batches: Sequence[Mapping[str, Any]], masks: Sequence[Mask], chunk: int = 8
                   ) -> tuple[ExampleStats, ExampleStats]:
    """Per-window statistics of the unmasked model ([N]) and of each mask ([M, N]) on ``batches``."""
    with scoring_mode(model):
        return evaluate_closures(model, batches, [m.closure() for m in masks], chunk)


def masking(model: nn.Module, scoring: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]],
            units: Sequence[str] = UNITS, orders: Sequence[str] = ("importance",), ratios: Sequence[float] = (0.3, 0.5),
            seed: int = 0, oracle_step: float = 0.1, floor: int = 1, chunk: int = 8) -> dict[str, Any]:
    """Every (unit, order, ratio) mask chosen on ``scoring`` and evaluated on ``test``: the result's ``rows``
    (loss, perplexity, heads closed, change against the unmasked model, in nats and relative) and the
    per-window columns (``loss_sum`` of the unmasked model and of each row, ``tokens``) for a bootstrap."""
    bad = [u for u in units if u not in UNITS] + [o for o in orders if o not in ORDERS]
    if bad:
        raise ValueError(f"unknown units or orders {bad}: units are {list(UNITS)}, orders {list(ORDERS)}")
    if not ratios or any(not 0 < r < 1 for r in ratios):
        raise ValueError(f"ratios must lie in (0, 1), got {list(ratios)}")
    if not 0 < oracle_step < 1:
        raise ValueError(f"oracle_step must lie in (0, 1), got {oracle_step}")
    by_unit = {u: units_of(model, u) for u in units}
    total = sum(len(kept) for kept in head_layout(model).values())
    masks: list[Mask] = []
    levels: dict[str, list[dict]] = {}
    found = importances(model, scoring, group_sizes(model)) if "importance" in orders else None
    for unit, all_units in by_unit.items():
        for order in orders:
            if order == "importance":
                assert found is not None
                values = {u: float(found.of(unit)[u.site][u.index]) for u in all_units}
                masks += ranked_masks(all_units, values, unit, order, ratios, total, floor, seed)
            elif order == "random":
                gen = torch.Generator().manual_seed(seed)
                values = {u: float(v) for u, v in zip(all_units, torch.rand(len(all_units), generator=gen),
                                                      strict=True)}
                masks += ranked_masks(all_units, values, unit, order, ratios, total, floor, seed)
            else:
                found_masks, levels[unit] = oracle_masks(model, scoring, all_units, unit, ratios, total, oracle_step,
                                                         floor, seed, chunk)
                masks += found_masks
    base, masked = evaluate_masks(model, test, masks, chunk)
    base_loss = float(base.corpus_loss())
    rows = []
    for mask, loss in zip(masks, masked.corpus_loss().tolist(), strict=True):
        rows.append({"unit": mask.unit, "order": mask.order, "ratio": mask.ratio, "units_closed": len(mask.closed),
                     "heads_closed": mask.heads(), "heads": total, "loss": loss, "perplexity": math.exp(loss),
                     "delta_loss": loss - base_loss, "relative": (loss - base_loss) / abs(base_loss),
                     "closed": mask.closure()})
    return {
        "baseline": {"loss": base_loss, "perplexity": math.exp(base_loss), "windows": int(base.count.numel()),
                     "tokens": int(base.count.sum())},
        "rows": rows,
        "oracle_levels": levels,
        "columns": {"tokens": base.count.tolist(), "base": base.loss_sum.tolist(),
                    "masked": masked.loss_sum.tolist()},
    }
