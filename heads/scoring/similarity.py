"""Redundancy by output similarity (the practitioner's report, D2/D5/D7): cosine between heads of a site."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from heads.scoring.capture import head_outputs
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.scoring.session import scoring_mode
from heads.surgery import head_layout

Batches = Iterable[Mapping[str, Any]]
# per site: summed [U, U] cosines and the number of rows (tokens or sequences) summed
Sums = dict[str, tuple[torch.Tensor, int]]


@dataclass(frozen=True)
class SimilarityParams:
    # "value": each head's attention output before the output projection (the
    # o_proj input). Two heads with the same q/k/v compute the same thing there
    # even if they write it to different directions. "residual": after the
    # output projection, i.e. what the head adds to the residual stream.
    space: Literal["value", "residual"] = "value"
    # "token": cosine between two heads' outputs at the same position, averaged over real positions. "mean": the
    # practitioner report's definition: each head's output averaged over a sequence's real positions first, then
    # the cosine between heads per sequence, averaged over sequences. Pooled outputs share a common component, so
    # "mean" finds heads far more alike than "token" does: a threshold means something only with its pooling.
    pooling: Literal["token", "mean"] = "token"


def check_similarity(pooling: str, space: str) -> None:
    """A strategy's similarity parameters, refused by name before any step runs."""
    from heads.config import ConfigError

    if pooling not in ("token", "mean"):
        raise ConfigError(f"strategy.params.pooling: {pooling!r} is not one of ['mean', 'token']")
    if space not in ("value", "residual"):
        raise ConfigError(f"strategy.params.space: {space!r} is not one of ['residual', 'value']")


def similarity_matrices(model: nn.Module, batches: Batches, params: SimilarityParams | None = None,
                        groups: Mapping[str, int] | None = None) -> Scores:
    """Per site, [H, H] mean cosine similarity of head outputs over real query tokens of all batches.

    ``groups`` (site -> query heads per key/value head): compare whole grouped-query groups instead, [G, G], each
    the sum of its heads' outputs (what the group adds to the residual stream in ``residual`` space, and
    independent of the order of its heads): heads of one group share their values, so they look alike by
    construction, and a group is what pruning a grouped-query model removes.

    Cosine is taken per token (between two heads' output vectors at the same
    position) and averaged over tokens, so long or loud tokens do not dominate
    (``pooling="mean"``: per sequence, between the heads' outputs averaged over its
    real positions, and averaged over sequences);
    a head whose output is exactly zero is similar to nothing (0), itself included.
    Padding positions (``attention_mask``, ``decoder_attention_mask`` for decoder
    sites) are left out.
    """
    (part,) = similarity_sums(model, batches, params, {"unit": groups})["unit"]
    return mean_matrices(part)


