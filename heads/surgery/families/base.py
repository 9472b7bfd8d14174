"""What head surgery needs to know about one model family."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from heads.site_patterns import SitePattern
from heads.surgery.families.views import LinearView
from heads.surgery.site import Site, SiteKind

# What a block of head units along a weight dimension holds: query heads, or key/value heads (fewer under GQA).
Block = Literal["q", "kv"]


@dataclass(frozen=True)
class Projections:
    """The four maps of a site in ``nn.Linear`` layout (weight ``[out, in]``): q/k/v rows and o columns are
    per head. Families with other layouts (GPT-2's fused Conv1D) hand out :class:`LinearView` windows, which
    read and write the real parameters in place; scorers and strategies use these, pruning uses
    :meth:`Family.head_slices`."""

    q: nn.Linear | LinearView
    k: nn.Linear | LinearView
    v: nn.Linear | LinearView
    o: nn.Linear | LinearView


@dataclass(frozen=True)
class HeadSlice:
    """One layer whose weight lists heads along ``dim`` as consecutive blocks of ``units x head_dim``.

    ``blocks`` names the blocks in order, so a fused projection is one slice: GPT-2's ``c_attn`` is
    ``("q", "kv", "kv")``. ``with_bias``: the bias runs along the same axis (output side) and is cut alike.
    """

    module: nn.Module
    dim: int
    blocks: tuple[Block, ...]
    with_bias: bool


class Family:
    """Base adapter: find sites by module path, reach their projections.

    Subclasses set ``model_types``, ``patterns`` and the projection names, and
    answer head counts from the config. Separate ``nn.Linear`` q/k/v/o need
    nothing more; other layouts override :meth:`projections` and
    :meth:`head_slices` (see ``gpt2.py`` and docs/ADDING_A_FAMILY.md).
    """

    name: ClassVar[str]
    model_types: ClassVar[tuple[str, ...]]
    patterns: ClassVar[tuple[SitePattern, ...]]
    qkv_names: ClassVar[tuple[str, str, str]] = ("q_proj", "k_proj", "v_proj")
    # Output projection, relative to the site module; None: it lives outside the
    # site (BERT's ``attention.output.dense``) and ``outer_out_path`` names it.
    out_name: ClassVar[str | None] = "o_proj"
    outer_out_path: ClassVar[str] = ""

    def head_counts(self, config, site_kind: SiteKind, stack: str) -> tuple[int, int, int]:
        """(query heads, key/value heads, head dim) of a site in the unpruned model; by default plain multi-head
        attention read from ``num_attention_heads`` and ``hidden_size`` (BERT, GPT-2)."""
        heads = config.num_attention_heads
        return heads, heads, config.hidden_size // heads

    def resize(self, module: nn.Module, num_heads: int) -> None:
        """Keep the module's own head-count attributes true after pruning."""

    def kept(self, module: nn.Module, heads: list[int]) -> None:
        """After pruning: the original indices of the heads the module still holds (MPNet slices a bias shared
        by all layers with them); nothing by default."""

    def copy_head(self, module: nn.Module, src: int, dst: int) -> None:
        """A duplicate planted in a copy of the model (:func:`heads.analysis.control.plant_duplicate`): head
        ``dst`` of the site (a position among its heads) takes what head ``src`` holds beside its projections'
        rows and columns; nothing by default."""

    def site_kind(self, config, pattern: SitePattern) -> SiteKind:
        return pattern.kind

    def sites(self, model: nn.Module) -> list[Site]:
        found: list[Site] = []
        compiled = [(re.compile(p.regex), p) for p in self.patterns]
        for name, _ in model.named_modules():
            for rx, pat in compiled:
                m = rx.search(name)
                if m:
                    kind = self.site_kind(model.config, pat)
                    q, kv, hd = self.head_counts(model.config, kind, pat.stack)
                    found.append(Site(name, int(m.group(1)), kind, pat.stack, q, kv, hd))
        if not found:
            raise ValueError(f"no attention sites found in {type(model).__name__} for family {self.name!r}")
        return found

    def projections(self, model: nn.Module, site: Site) -> Projections:
        module = model.get_submodule(site.name)
        q, k, v = (getattr(module, n) for n in self.qkv_names)
        if self.out_name is not None:
            o = getattr(module, self.out_name)
        else:
            parent = site.name.rsplit(".", 1)[0]
            o = model.get_submodule(f"{parent}.{self.outer_out_path}")
        return Projections(q, k, v, o)

    def head_slices(self, model: nn.Module, site: Site) -> list[HeadSlice]:
        """Every weight that holds this site's heads, and along which dimension: what pruning cuts."""
        p = self.projections(model, site)
        return [
            HeadSlice(p.q, 0, ("q",), True),
            HeadSlice(p.k, 0, ("kv",), True),
            HeadSlice(p.v, 0, ("kv",), True),
            HeadSlice(p.o, 1, ("q",), False),  # o's bias is d_model wide whatever the heads
        ]

    def headless_output(self, module: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
        """What a site with no heads left returns: its output projection of nothing (the bias), or zero
        width when the projection lives outside the site (it then sees an empty input itself)."""
        empty = hidden_states.new_zeros(*hidden_states.shape[:-1], 0)
        return getattr(module, self.out_name)(empty) if self.out_name else empty
