"""A model's sites: its attention modules, with their kind, layer and head layout.

A *site* is one module that calls the attention interface (and so carries one
gate). Its *head layout* is the list of original head indices it still holds;
a model's head layout maps site name -> kept heads. Site names are module paths
(``model.layers.0.self_attn``), so they are stable across save/load.
"""

from __future__ import annotations

from torch import nn

from heads.surgery.families import family_of
from heads.surgery.site import HeadLayout, Site, SiteKind

__all__ = ["LAYOUT_KEY", "HeadLayout", "Site", "SiteKind", "full_layout", "head_layout", "num_heads",
           "record_layout", "site_map", "site_module", "sites"]

# The config attribute that carries a pruned model's layout through save/load.
LAYOUT_KEY = "head_layout"


def record_layout(config, layout: HeadLayout | None) -> None:
    """Carry ``layout`` in ``config`` (saved with it); ``None`` removes the key, so an unpruned model's
    config.json is byte-for-byte what it was before any load or prune (no ``"head_layout": null``)."""
    if layout:
        setattr(config, LAYOUT_KEY, layout)
    elif LAYOUT_KEY in vars(config):
        delattr(config, LAYOUT_KEY)


def sites(model: nn.Module) -> list[Site]:
    """All attention sites of ``model`` in forward order."""
    return family_of(model).sites(model)


def site_map(model: nn.Module) -> dict[str, Site]:
    return {s.name: s for s in sites(model)}


def full_layout(model: nn.Module) -> HeadLayout:
    """The layout of the unpruned model: every site keeps every head."""
    return {s.name: list(range(s.num_heads)) for s in sites(model)}


def head_layout(model: nn.Module) -> HeadLayout:
    """The model's current layout (full unless it was pruned)."""
    saved = getattr(model.config, LAYOUT_KEY, None)
    layout = full_layout(model)
    if saved:
        unknown = sorted(set(saved) - set(layout))
        if unknown:
            raise ValueError(f"head_layout names sites this model does not have: {unknown}")
        layout.update({k: list(v) for k, v in saved.items()})
    return layout


def num_heads(layout: HeadLayout) -> int:
    return sum(len(v) for v in layout.values())


def site_module(model: nn.Module, site: Site | str) -> nn.Module:
    return model.get_submodule(site.name if isinstance(site, Site) else site)
