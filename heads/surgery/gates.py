"""Per-head gates through a registered attention function.

Each site module may carry a gate tensor (attribute ``heads_gate``): shape
``[H]`` multiplies head h's output by ``gate[h]``; shape ``[K, H]`` evaluates K
ablations at once on an input batch repeated K times (``repeat_batch``). Gates
are plain tensors, not parameters: they never enter the state dict, and giving
one ``requires_grad`` makes its ``.grad`` Michel et al.'s head importance.
With no gate set the function is exactly the stock attention.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import eager_mask, sdpa_mask

from heads.surgery.model_sites import head_layout, site_module, sites

GATE_ATTR = "heads_gate"
GATED = "heads_gated"  # sdpa underneath: the fast path
GATED_EAGER = "heads_gated_eager"  # explicit softmax: also returns attention weights


def apply_gate(out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """Scale head outputs ``out`` [N, T, H, D] by ``gate`` [H] or [K, H] (N = K * B)."""
    heads = out.shape[2]
    if gate.shape[-1] != heads:
        raise ValueError(f"gate has {gate.shape[-1]} entries but the site has {heads} heads")
    gate = gate.to(out.dtype)
    if gate.dim() == 1:
        return out * gate.view(1, 1, heads, 1)
    k = gate.shape[0]
    if out.shape[0] % k:
        raise ValueError(f"batch of {out.shape[0]} is not a multiple of the {k} stacked gates")
    stacked = out.view(k, out.shape[0] // k, *out.shape[1:]) * gate.view(k, 1, 1, heads, 1)
    return stacked.view(out.shape)


def _gated(module: nn.Module, out: torch.Tensor, weights):
    gate = getattr(module, GATE_ATTR, None)
    return (out if gate is None else apply_gate(out, gate)), weights


def gated_sdpa(module, query, key, value, attention_mask, **kwargs):
    out, weights = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    return _gated(module, out, weights)


def gated_eager(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Softmax attention written out, so per-head weights can be returned."""
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    q_len, kv_len = scores.shape[-2:]
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    elif getattr(module, "is_causal", False) and q_len > 1:
        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=query.device).tril(kv_len - q_len)
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return _gated(module, out, weights)


_registered = False


def register() -> None:
    """Register both gated functions and their masks (idempotent).

    The mask registration matters: for an unknown implementation name the
    models pass ``attention_mask=None`` and padding would be silently ignored.
    """
    global _registered
    if _registered:
        return
    AttentionInterface.register(GATED, gated_sdpa)
    AttentionInterface.register(GATED_EAGER, gated_eager)
    AttentionMaskInterface.register(GATED, sdpa_mask)
    AttentionMaskInterface.register(GATED_EAGER, eager_mask)
    _registered = True


def install(model: nn.Module, eager: bool = False) -> nn.Module:
    """Route every attention module of ``model`` through the gated function."""
    register()
    model.set_attn_implementation(GATED_EAGER if eager else GATED)
    return model


def _check_installed(model: nn.Module) -> None:
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in (GATED, GATED_EAGER):
        raise RuntimeError(
            f"gates need the gated attention function; this model uses {impl!r}. "
            "Call heads.surgery.install(model) first."
        )


def set_gates(model: nn.Module, gates: Mapping[str, torch.Tensor | None]) -> None:
    """Attach gates by site name; a ``None`` entry removes that site's gate."""
    _check_installed(model)
    layout = head_layout(model)
    for name, gate in gates.items():
        if name not in layout:
            raise KeyError(f"unknown site {name!r}; sites: {list(layout)}")
        if gate is not None and gate.shape[-1] != len(layout[name]):
            raise ValueError(
                f"gate for {name} has {gate.shape[-1]} entries; the site holds {len(layout[name])} heads"
            )
        setattr(site_module(model, name), GATE_ATTR, gate)


def get_gates(model: nn.Module) -> dict[str, torch.Tensor | None]:
    return {s.name: getattr(site_module(model, s), GATE_ATTR, None) for s in sites(model)}


def clear_gates(model: nn.Module) -> None:
    for s in sites(model):
        setattr(site_module(model, s), GATE_ATTR, None)


def ones_gates(model: nn.Module, requires_grad: bool = False, stack: int | None = None) -> dict[str, torch.Tensor]:
    """All-open gates for the current layout; ``stack=K`` gives ``[K, H]`` gates."""
    device = next(model.parameters()).device
    out = {}
    for name, kept in head_layout(model).items():
        shape = (len(kept),) if stack is None else (stack, len(kept))
        out[name] = torch.ones(shape, device=device, requires_grad=requires_grad)
    return out


@contextmanager
def gates(model: nn.Module, values: Mapping[str, torch.Tensor | None]) -> Iterator[None]:
    """Set gates for the duration of a block, then restore the previous ones."""
    before = get_gates(model)
    set_gates(model, values)
    try:
        yield
    finally:
        for name, gate in before.items():
            setattr(site_module(model, name), GATE_ATTR, gate)


def repeat_batch(batch: Mapping[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Repeat every tensor of a model input ``k`` times along the batch (k-major), for stacked gates."""
    return {key: v.repeat(k, *([1] * (v.dim() - 1))) if torch.is_tensor(v) else v for key, v in batch.items()}
