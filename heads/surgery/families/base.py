"""What head surgery needs to know about one model family."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from heads.site_patterns import SitePattern
from heads.surgery.site import Site, SiteKind


@dataclass(frozen=True)
class Projections:
    """The four linear maps of a site: q/k/v rows and o columns are per head."""

    q: nn.Linear
    k: nn.Linear
    v: nn.Linear
    o: nn.Linear



class Family:
    """Base adapter: find sites by module path, reach their projections.

    Subclasses set ``model_types``, ``patterns`` and the projection names, and
    answer head counts from the config.
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
        """(query heads, key/value heads, head dim) of a site in the unpruned model."""
        raise NotImplementedError

    def resize(self, module: nn.Module, num_heads: int) -> None:
        """Keep the module's own head-count attributes true after pruning."""

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
