"""How redundant a trained model's heads are, under each definition of similarity (A3, D4, D5, D7).

A head is redundant when another head of its site has an output cosine above a threshold
(:func:`heads.scoring.similarity.redundant_heads`). The verdict depends on the definition: per-token cosine
(``token``) or the practitioner report's cosine of sequence-mean outputs (``mean``), in value space (before the
output projection) or residual space (what the unit adds to the residual stream), so one measurement reports
every definition asked for, from the same batches. With ``domains`` (e.g. genres), a head is redundant only if it
is redundant in every domain (the stratified view), and each domain's own ratio is kept beside it. In a
grouped-query model the unit is by default the key/value group (its heads share values, so they look alike by
construction, and pruning removes groups whole); ``units`` asks for single query heads too, and each row's
``unit`` says which was compared. ``js`` adds the report's second signal: query heads whose attention patterns
are at JS divergence < 0.05 (a row with ``space: "attention"``). ``split_half`` adds each row's reliability: the
correlation between the similarities measured on two halves of the batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from heads.scoring.js import SAME_PATTERN, js_sums, min_js, same_pattern_heads
from heads.scoring.select import group_sizes
from heads.scoring.similarity import (
    SimilarityParams,
    Sums,
    max_similarity,
    mean_matrices,
    redundant_heads,
    share_redundant,
    similarity_sums,
)

Batches = Iterable[Mapping[str, Any]]
UNITS = ("head", "group")
SPACES = ("value", "residual")


def default_units(model: nn.Module) -> tuple[str, ...]:
    """The unit a model is compared in unless asked: its key/value groups when grouped-query, else its heads."""
    return ("group",) if any(g > 1 for g in group_sizes(model).values()) else ("head",)


def unit_groups(model: nn.Module, unit: str) -> dict[str, int] | None:
    """What :func:`similarity_sums` needs for ``unit``: each site's group size for groups, None for heads (a
    multi-head model's group is one head, so both units give the same numbers there)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {list(UNITS)}, got {unit!r}")
    return group_sizes(model) if unit == "group" else None


def split_half_r(first: Mapping[str, torch.Tensor], second: Mapping[str, torch.Tensor]) -> float | None:
    """Pearson correlation between two halves' similarities of distinct unit pairs, every site pooled: how far
    the measurement reproduces itself, whatever it finds (None with fewer than three pairs or no spread)."""
    pairs = [(a[tuple(torch.triu_indices(*a.shape, 1))], second[name][tuple(torch.triu_indices(*a.shape, 1))])
             for name, a in first.items() if a.shape[0] > 1]
    if not pairs or sum(x.numel() for x, _ in pairs) < 3:
        return None
    x, y = (torch.cat([p[i] for p in pairs]).double() for i in (0, 1))
    r = float(torch.corrcoef(torch.stack([x, y]))[0, 1])
    return None if math.isnan(r) else max(-1.0, min(1.0, r))


def _halves(parts: Mapping[str, Sequence[Sums]]) -> tuple[dict, dict]:
    """Each half's matrices, every domain's rows pooled."""
    return mean_matrices(*(p[0] for p in parts.values())), mean_matrices(*(p[1] for p in parts.values()))


def _sites(matrices: Mapping[str, torch.Tensor], flags: Mapping[str, torch.Tensor]) -> dict[str, dict]:
    return {name: {"units": int(m.shape[0]), "redundant": int(flags[name].sum()),
                   "max_similarity": max_similarity({name: m})} for name, m in matrices.items()}


def _js_sites(matrices: Mapping[str, torch.Tensor], flags: Mapping[str, torch.Tensor]) -> dict[str, dict]:
    return {name: {"units": int(m.shape[0]), "redundant": int(flags[name].sum()), "min_js": min_js({name: m})}
            for name, m in matrices.items()}


