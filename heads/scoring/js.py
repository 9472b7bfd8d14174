"""Redundancy by attention pattern (D5): Jensen-Shannon divergence between heads' attention distributions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from heads.scoring.capture import attention_weights
from heads.scoring.registry import Scorer, Scores, register_scorer
from heads.scoring.session import scoring_mode
from heads.surgery import head_layout

Batches = Iterable[Mapping[str, Any]]

MAX_JS = 1.0  # JS divergence in bits is bounded by 1: two distributions with disjoint support


SAME_PATTERN = 0.05  # below this (bits) two heads attend in "the same pattern" (D5)


def pairwise_js(p: torch.Tensor) -> torch.Tensor:
    """Summed JS divergence (bits) over rows: p [N, H, T] distributions -> [H, H]."""
    h = p.shape[1]
    p = p.double()
    plogp = torch.special.xlogy(p, p).sum(-1)  # [N, H]; 0 log 0 = 0 for masked keys
    out = torch.zeros(h, h, dtype=torch.float64)
    for i in range(h):
        # One head against all at once keeps memory at N * H * T, not N * H * H * T.
        m = (p[:, i : i + 1] + p) / 2
        kl_i = plogp[:, i : i + 1] - torch.special.xlogy(p[:, i : i + 1], m).sum(-1)
        kl_j = plogp - torch.special.xlogy(p, m).sum(-1)
        out[i] = (0.5 * (kl_i + kl_j)).clamp(min=0).sum(0).cpu()
    return out / math.log(2)


def js_matrices(model: nn.Module, batches: Batches) -> Scores:
    """Per site, [H, H] mean JS divergence (bits, in [0, 1]) between heads' attention rows.

    Averaged over real query positions of all batches (padding queries left
    out; padded keys carry zero weight already). Runs the eager gated path,
    which returns each site's weights [B, H, Tq, Tk] (grouped-query heads
    included, after key/value repetition).
    """
    (part,) = js_sums(model, batches)
    return {name: (total / max(rows, 1)).float() for name, (total, rows) in part.items()}


def js_sums(model: nn.Module, batches: Batches, parts: int = 1) -> list[dict[str, tuple[torch.Tensor, int]]]:
    """:func:`js_matrices`' summed divergences and query rows per site, in ``parts`` (batch i counts in part
    ``i % parts``: two interleaved halves for a split-half reliability); every site has an entry."""
    out: list[dict[str, tuple[torch.Tensor, int]]] = []
    current = {"part": 0}

    def sink(name: str, p: torch.Tensor) -> None:
        total, rows = out[current["part"]][name]
        out[current["part"]][name] = (total + pairwise_js(p), rows + p.shape[0])

    def numbered() -> Iterable[Mapping[str, Any]]:
        for i, batch in enumerate(batches):
            current["part"] = i % parts
            yield batch

    with scoring_mode(model, eager=True):
        layout = head_layout(model)
        out = [{name: (torch.zeros(len(kept), len(kept), dtype=torch.float64), 0) for name, kept in layout.items()}
               for _ in range(parts)]
        attention_weights(model, numbered(), sink)
    return out


def mean_js(matrices: Scores) -> Scores:
    """Per head: mean JS to the other heads of its site; a lone head gets the maximum, 1 (nothing like it)."""
    out = {}
    for name, m in matrices.items():
        h = m.shape[0]
        out[name] = (m.sum(-1) - m.diagonal()) / (h - 1) if h > 1 else torch.full((h,), MAX_JS)
    return out


def same_pattern_heads(matrices: Scores, threshold: float = SAME_PATTERN) -> dict[str, torch.Tensor]:
    """Per site, bool [H]: the head has some other head of its site at JS < ``threshold``."""
    out = {}
    for name, m in matrices.items():
        off = m.clone()
        off.fill_diagonal_(float("inf"))
        out[name] = (off < threshold).any(-1) if m.numel() else torch.zeros(m.shape[0], dtype=torch.bool)
    return out


def min_js(matrices: Scores) -> float | None:
    """The smallest JS between two heads of one site (None when no site has two heads): the most alike pair."""
    offs = [m[~torch.eye(m.shape[0], dtype=torch.bool)] for m in matrices.values() if m.shape[0] > 1]
    return min((float(o.min()) for o in offs), default=None)


def same_pattern_ratio(model: nn.Module, batches: Batches, threshold: float = SAME_PATTERN) -> float:
    """Share of heads with some partner in their site at JS < ``threshold`` (same attention pattern)."""
    flags = same_pattern_heads(js_matrices(model, batches), threshold)
    total = sum(f.numel() for f in flags.values())
    return sum(int(f.sum()) for f in flags.values()) / total if total else 0.0


@register_scorer("js")
class JensenShannon(Scorer):
    """Attention-pattern JS divergence: mean JS (bits) to the site's other heads (low = redundant)."""

    def _score(self, model: nn.Module, batches: Batches, params: Any) -> Scores:
        return mean_js(js_matrices(model, batches))
