"""What a pruning strategy is: when and which heads go. One file per strategy.

A strategy declares its parameters as a dataclass whose defaults do nothing
(so adding a parameter never changes old results) and acts at one or more of
three points:

- ``hooks(cfg)``: during training, as engine hooks (physical pruning mid-run);
- ``select(model, batches)``: after training, which heads to remove now;
- nothing at all (``none``, the baseline).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from torch import nn

from heads.config import ConfigError, RunConfig
from heads.params import ParamError, check_params, warn
from heads.registry import NoParams
from heads.train.loop import Hook


class Strategy:
    """Base class; the first docstring line is the description ``heads list`` prints."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    # When a strategy that acts during training acts at all (its defaults do nothing): parameters set while this
    # does not hold leave it idle, and the run is warned (check_config); empty: not said, no warning.
    acts_when: ClassVar[str] = ""
    prunes_at: ClassVar[str] = ""  # the parameter naming the training step it prunes at, if one does

    def __init__(self, params: Any = None):
        self.params = self.Params() if params is None else params

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> Strategy:
        """Typed parameters from a plain mapping (:func:`heads.params.check_params`): unknown names, wrong types,
        values outside their declared ranges and a scorer's own parameters are named (``strategy.params.KEY``)."""
        params = check_params(cls.Params, values, "strategy.params.", f"strategy {cls.name!r}")
        _check_common(params)
        return cls(params)

    def check_config(self, config: RunConfig) -> None:
        """The parameters against the run they belong to (its model and steps), before any work: a value that
        cannot work there is refused, one that leaves the strategy idle is warned about. Extend, calling super."""
        m = config.model
        if m.source == "config":  # a pretrained source's sizes are known only once it is loaded
            for name in ("floor", "keep"):
                value = getattr(self.params, name, None)
                if isinstance(value, int) and not isinstance(value, bool) and value > m.heads:
                    raise ConfigError(
                        f"strategy.params.{name}: {value} exceeds the {m.heads} heads of each site (model.heads)")
            scorer, scorer_params = getattr(self.params, "scorer", None), getattr(self.params, "scorer_params", None)
            if isinstance(scorer, str) and scorer_params:
                from heads.scoring.registry import check_scorer_params

                check_scorer_params(scorer, scorer_params, "strategy.params.scorer_params.", layers=m.layers)
        step = getattr(self.params, self.prunes_at, None) if self.prunes_at else None
        # refused, not warned: a run that never reaches its pruning step would train the full model to the end and
        # be reported as pruned (at == steps prunes after the last step: evaluated pruned, untrained after)
        if isinstance(step, int) and step > config.train.steps:
            raise ConfigError(f"strategy.params.{self.prunes_at}: {step} is beyond the run's {config.train.steps} "
                              "steps (train.steps): the heads would never be pruned")
        if self.acts_when and not self.hooks(config):
            default = self.Params()
            changed = [f"{f.name}={getattr(self.params, f.name)!r}" for f in dataclasses.fields(self.Params)
                       if getattr(self.params, f.name) != getattr(default, f.name)]
            if changed:  # warned, not refused: a strategy's defaults do nothing by design (a baseline arm)
                warn(f"strategy.params: with {', '.join(changed)}, strategy {self.name!r} does nothing: it acts "
                     f"only when {self.acts_when}")

    @classmethod
    def description(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    def hooks(self, cfg: RunConfig) -> list[Hook]:
        return []

    def select(self, model: nn.Module, batches: Iterable[dict]) -> dict[str, list[int]]:
        """Heads to remove from a trained model now (post-hoc strategies)."""
        raise NotImplementedError(f"strategy {self.name!r} acts during training, not on a trained model")


def _check_common(params: Any) -> None:
    """Parameters many strategies share, checked once here: a scorer must be registered and take its
    ``scorer_params``, a floor must not be negative."""
    scorer = getattr(params, "scorer", None)
    if isinstance(scorer, str):
        from heads.registry import UnknownName, plugin_hint
        from heads.scoring import get_scorer, list_scorers
        from heads.scoring.registry import check_scorer_params

        try:
            get_scorer(scorer)  # one's own is imported first (HEADS_PLUGINS)
        except UnknownName:
            raise ConfigError(f"strategy.params.scorer: {scorer!r} is not one of {sorted(list_scorers())}; "
                              f"{plugin_hint('scorer')}") from None
        scorer_params = getattr(params, "scorer_params", None)
        if scorer_params is not None:
            check_scorer_params(scorer, scorer_params, "strategy.params.scorer_params.")
    floor = getattr(params, "floor", None)
    if isinstance(floor, int) and floor < 0:
        raise ParamError(f"strategy.params.floor: must be >= 0, got {floor}")