def redundancy(model: nn.Module, batches: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]],
               poolings: Sequence[str] = ("token", "mean"), space: str = "value",
               threshold: float = 0.85, *, spaces: Sequence[str] | None = None,
               units: Sequence[str] | None = None, js: bool = False, js_threshold: float = SAME_PATTERN,
               split_half: bool = False) -> list[dict]:
    """One row per (unit, space, pooling), in that order: ``redundancy_ratio`` (share of units with a partner
    above ``threshold``), ``max_similarity`` (the most alike pair: how near the threshold it came) and per site
    counts; with ``batches`` given as ``{domain: batches}``, the ratio is the stratified one and ``domains``
    holds each domain's own ratio and most alike pair. ``spaces`` (default ``[space]``) and ``units`` (default
    :func:`default_units`) measure several in one pass per (space, pooling).

    ``js``: one more row, ``definition: "js"``, ``space: "attention"``, ``unit: "head"`` (query heads),
    ``pooling: "token"`` (JS per query position, averaged), ``threshold: js_threshold``: the share of query
    heads with a partner in their site at JS < ``js_threshold`` and ``min_js``, the most alike pair's JS;
    its ``max_similarity`` is None (a divergence is no cosine). ``split_half``: every row gets
    ``split_half_r`` (:func:`split_half_r` between even and odd batches; None with fewer than two batches)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold is a cosine in (0, 1], got {threshold}")
    if not 0 < js_threshold <= 1:
        raise ValueError(f"js_threshold is a divergence in bits in (0, 1], got {js_threshold}")
    if not poolings:
        raise ValueError("no pooling to measure")
    spaces = tuple(spaces) if spaces else (space,)
    if unknown := [s for s in spaces if s not in SPACES]:
        raise ValueError(f"space must be one of {list(SPACES)}, got {unknown}")
    units = tuple(units) if units else default_units(model)
    groups = {unit: unit_groups(model, unit) for unit in dict.fromkeys(units)}
    domains = ({d: list(b) for d, b in batches.items()} if isinstance(batches, Mapping)
               else {"all": list(batches)})
    if not domains or any(not b for b in domains.values()):
        raise ValueError("no batches to measure redundancy on")
    parts = 2 if split_half else 1
    # one pass per (space, pooling) and domain gives every unit: {(space, pooling): {domain: {unit: parts}}}
    sums = {(sp, pooling): {d: similarity_sums(model, b, SimilarityParams(space=sp, pooling=pooling), groups, parts)
                            for d, b in domains.items()} for sp in spaces for pooling in poolings}
    rows = []
    for unit in groups:
        for sp in spaces:
            for pooling in poolings:
                measured = {d: by_unit[unit] for d, by_unit in sums[(sp, pooling)].items()}
                per_domain = {d: mean_matrices(*p) for d, p in measured.items()}
                flags = _in_every_domain(per_domain, lambda m: redundant_heads(m, threshold))
                row: dict[str, Any] = {
                    "pooling": pooling, "space": sp, "threshold": threshold, "unit": unit,
                    "redundancy_ratio": share_redundant(flags),
                    # the most alike pair in any domain (stratified: its own domain may be the only one it is
                    # alike in)
                    "max_similarity": max((v for v in (max_similarity(m) for m in per_domain.values())
                                           if v is not None), default=None),
                }
                if len(domains) == 1:
                    row["sites"] = _sites(next(iter(per_domain.values())), flags)
                else:
                    row["domains"] = {d: {"redundancy_ratio": share_redundant(redundant_heads(m, threshold)),
                                          "max_similarity": max_similarity(m)} for d, m in per_domain.items()}
                if split_half:
                    row["split_half_r"] = split_half_r(*_halves(measured)) if _two_halves(domains) else None
                rows.append(row)
    if js:
        rows.append(_js_row(model, domains, js_threshold, parts))
    return rows


def _in_every_domain(per_domain: Mapping[str, Mapping[str, torch.Tensor]],
                     flag: Callable[[Mapping[str, torch.Tensor]], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per site, the units ``flag`` marks in every domain's matrices (the stratified view; one domain: its own)."""
    flags: dict[str, torch.Tensor] | None = None
    for matrices in per_domain.values():
        found = flag(matrices)
        flags = found if flags is None else {k: flags[k] & found[k] for k in flags}
    assert flags is not None
    return flags


def _two_halves(domains: Mapping[str, Sequence]) -> bool:
    """Both halves hold a batch (even and odd batches of some domain)."""
    return any(len(b) > 1 for b in domains.values())


def _js_row(model: nn.Module, domains: Mapping[str, Sequence[Mapping[str, Any]]], threshold: float,
            parts: int) -> dict:
    """The attention-pattern row of :func:`redundancy`."""
    measured = {d: js_sums(model, b, parts) for d, b in domains.items()}
    per_domain = {d: mean_matrices(*p) for d, p in measured.items()}
    flags = _in_every_domain(per_domain, lambda m: same_pattern_heads(m, threshold))
    row: dict[str, Any] = {
        "definition": "js", "pooling": "token", "space": "attention", "threshold": threshold, "unit": "head",
        "redundancy_ratio": share_redundant(flags), "max_similarity": None,
        "min_js": min((v for v in (min_js(m) for m in per_domain.values()) if v is not None), default=None),
    }
    if len(domains) == 1:
        row["sites"] = _js_sites(next(iter(per_domain.values())), flags)
    else:
        row["domains"] = {d: {"redundancy_ratio": share_redundant(same_pattern_heads(m, threshold)),
                              "max_similarity": None, "min_js": min_js(m)} for d, m in per_domain.items()}
    if parts == 2:
        row["split_half_r"] = split_half_r(*_halves(measured)) if _two_halves(domains) else None
    return row
