"""``scratch``: fewer heads from initialisation, under the same training budget."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from heads.config import ConfigError
from heads.strategies.base import Strategy, check_ratio
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, ratio_layout, uniform_layout
from heads.train.loop import Hook


@dataclass
class ScratchParams:
    keep: int = 0  # heads per site (first k); 0 = all
    ratio: float = 0.0  # or: share of each site's heads removed (keep round(H * (1 - ratio)))
    layout: dict | None = None  # exact layout (site -> kept heads), e.g. the one a pruned model ended with
    layout_from: str | None = None  # or: a JSON file holding "head_layout" (summary.json, a model's config.json)

    def check(self) -> None:
        if self.keep < 0:
            raise ConfigError(f"strategy.params.keep: must be >= 0, got {self.keep}")
        check_ratio("ratio", self.ratio)
        given = [bool(self.keep), bool(self.ratio), self.layout is not None, self.layout_from is not None]
        if sum(given) > 1:
            raise ConfigError("strategy.params: give one of keep, ratio, layout, layout_from")
        if self.layout_from is not None:
            path = Path(self.layout_from)
            if not path.is_file():
                raise ConfigError(f"strategy.params.layout_from: {path} does not exist")
            layout = json.loads(path.read_text()).get("head_layout")
            if not isinstance(layout, dict):
                raise ConfigError(f"strategy.params.layout_from: {path} holds no head_layout")

    def target(self, model) -> dict | None:
        if self.layout_from is not None:
            return json.loads(Path(self.layout_from).read_text())["head_layout"]
        if self.layout is not None:
            return self.layout
        if self.keep:
            return uniform_layout(model, self.keep)
        if self.ratio:
            return ratio_layout(model, self.ratio)
        return None


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
