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
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from torch import nn

from heads.config import ConfigError, RunConfig, check_type
from heads.registry import NoParams
from heads.train.loop import Hook


class Strategy:
    """Base class; the first docstring line is the description ``heads list`` prints."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams

    def __init__(self, params: Any = None):
        self.params = self.Params() if params is None else params

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> Strategy:
        """Typed parameters from a plain mapping; unknown names and wrong types are named."""
        values = dict(values or {})
        fields = {f.name: f for f in dataclasses.fields(cls.Params)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"strategy {cls.name!r} has no parameters {unknown}; parameters: {sorted(fields)}")
        hints = typing.get_type_hints(cls.Params)
        typed = {k: check_type(f"strategy.params.{k}", v, hints[k]) for k, v in values.items()}
        params = cls.Params(**typed)
        _check_common(params)
        check = getattr(params, "check", None)
        if check is not None:
            check()
        return cls(params)

    @classmethod
    def description(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    def hooks(self, cfg: RunConfig) -> list[Hook]:
        return []

    def select(self, model: nn.Module, batches: Iterable[dict]) -> dict[str, list[int]]:
        """Heads to remove from a trained model now (post-hoc strategies)."""
        raise NotImplementedError(f"strategy {self.name!r} acts during training, not on a trained model")


def _check_common(params: Any) -> None:
    """Parameters many strategies share, checked once here: a scorer must be registered, a floor not negative."""
    scorer = getattr(params, "scorer", None)
    if isinstance(scorer, str):
        from heads.registry import UnknownName, plugin_hint
        from heads.scoring import get_scorer, list_scorers

        try:
            get_scorer(scorer)  # one's own is imported first (HEADS_PLUGINS)
        except UnknownName:
            raise ConfigError(f"strategy.params.scorer: {scorer!r} is not one of {sorted(list_scorers())}; "
                              f"{plugin_hint('scorer')}") from None
    floor = getattr(params, "floor", None)
    if isinstance(floor, int) and floor < 0:
        raise ConfigError(f"strategy.params.floor: must be >= 0, got {floor}")


def check_ratio(name: str, ratio: float) -> None:
    if not 0.0 <= ratio < 1.0:
        raise ConfigError(f"strategy.params.{name}: {ratio} is outside [0, 1)")
