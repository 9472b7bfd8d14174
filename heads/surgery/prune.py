"""Physical head pruning: slice q/k/v rows and o columns so the model really shrinks.

What to cut comes from the family (:meth:`Family.head_slices`): per weight, the
dimension holding heads and the blocks along it, so a fused q/k/v projection
(GPT-2's ``c_attn``) is cut in one go. Sliced parameters become new Parameter
objects; a given optimizer has them swapped into its param groups, with their
state (AdamW moments) sliced the same way, as are pending gradients. A site may lose every head:
its module then becomes *headless* and returns only the output bias.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from heads.surgery.families import Family, HeadSlice, family_of
from heads.surgery.gates import GATE_ATTR
from heads.surgery.model_sites import HeadLayout, Site, full_layout, head_layout, record_layout, site_map
from heads.surgery.site import round_half_up


class GroupedQueryError(ValueError):
    """Removing part of a key/value group: only whole groups can go physically."""


def _slice_param(
    owner: nn.Module, attr: str, dim: int, index: torch.Tensor, optimizer: torch.optim.Optimizer | None
) -> None:
    """Replace ``owner.attr`` by a new Parameter holding the kept slice; move its optimizer state along.

    A new Parameter rather than new ``.data``: autograd caches a leaf's shape in
    its gradient accumulator, which outlives the step while any old graph (a
    ``loss`` still referenced) does, and would then reject the smaller gradient.
    """
    old: nn.Parameter = getattr(owner, attr)
    new = nn.Parameter(old.detach().index_select(dim, index).contiguous(), requires_grad=old.requires_grad)
    if old.grad is not None:
        new.grad = old.grad.index_select(dim, index).contiguous()
    setattr(owner, attr, new)
    if optimizer is None:
        return
    for group in optimizer.param_groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    if old in optimizer.state:
        state = optimizer.state.pop(old)
        for key, value in state.items():
            # Moments have the parameter's shape; scalars such as `step` do not.
            if torch.is_tensor(value) and value.shape == old.shape:
                state[key] = value.index_select(dim, index).contiguous()
        optimizer.state[new] = state


def _rows(positions: list[int], head_dim: int, offset: int) -> list[int]:
    return [offset + p * head_dim + i for p in positions for i in range(head_dim)]


def _slice_index(cut: HeadSlice, kept: dict[str, tuple[int, list[int]]], head_dim: int, device) -> torch.Tensor:
    """Indices along ``cut.dim`` to keep: each block's kept units, shifted past the blocks before it.

    ``kept``: per block kind, (units it holds now, positions of those to keep among them).
    """
    idx, offset = [], 0
    for block in cut.blocks:
        units, positions = kept[block]
        idx += _rows(positions, head_dim, offset)
        offset += units * head_dim
    if offset != cut.module.weight.shape[cut.dim]:
        # A wrong adapter would otherwise slice silently into the wrong columns.
        raise RuntimeError(
            f"{type(cut.module).__name__} has {cut.module.weight.shape[cut.dim]} units along dim {cut.dim}, "
            f"its head blocks {cut.blocks} account for {offset}"
        )
    return torch.tensor(idx, dtype=torch.long, device=device)


def _cut(cut: HeadSlice, index: torch.Tensor, optimizer) -> None:
    _slice_param(cut.module, "weight", cut.dim, index, optimizer)
    if cut.with_bias and getattr(cut.module, "bias", None) is not None:
        _slice_param(cut.module, "bias", 0, index, optimizer)
    _sync_shape(cut.module)


def _sync_shape(module: nn.Module) -> None:
    """Keep the layer's size attributes true: forwards read them (Conv1D reshapes its output by ``nf``)."""
    if isinstance(module, nn.Linear):
        module.out_features, module.in_features = module.weight.shape
    elif hasattr(module, "nf") and hasattr(module, "nx"):  # transformers' Conv1D: weight [in, out]
        module.nx, module.nf = module.weight.shape


class _Headless:
    """Forward of a site with no heads left: what its family says an empty site returns (the output bias).

    Mixed in front of the original class so parameter names, and with them the
    state dict, stay those of the stock module. A key/value cache still gets an
    entry (one zero head, never read) so sequence lengths in it stay right
    during generation.
    """

    heads_family: Family

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        _touch_cache(self, hidden_states, kwargs)
        return self.heads_family.headless_output(self, hidden_states), None


def _touch_cache(module: nn.Module, hidden_states: torch.Tensor, kwargs: dict) -> None:
    from transformers import EncoderDecoderCache

    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    layer = getattr(module, "layer_idx", None)
    if cache is None or layer is None:
        return
    source = kwargs.get("key_value_states", kwargs.get("encoder_hidden_states"))
    is_cross = source is not None
    source = source if is_cross else hidden_states
    target = cache
    if isinstance(cache, EncoderDecoderCache):
        if is_cross:
            if cache.is_updated.get(layer):
                return
            cache.is_updated[layer] = True
            target = cache.cross_attention_cache
        else:
            target = cache.self_attention_cache
    head_dim = getattr(module, "head_dim", getattr(module, "attention_head_size", 1))
    # One zero head, not zero heads: a cache layer with no elements reports sequence length 0, and models
    # that take positions from the cache (``cache.get_seq_length()``, layer 0's) would restart them at 0.
    zero_head = source.new_zeros(source.shape[0], 1, source.shape[1], head_dim)
    target.update(zero_head, zero_head, layer)


