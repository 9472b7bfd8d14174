"""Residual and attention dropout as two knobs that can change in the middle of a run.

Families keep dropout in different places (nn.Dropout modules, float
attributes read in forward); Llama has no residual dropout at all, so it gets
one as forward hooks on the attention and MLP outputs, the standard place.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from heads.surgery import site_module, sites

_RESIDUAL_P = "heads_residual_dropout"


def _set_module_dropout(module: nn.Module, p: float) -> bool:
    changed = False
    for attr in ("attention_dropout", "dropout"):
        value = getattr(module, attr, None)
        if isinstance(value, nn.Dropout):
            value.p = p
            changed = True
        elif isinstance(value, float) and not isinstance(value, bool):
            setattr(module, attr, p)
            changed = True
    return changed


def _residual_hook(module: nn.Module, args, output):
    p = getattr(module, _RESIDUAL_P, 0.0)
    if not p or not module.training:
        return output
    if isinstance(output, tuple):
        return (F.dropout(output[0], p, True), *output[1:])
    return F.dropout(output, p, True)


def set_dropout(model: nn.Module, attention: float | None = None, residual: float | None = None) -> None:
    """Set attention-probability dropout and/or residual (sublayer output) dropout."""
    site_mods = [site_module(model, s) for s in sites(model)]
    if attention is not None:
        for module in site_mods:
            _set_module_dropout(module, attention)
        if hasattr(model.config, "attention_dropout"):
            model.config.attention_dropout = attention
    if residual is None:
        return
    inside_sites = {id(m) for s in site_mods for m in s.modules()}
    if model.config.model_type in ("llama", "mistral", "qwen2"):
        for layer in model.model.layers:
            for sub in (layer.self_attn, layer.mlp):
                if not hasattr(sub, _RESIDUAL_P):
                    sub.register_forward_hook(_residual_hook)
                setattr(sub, _RESIDUAL_P, residual)
        return
    for module in model.modules():
        if id(module) in inside_sites:
            continue
        if isinstance(module, nn.Dropout):
            module.p = residual
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = residual


def get_dropout(model: nn.Module) -> dict[str, float]:
    """The current knobs (for logging and checkpoints)."""
    attention = 0.0
    for s in sites(model):
        module = site_module(model, s)
        value = getattr(module, "attention_dropout", getattr(module, "dropout", 0.0))
        attention = value.p if isinstance(value, nn.Dropout) else float(value)
        break
    residual = 0.0
    if model.config.model_type in ("llama", "mistral", "qwen2"):
        residual = float(getattr(model.model.layers[0].self_attn, _RESIDUAL_P, 0.0))
    else:
        inside = {id(m) for s in sites(model) for m in site_module(model, s).modules()}
        for module in model.modules():
            if id(module) not in inside and isinstance(module, nn.Dropout):
                residual = module.p
                break
            if id(module) not in inside and isinstance(getattr(module, "dropout", None), float):
                residual = module.dropout
                break
    return {"attention": attention, "residual": residual}
