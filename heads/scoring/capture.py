"""Hooks that collect, per site, each head's output or attention weights on real (non-padding) queries.

Head outputs are read at the input of the output projection ([B, T, H*D],
already gated); attention weights come from the site module's own return
value on the eager gated path ([B, H, Tq, Tk]), so no ``output_attentions``
plumbing is needed and every family looks the same. Sites without heads are
skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from heads.scoring.session import non_empty, query_mask, run
from heads.surgery import head_layout, sites
from heads.surgery.families import family_of

# site name, per-query tensor [N, H, ...] (real queries only), and nothing returned
Sink = Callable[[str, torch.Tensor], None]


@contextmanager
def _hooks(handles: list) -> Iterator[None]:
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def head_outputs(
    model: nn.Module, batches: Iterable[Mapping[str, Any]], sink: Sink, residual: bool = False, pooled: bool = False
) -> None:
    """Feed ``sink(site, x)`` with x [N, H, D] per batch: head outputs at real query positions (``pooled``: one row
    per sequence, each head's output averaged over the sequence's real positions; a sequence with none is left out).

    ``residual``: each head's contribution after the output projection,
    [N, H, d_model] (head h's output times its columns of W_o), so heads are
    compared in the space they write to rather than each in its own value space.
    Call inside ``scoring_mode``.
    """
    family = family_of(model)
    layout = head_layout(model)
    current: dict[str, Any] = {}
    handles = []
    for site in sites(model):
        heads = len(layout[site.name])
        if not heads:
            continue
        o = family.projections(model, site).o

        def hook(module, args, site=site, heads=heads) -> None:
            x = args[0]
            b, t = x.shape[:2]
            x = x.reshape(b, t, heads, site.head_dim)
            if residual:
                w = module.weight.reshape(module.weight.shape[0], heads, site.head_dim)
                x = torch.einsum("bthd,ohd->btho", x, w)
            mask = query_mask(current["batch"], site.stack, t, b, x.device)
            if pooled:
                counts = mask.sum(1)
                x = (x * mask[:, :, None, None]).sum(1) / counts.clamp(min=1)[:, None, None].to(x.dtype)
                sink(site.name, x[counts > 0].detach())
            else:
                sink(site.name, x[mask].detach())

        handles.append(o.register_forward_pre_hook(hook))
    with _hooks(handles), torch.no_grad():
        for batch in non_empty(batches):
            current["batch"] = batch
            run(model, batch)


def attention_weights(model: nn.Module, batches: Iterable[Mapping[str, Any]], sink: Sink) -> None:
    """Feed ``sink(site, p)`` with p [N, H, Tk] per batch: attention rows of real query positions.

    Call inside ``scoring_mode(model, eager=True)``: only the eager gated path
    returns weights (sdpa returns None).
    """
    layout = head_layout(model)
    current: dict[str, Any] = {}
    handles = []
    for site in sites(model):
        if not layout[site.name]:
            continue

        def hook(module, args, output, site=site) -> None:
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                raise RuntimeError(f"site {site.name} returned no attention weights; run under the eager gated path")
            b, _, t = weights.shape[:3]
            mask = query_mask(current["batch"], site.stack, t, b, weights.device)
            sink(site.name, weights.transpose(1, 2)[mask].detach())

        handles.append(model.get_submodule(site.name).register_forward_hook(hook))
    with _hooks(handles), torch.no_grad():
        for batch in non_empty(batches):
            current["batch"] = batch
            run(model, batch)
