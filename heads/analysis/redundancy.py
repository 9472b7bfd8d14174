"""How redundant a trained model's heads are, under each definition of similarity (A3, D4, D5, D7).

A head is redundant when another head of its site has an output cosine above a threshold
(:func:`heads.scoring.similarity.redundant_heads`). The verdict depends on the definition: per-token cosine
(``token``) or the practitioner report's cosine of sequence-mean outputs (``mean``), so one measurement reports
every definition asked for, from the same batches. With ``domains`` (e.g. genres), a head is redundant only if it
is redundant in every domain (the stratified view), and each domain's own ratio is kept beside it. In a
grouped-query model the unit is the key/value group (its heads share values, so they look alike by construction,
and pruning removes groups whole): ``unit`` says which was compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from heads.scoring.select import group_sizes
from heads.scoring.similarity import (
    SimilarityParams,
    max_similarity,
    redundant_heads,
    share_redundant,
    similarity_matrices,
)

Batches = Iterable[Mapping[str, Any]]


def _sites(matrices: Mapping[str, torch.Tensor], flags: Mapping[str, torch.Tensor]) -> dict[str, dict]:
    return {name: {"units": int(m.shape[0]), "redundant": int(flags[name].sum()),
                   "max_similarity": max_similarity({name: m})} for name, m in matrices.items()}


def redundancy(model: nn.Module, batches: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]],
               poolings: Sequence[str] = ("token", "mean"), space: str = "value",
               threshold: float = 0.85) -> list[dict]:
    """One row per pooling: ``redundancy_ratio`` (share of heads with a partner above ``threshold``),
    ``max_similarity`` (the most alike pair: how near the threshold it came) and per site counts; with
    ``batches`` given as ``{domain: batches}``, the ratio is the stratified one and ``domains`` holds each
    domain's own ratio and most alike pair."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold is a cosine in (0, 1], got {threshold}")
    if not poolings:
        raise ValueError("no pooling to measure")
    domains = ({d: list(b) for d, b in batches.items()} if isinstance(batches, Mapping)
               else {"all": list(batches)})
    if not domains or any(not b for b in domains.values()):
        raise ValueError("no batches to measure redundancy on")
    sizes = group_sizes(model)
    groups = sizes if any(g > 1 for g in sizes.values()) else None
    rows = []
    for pooling in poolings:
        params = SimilarityParams(space=space, pooling=pooling)
        per_domain = {d: similarity_matrices(model, b, params, groups) for d, b in domains.items()}
        flags: dict[str, torch.Tensor] | None = None
        for matrices in per_domain.values():
            found = redundant_heads(matrices, threshold)
            flags = found if flags is None else {k: flags[k] & found[k] for k in flags}
        assert flags is not None
        row: dict[str, Any] = {
            "pooling": pooling, "space": space, "threshold": threshold, "unit": "group" if groups else "head",
            "redundancy_ratio": share_redundant(flags),
            # the most alike pair in any domain (stratified: its own domain may be the only one it is alike in)
            "max_similarity": max((v for v in (max_similarity(m) for m in per_domain.values()) if v is not None),
                                  default=None),
        }
        if len(domains) == 1:
            row["sites"] = _sites(next(iter(per_domain.values())), flags)
        else:
            row["domains"] = {d: {"redundancy_ratio": share_redundant(redundant_heads(m, threshold)),
                                  "max_similarity": max_similarity(m)} for d, m in per_domain.items()}
        rows.append(row)
    return rows
