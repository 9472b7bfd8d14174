"""``scratch``: fewer heads from initialisation, under the same training budget."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from heads.config import ConfigError
from heads.params import param
from heads.strategies.base import Strategy
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, ratio_layout, uniform_layout
from heads.train.loop import Hook


@dataclass
class ScratchParams:
    keep: int = param(0, ge=0)  # heads per site (first k); 0 = all
    ratio: float = param(0.0, ge=0, lt=1)  # or: share of each site's heads removed (keep round(H * (1 - ratio)))
    layout: dict | None = None  # exact layout (site -> kept heads), e.g. the one a pruned model ended with
    layout_from: str | None = None  # or: a JSON file holding "head_layout" (summary.json, a model's config.json)

    def check(self) -> None:
        given = [bool(self.keep), bool(self.ratio), self.layout is not None, self.layout_from is not None]
        if sum(given) > 1:
            raise ConfigError("strategy.params: give one of keep, ratio, layout, layout_from")
        if self.layout is not None:
            check_layout("strategy.params.layout", self.layout)
        if self.layout_from is not None:
            read_layout(self.layout_from)

    def target(self, model) -> dict | None:
        if self.layout_from is not None:
            return read_layout(self.layout_from)
        if self.layout is not None:
            return self.layout
        if self.keep:
            return uniform_layout(model, self.keep)
        if self.ratio:
            return ratio_layout(model, self.ratio)
        return None


def check_layout(key: str, layout) -> None:
    """A head layout: site name -> the distinct original head ids it keeps (whole numbers >= 0)."""
    def heads(kept) -> bool:
        return (isinstance(kept, list) and all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in kept)
                and len(set(kept)) == len(kept))

    bad = [site for site, kept in layout.items() if not isinstance(site, str) or not heads(kept)]
    if bad:
        raise ConfigError(f"{key}: {bad[0]!r}: {layout[bad[0]]!r} is not a list of distinct head ids >= 0 "
                          "(a layout maps each site to the heads it keeps)")


def read_layout(path: str) -> dict:
    """The ``head_layout`` of a JSON file (a run's summary.json, a pruned model's config.json), checked."""
    key = "strategy.params.layout_from"
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{key}: {file} does not exist")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:  # UnicodeDecodeError is a ValueError
        raise ConfigError(f"{key}: {file} is not readable JSON ({exc})") from None
    layout = data.get("head_layout") if isinstance(data, dict) else None
    if not isinstance(layout, dict):
        what = "no head_layout" if isinstance(data, dict) else f"a JSON {type(data).__name__}, not a head_layout"
        raise ConfigError(f"{key}: {file} holds {what}; name a run's summary.json or a pruned model's config.json")
    check_layout(f"{key}: {file}: head_layout", layout)
    return layout


class _BornSmall(Hook):
    def __init__(self, params: ScratchParams):
        self.params = params

    def on_start(self, trainer) -> None:
        current = head_layout(trainer.model)
        target = self.params.target(trainer.model)
        if not target:
            return
        unknown = sorted(set(target) - set(current))
        if unknown:
            raise ConfigError(f"strategy.params.layout names sites this model does not have: {unknown}")
        # Before the first step: the same as building the model at this layout (the optimizer holds no state yet).
        trainer.prune({s: [h for h in current[s] if h not in set(target[s])] for s in target}, reason="scratch")


@register_strategy("scratch")
class Scratch(Strategy):
    """Fewer heads from initialisation: a uniform k per site or a given layout, same budget as the baseline."""

    Params = ScratchParams

    def hooks(self, cfg):
        p = self.params
        return [_BornSmall(p)] if (p.keep or p.ratio or p.layout is not None or p.layout_from) else []
