"""Physical head pruning: slice q/k/v rows and o columns so the model really shrinks.

Sliced parameters become new Parameter objects; a given optimizer has them
swapped into its param groups, with their state (AdamW moments) sliced the
same way, as are pending gradients. A site may lose every head:
its module then becomes *headless* and returns only the output bias.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from heads.surgery.families import family_of
from heads.surgery.gates import GATE_ATTR
from heads.surgery.site import round_half_up
from heads.surgery.sites import HeadLayout, Site, full_layout, head_layout, record_layout, site_map


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


def _rows(positions: list[int], head_dim: int, device) -> torch.Tensor:
    idx = [p * head_dim + i for p in positions for i in range(head_dim)]
    return torch.tensor(idx, dtype=torch.long, device=device)


def _slice_linear(linear: nn.Linear, dim: int, index: torch.Tensor, optimizer) -> None:
    _slice_param(linear, "weight", dim, index, optimizer)
    if dim == 0 and linear.bias is not None:
        _slice_param(linear, "bias", 0, index, optimizer)
    linear.out_features, linear.in_features = linear.weight.shape


class _Headless:
    """Forward of a site with no heads left: zero attention output.

    Mixed in front of the original class so parameter names, and with them the
    state dict, stay those of the stock module. A key/value cache still gets a
    zero-head entry so sequence lengths in it stay right during generation.
    """

    heads_out_name: str | None = None

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        _touch_cache(self, hidden_states, kwargs)
        empty = hidden_states.new_zeros(*hidden_states.shape[:-1], 0)
        out = getattr(self, self.heads_out_name)(empty) if self.heads_out_name else empty
        return out, None


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
    empty = source.new_zeros(source.shape[0], 0, source.shape[1], head_dim)
    target.update(empty, empty, layer)


_headless_classes: dict[type, type] = {}


def _make_headless(module: nn.Module, out_name: str | None) -> None:
    cls = type(module)
    if issubclass(cls, _Headless):
        return
    if cls not in _headless_classes:
        _headless_classes[cls] = type(f"Headless{cls.__name__}", (_Headless, cls), {"heads_out_name": out_name})
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
    proj = family.projections(model, site)
    device = proj.q.weight.device
    q_rows = _rows(positions, site.head_dim, device)
    kv_rows = _rows(kv_positions, site.head_dim, device)
    _slice_linear(proj.q, 0, q_rows, optimizer)
    _slice_linear(proj.k, 0, kv_rows, optimizer)
    _slice_linear(proj.v, 0, kv_rows, optimizer)
    _slice_linear(proj.o, 1, q_rows, optimizer)
    module = model.get_submodule(site.name)
    family.resize(module, len(positions))
    gate = getattr(module, GATE_ATTR, None)
    if gate is not None:
        kept_gate = gate.detach()[..., positions]
        setattr(module, GATE_ATTR, kept_gate if positions else None)
    if not positions:
        _make_headless(module, family.out_name)
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
