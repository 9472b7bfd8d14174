"""Voita et al. 2019 head roles: confidence and positional attention, per head.

* ``confidence``: mean over real query tokens of the head's largest attention
  weight (as the ``confidence`` scorer);
* ``previous`` / ``next``: share of real query tokens whose largest attention
  weight falls on the token just before / after the query;
* ``positional``: the larger of the two, Voita et al.'s criterion: a head is
  positional when at least 90 % of the time its maximum attention goes to one
  specific relative position, in practice -1 or +1;
* ``rare``: share of real query tokens whose largest attention weight falls on
  the least frequent token of their sentence (Voita et al.'s rare-token heads;
  frequencies are token counts over the training split, ties go to the first
  such token). Only self sites have it: their keys are the sentence's own input
  tokens, all visible; causal and cross sites get ``None``.

Relative positions mean something only where queries and keys are the same
sequence (self and causal sites); cross sites get ``None`` for the positional
fields. Every real query token counts, special tokens included; a causal
site's first token can only attend to itself, so its positional share tops
out at (T - 1) / T.

With a reference model (the unpruned model a pruned one came from), roles are
those of every head of the reference, and ``kept`` says which the pruned model
still has (by site name and original head id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from heads.analysis.inputs import as_sentences, forward_inputs
from heads.scoring.capture import attention_weights
from heads.scoring.session import query_mask, scoring_mode
from heads.surgery import HeadLayout, head_layout, site_map

THRESHOLD = 0.9  # Voita et al.: positional when >= 90 % of maxima sit at one relative position


@dataclass
class HeadRole:
    site: str
    label: str
    kind: str
    layer: int
    head: int  # original head id
    confidence: float
    positional: float | None
    previous: float | None
    next: float | None
    is_positional: bool
    kept: bool
    rare: float | None = None


def _batch_size(batch: Mapping[str, Any]) -> int:
    for value in batch.values():
        if torch.is_tensor(value) and value.dim() > 0:
            return int(value.shape[0])
    raise ValueError("a batch without tensors")


def token_counts(batches: Iterable[Mapping[str, Any]], vocab_size: int) -> torch.Tensor:
    """How often each token id occurs among the real (unmasked) ``input_ids`` of ``batches``: [vocab_size]."""
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for batch in batches:
        ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        real = ids[mask.bool()] if torch.is_tensor(mask) and mask.shape == ids.shape else ids.reshape(-1)
        counts += torch.bincount(real.reshape(-1).cpu(), minlength=vocab_size)[:vocab_size].double()
    return counts


def _rarest(batch: Mapping[str, Any], counts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """Per sequence, the position of its least frequent real input token (the first, on ties): [B]."""
    ids = batch.get("input_ids")
    if not torch.is_tensor(ids) or tuple(ids.shape) != tuple(mask.shape):
        return None
    freq = counts.to(ids.device)[ids.clamp(0, counts.numel() - 1)]
    return freq.masked_fill(~mask, float("inf")).argmin(-1)


def _rarest_before(batch: Mapping[str, Any], counts: torch.Tensor, mask: torch.Tensor, stack: str = "decoder_only"
                   ) -> torch.Tensor | None:
    """Per query position, the position of the least frequent real token strictly before it (the first, on
    ties): [B, T], -1 where nothing comes before. A causal head sees only its prefix, so its rare-token role is
    the rarest token of what it can see; the query itself is left out (attending to itself is no role). A
    seq2seq decoder's causal heads read ``decoder_input_ids``."""
    ids = batch.get("decoder_input_ids" if stack == "decoder" else "input_ids")
    if not torch.is_tensor(ids) or tuple(ids.shape) != tuple(mask.shape):
        return None
    length = ids.shape[-1]
    freq = counts.to(ids.device)[ids.clamp(0, counts.numel() - 1)].masked_fill(~mask, counts.sum() + 1)
    # one key per position, ordered by frequency then position: a running minimum that keeps the first on ties
    key = freq * (length + 1) + torch.arange(length, device=ids.device, dtype=freq.dtype)
    _, first = torch.cummin(key, dim=-1)
    before = torch.full_like(first, -1)
    before[:, 1:] = first[:, :-1]
    return before


