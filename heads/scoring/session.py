"""Running a model for scoring: eval mode, gated attention, and everything put back afterwards."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from heads.placement import on_model
from heads.surgery import get_gates, head_layout, install, site_module
from heads.surgery.gates import GATE_ATTR

Batch = Mapping[str, Any]


@contextmanager
def scoring_mode(model: nn.Module, eager: bool = False) -> Iterator[None]:
    """Eval mode and gated attention (``eager``: the path that returns attention weights) for a block.

    On exit the model gets back its train/eval mode, its attention implementation
    and the gates it carried, so a scorer leaves no trace on the model.
    """
    was_training = model.training
    impl = getattr(model.config, "_attn_implementation", None)
    saved = get_gates(model)
    stacked = [name for name, g in saved.items() if g is not None and g.dim() != 1]
    if stacked:
        raise ValueError(f"scoring needs per-head [H] gates (or none); sites {stacked} carry stacked [K, H] gates")
    install(model, eager=eager)
    model.eval()
    try:
        yield
    finally:
        for name, gate in saved.items():
            setattr(site_module(model, name), GATE_ATTR, gate)
        if impl is not None and impl != model.config._attn_implementation:
            model.set_attn_implementation(impl)
        model.train(was_training)


def base_gates(model: nn.Module) -> dict[str, torch.Tensor]:
    """The gate values scoring starts from: the model's own [H] gates, else all ones.

    Keeping existing gates means a head masked earlier (iterative pruning by
    gates) stays masked while the others are scored.
    """
    device = next(model.parameters()).device
    current = get_gates(model)
    out = {}
    for name, kept in head_layout(model).items():
        gate = current.get(name)
        out[name] = torch.ones(len(kept), device=device) if gate is None else gate.detach().float().clone()
    return out


def run(model: nn.Module, batch: Batch):
    """One forward pass; generative models skip building a key/value cache nobody reads."""
    kwargs = on_model(batch, model)
    if getattr(model, "can_generate", lambda: False)():
        kwargs["use_cache"] = False
    return model(**kwargs)


def non_empty(batches: Iterable[Batch]) -> Iterator[Batch]:
    """Iterate ``batches``, failing clearly when there are none (a score over nothing is a bug)."""
    seen = False
    for batch in batches:
        seen = True
        yield batch
    if not seen:
        raise ValueError("no batches to score on")


def query_mask(batch: Batch, site_stack: str, length: int, batch_size: int, device=None) -> torch.Tensor:
    """Bool [B, T] of real (non-padding) query positions at a site.

    Decoder sites of encoder-decoder models (causal and cross) query with the
    decoder tokens, so their mask is ``decoder_attention_mask`` (else: labels
    that are not -100); everything else uses ``attention_mask``. Without a usable
    2-D mask every position counts.
    """
    shape = (batch_size, length)
    if site_stack == "decoder":
        mask = batch.get("decoder_attention_mask")
        labels = batch.get("labels")
        if mask is None and torch.is_tensor(labels) and tuple(labels.shape) == shape:
            # Seq2seq collators pad labels with -100 and give no decoder mask: decoder
            # position t predicts labels[t], so an ignored label marks a padding query.
            mask = labels != -100
    else:
        mask = batch.get("attention_mask")
        if torch.is_tensor(mask) and mask.dim() == 3:  # grouped sentences (retrieval): the model flattens them
            mask = mask.flatten(0, 1)
    if torch.is_tensor(mask) and tuple(mask.shape) == shape:
        return mask.to(device).bool()
    return torch.ones(shape, dtype=torch.bool, device=device)