def similarity_sums(model: nn.Module, batches: Batches, params: SimilarityParams | None,
                    units: Mapping[str, Mapping[str, int] | None], parts: int = 1) -> dict[str, list[Sums]]:
    """:func:`similarity_matrices`' summed cosines and row counts in one pass over ``batches``, for several
    units at once (name -> its ``groups``, None: single heads), each split in ``parts`` (batch i counts in
    part ``i % parts``: two halves interleaved, for a split-half reliability). Every site has an entry (zeros,
    0 rows when it saw none), so :func:`mean_matrices` gives what :func:`similarity_matrices` gives."""
    params = params or SimilarityParams()
    if params.space not in ("value", "residual"):
        raise ValueError(f"space must be 'value' or 'residual', got {params.space!r}")
    if params.pooling not in ("token", "mean"):
        raise ValueError(f"pooling must be 'token' or 'mean', got {params.pooling!r}")
    out: dict[str, list[Sums]] = {}
    current = {"part": 0}

    def sink(name: str, x: torch.Tensor) -> None:
        for unit, groups in units.items():
            size = (groups or {}).get(name, 1)
            y = x
            if size > 1:  # [n, H, d] -> [n, G, d]: a group's heads summed
                y = x.reshape(x.shape[0], x.shape[1] // size, size, x.shape[2]).sum(2)
            normed = torch.nn.functional.normalize(y.double(), dim=-1)  # zero vectors stay zero
            total, rows = out[unit][current["part"]][name]
            out[unit][current["part"]][name] = (total + torch.einsum("nhd,ngd->hg", normed, normed).cpu(),
                                                rows + y.shape[0])

    def numbered() -> Iterable[Mapping[str, Any]]:
        for i, batch in enumerate(batches):
            current["part"] = i % parts
            yield batch

    with scoring_mode(model):
        layout = head_layout(model)
        for unit, groups in units.items():
            sizes = {name: len(kept) // (groups or {}).get(name, 1) for name, kept in layout.items()}
            out[unit] = [{name: (torch.zeros(h, h, dtype=torch.float64), 0) for name, h in sizes.items()}
                         for _ in range(parts)]
        head_outputs(model, numbered(), sink, residual=params.space == "residual",
                     pooled=params.pooling == "mean")
    return out


def mean_matrices(*parts: Sums) -> Scores:
    """Per site, the mean cosine over the rows of every part given (zeros where there were none)."""
    first = parts[0]
    return {name: (sum(p[name][0] for p in parts) / max(sum(p[name][1] for p in parts), 1)).float()
            for name in first}


def summed_similarity(matrices: Scores) -> Scores:
    """Per head: sum of its similarity to the other heads of its site (the diagonal left out)."""
    return {name: m.sum(-1) - m.diagonal() for name, m in matrices.items()}


def max_similarity(matrices: Scores) -> float | None:
    """The largest cosine between two heads of one site (None when no site has two heads): how close the
    most alike pair comes to a redundancy threshold, which says why a threshold pruned nothing."""
    offs = [m[~torch.eye(m.shape[0], dtype=torch.bool)] for m in matrices.values() if m.shape[0] > 1]
    return max((float(o.max()) for o in offs), default=None)


def redundant_heads(matrices: Scores, threshold: float = 0.85) -> dict[str, torch.Tensor]:
    """Per site, bool [H]: the head has some other head with similarity above ``threshold``."""
    out = {}
    for name, m in matrices.items():
        off = m.clone()
        off.fill_diagonal_(float("-inf"))
        out[name] = (off > threshold).any(-1) if m.numel() else torch.zeros(m.shape[0], dtype=torch.bool)
    return out


def redundancy_ratio(
    model: nn.Module,
    batches: Batches | Mapping[str, Batches],
    threshold: float = 0.85,
    params: SimilarityParams | None = None,
) -> float:
    """Share of all (kept) heads that have a partner in their site with cosine > ``threshold`` (D5).

    ``batches`` may be ``{domain: batches}``: then a head counts as redundant
    only if it is redundant in every domain (D7's stratified view).
    """
    if isinstance(batches, Mapping) and any(torch.is_tensor(v) for v in batches.values()):
        raise TypeError("pass an iterable of batches (or {domain: batches}), not a single batch")
    domains = batches if isinstance(batches, Mapping) else {"all": batches}
    if not domains:
        raise ValueError("no domains to compute redundancy on")
    flags: dict[str, torch.Tensor] | None = None
    for domain_batches in domains.values():
        found = redundant_heads(similarity_matrices(model, domain_batches, params), threshold)
        flags = found if flags is None else {k: flags[k] & found[k] for k in flags}
    return share_redundant(flags)


def share_redundant(flags: Mapping[str, torch.Tensor]) -> float:
    """Share of heads flagged by :func:`redundant_heads` over all sites."""
    total = sum(f.numel() for f in flags.values())
    return sum(int(f.sum()) for f in flags.values()) / total if total else 0.0


@register_scorer("similarity")
class Similarity(Scorer):
    """Output cosine similarity: minus a head's summed similarity to its site's others (low = redundant)."""

    Params = SimilarityParams

    def _score(self, model: nn.Module, batches: Batches, params: SimilarityParams) -> Scores:
        return {name: -s for name, s in summed_similarity(similarity_matrices(model, batches, params)).items()}