def head_roles(model: nn.Module, batches: Iterable[Mapping[str, Any]],
               counts: torch.Tensor | None = None) -> dict[str, dict[str, torch.Tensor | None]]:
    """Per site (heads in ``head_layout`` order): ``confidence``, ``previous``, ``next``, ``positional``,
    ``rare`` and ``rows``.

    Positional entries are None at cross sites; ``rare`` (with token ``counts``, :func:`token_counts`) at self
    sites (the sentence's least frequent token) and causal sites (the least frequent token before the query:
    :func:`_rarest_before`). Batches are task batches; entries the model's forward does not take (a bare encoder's
    labels) are dropped.
    """
    by_name = site_map(model)
    conf: dict[str, torch.Tensor] = {}
    prev: dict[str, torch.Tensor] = {}
    nxt: dict[str, torch.Tensor] = {}
    rare: dict[str, torch.Tensor] = {}
    rows: dict[str, int] = {}
    current: dict[str, Any] = {}

    def sink(name: str, p: torch.Tensor) -> None:
        site = by_name[name]
        conf[name] = conf.get(name, 0) + p.amax(-1).double().sum(0).cpu()
        rows[name] = rows.get(name, 0) + p.shape[0]
        if site.kind == "cross":
            return
        batch = current["batch"]
        length = p.shape[-1]  # self / causal without a cache: keys are the queries
        size = _batch_size(batch)
        mask = query_mask(batch, site.stack, length, size, p.device)
        positions = torch.arange(length, device=p.device).expand(size, length)[mask]
        if positions.shape[0] != p.shape[0]:
            raise RuntimeError(f"site {name}: {p.shape[0]} attention rows for {positions.shape[0]} query positions")
        top = p.argmax(-1)  # [N, H]
        prev[name] = prev.get(name, 0) + (top == (positions - 1)[:, None]).double().sum(0).cpu()
        nxt[name] = nxt.get(name, 0) + (top == (positions + 1)[:, None]).double().sum(0).cpu()
        rarest = None
        if counts is not None and site.kind == "self":  # every self site of a stack reads the same sentences
            key = ("rarest", site.stack)
            if key not in current:
                current[key] = _rarest(batch, counts, mask)
            rarest = current[key]
        if rarest is not None:
            sequence = torch.arange(size, device=p.device)[:, None].expand(size, length)[mask]  # rows are b-major
            rare[name] = rare.get(name, 0) + (top == rarest[sequence][:, None]).double().sum(0).cpu()
        elif counts is not None and site.kind == "causal":
            key = ("rarest_before", site.stack)
            if key not in current:
                current[key] = _rarest_before(batch, counts, mask, site.stack)
            before = current[key]
            if before is not None:
                rare[name] = rare.get(name, 0) + (top == before[mask][:, None]).double().sum(0).cpu()

    with scoring_mode(model, eager=True):
        layout = head_layout(model)
        for batch in batches:
            batch = forward_inputs(model, as_sentences(batch))  # a retrieval group: its sentences
            current.clear()  # per-batch values (the batch, each stack's rarest tokens) start afresh
            current["batch"] = batch
            attention_weights(model, [batch], sink)
    out: dict[str, dict[str, torch.Tensor | None]] = {}
    for name, kept in layout.items():
        n = max(rows.get(name, 0), 1)
        zeros = torch.zeros(len(kept), dtype=torch.float64)
        entry: dict[str, Any] = {"confidence": (conf.get(name, zeros) / n).float(), "rows": rows.get(name, 0)}
        if by_name[name].kind == "cross":
            entry.update(previous=None, next=None, positional=None)
        else:
            entry["previous"] = (prev.get(name, zeros) / n).float()
            entry["next"] = (nxt.get(name, zeros) / n).float()
            entry["positional"] = torch.maximum(entry["previous"], entry["next"])
        entry["rare"] = (rare[name] / n).float() if name in rare else None
        out[name] = entry
    return out


def _check_reference(pruned: HeadLayout, reference: HeadLayout) -> None:
    if set(pruned) != set(reference):
        raise ValueError(
            "the model and its reference have different sites: only in the model "
            f"{sorted(set(pruned) - set(reference))}, only in the reference {sorted(set(reference) - set(pruned))}"
        )
    for name, kept in pruned.items():
        extra = sorted(set(kept) - set(reference[name]))
        if extra:
            raise ValueError(f"site {name}: the model has heads {extra} its reference does not")


def role_table(
    model: nn.Module,
    batches: Iterable[Mapping[str, Any]],
    reference: nn.Module | None = None,
    threshold: float = THRESHOLD,
    counts: torch.Tensor | None = None,
) -> list[HeadRole]:
    """One :class:`HeadRole` per head: of ``model``, or of ``reference`` with ``kept`` from ``model``'s layout;
    ``counts`` (token frequencies, :func:`token_counts`) add the rare-token share at self sites."""
    kept_layout = head_layout(model)
    measured = model
    if reference is not None:
        _check_reference(kept_layout, head_layout(reference))
        measured = reference
    roles = head_roles(measured, list(batches), counts)
    layout = head_layout(measured)
    table = []
    for site in site_map(measured).values():
        entry = roles[site.name]
        for pos, head in enumerate(layout[site.name]):
            positional = None if entry["positional"] is None else float(entry["positional"][pos])
            table.append(HeadRole(
                site=site.name, label=site.label, kind=site.kind, layer=site.layer, head=head,
                confidence=float(entry["confidence"][pos]),
                positional=positional,
                previous=None if entry["previous"] is None else float(entry["previous"][pos]),
                next=None if entry["next"] is None else float(entry["next"][pos]),
                is_positional=positional is not None and positional >= threshold,
                kept=head in kept_layout[site.name],
                rare=None if entry["rare"] is None else float(entry["rare"][pos]),
            ))
    return table


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(table: list[HeadRole]) -> dict[str, dict]:
    """Per group (``kept``, ``pruned``): heads, mean confidence, mean positional, positional heads and their share."""
    out = {}
    for group, flag in (("kept", True), ("pruned", False)):
        rows = [r for r in table if r.kept == flag]
        with_pos = [r.positional for r in rows if r.positional is not None]
        positional_heads = sum(r.is_positional for r in rows)
        out[group] = {
            "heads": len(rows),
            "confidence": _mean([r.confidence for r in rows]),
            "positional": _mean(with_pos),
            "rare": _mean([r.rare for r in rows if r.rare is not None]),
            "positional_heads": positional_heads,
            "positional_share": positional_heads / len(with_pos) if with_pos else None,
        }
    return out


def roles_result(table: list[HeadRole], **meta: Any) -> dict:
    """The JSON written by ``heads roles``: ``heads``, ``summary`` and whatever identifies the run."""
    return {**meta, "heads": [asdict(r) for r in table], "summary": summarize(table)}