_headless_classes: dict[type, type] = {}


def _make_headless(module: nn.Module, family: Family) -> None:
    cls = type(module)
    if issubclass(cls, _Headless):
        return
    if cls not in _headless_classes:
        _headless_classes[cls] = type(f"Headless{cls.__name__}", (_Headless, cls), {"heads_family": family})
    module.__class__ = _headless_classes[cls]


def prune_heads(
    model: nn.Module,
    remove: Mapping[str, Iterable[int]],
    optimizer: torch.optim.Optimizer | None = None,
) -> HeadLayout:
    """Physically remove heads (original head indices, per site name); return the new layout.

    ``optimizer``: its per-parameter state is sliced with the weights, so
    training can go on with the same optimizer object.
    """
    family = family_of(model)
    layout = head_layout(model)
    by_name = site_map(model)
    for name, heads in remove.items():
        if name not in by_name:
            raise KeyError(f"unknown site {name!r}; sites: {list(by_name)}")
        heads = sorted(set(int(h) for h in heads))
        if not heads:
            continue
        missing = [h for h in heads if h not in layout[name]]
        if missing:
            raise ValueError(f"site {name}: heads {missing} are not present (kept heads: {layout[name]})")
        layout[name] = _prune_site(model, family, by_name[name], layout[name], set(heads), optimizer)
    _record_layout(model, layout)
    return layout


def _prune_site(model, family, site: Site, kept: list[int], drop: set[int], optimizer) -> list[int]:
    positions = [i for i, h in enumerate(kept) if h not in drop]
    group = site.group_size
    # Query heads of one key/value group sit next to each other; a group can go
    # only when all its (still present) query heads go.
    kv_positions = []
    for g in range(len(kept) // group):
        members = kept[g * group : (g + 1) * group]
        gone = [h for h in members if h in drop]
        if gone and len(gone) != len(members):
            raise GroupedQueryError(
                f"site {site.name}: heads {gone} share a key/value group with {sorted(set(members) - drop)}; "
                f"grouped-query models can lose whole groups of {group} query heads only "
                "(mask single heads with gates instead)"
            )
        if not gone:
            kv_positions.append(g)
    kept_units = {"q": (len(kept), positions), "kv": (len(kept) // group, kv_positions)}
    for cut in family.head_slices(model, site):
        _cut(cut, _slice_index(cut, kept_units, site.head_dim, cut.module.weight.device), optimizer)
    module = model.get_submodule(site.name)
    family.resize(module, len(positions))
    family.kept(module, [kept[p] for p in positions])
    gate = getattr(module, GATE_ATTR, None)
    if gate is not None:
        kept_gate = gate.detach()[..., positions]
        setattr(module, GATE_ATTR, kept_gate if positions else None)
    if not positions:
        _make_headless(module, family)
    return [kept[p] for p in positions]


def _record_layout(model: nn.Module, layout: HeadLayout) -> None:
    full = full_layout(model)
    pruned = {k: v for k, v in layout.items() if v != full[k]}
    # The full layout is recorded too, so a config alone says which sites exist.
    record_layout(model.config, layout if pruned else None)


def apply_layout(model: nn.Module, layout: Mapping[str, Iterable[int]], optimizer=None) -> HeadLayout:
    """Prune ``model`` down to ``layout`` (kept original heads per site; unnamed sites keep theirs)."""
    current = head_layout(model)
    remove = {}
    for name, keep in layout.items():
        if name not in current:
            raise KeyError(f"unknown site {name!r}; sites: {list(current)}")
        keep = set(int(h) for h in keep)
        extra = keep - set(current[name])
        if extra:
            raise ValueError(f"site {name}: cannot keep heads {sorted(extra)} already pruned or out of range")
        remove[name] = [h for h in current[name] if h not in keep]
    return prune_heads(model, remove, optimizer)


def ratio_layout(model: nn.Module, ratio: float) -> HeadLayout:
    """The layout left after removing ``ratio`` of every site's current heads uniformly: round-half-up of
    ``ratio`` x its key/value groups go (whole groups under grouped-query attention), its first heads stay.
    The one rounding of a ratio into heads that strategies and analyses share."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio!r}")
    layout = head_layout(model)
    out = {}
    for site in site_map(model).values():
        kept, group = layout[site.name], site.group_size
        groups = len(kept) // group
        out[site.name] = kept[: (groups - round_half_up(ratio * groups)) * group]
    return out


def uniform_layout(model: nn.Module, keep: int) -> HeadLayout:
    """Keep the first ``keep`` heads at every site (for models built with fewer heads)."""
    return {s.name: list(range(min(keep, s.num_heads))) for s in site_map(model).values()}
