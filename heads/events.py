"""What a training run logs to ``events.jsonl``, typed: one dataclass per kind of event.

The trainer and the strategies write events through :meth:`Event.record`; the report reads them back with
:func:`read`, so producer and reader share these names and fields instead of agreeing on strings. Pure Python:
the report imports it without torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar


@dataclass(frozen=True)
class Event:
    """One thing that happened at a training step; ``KIND`` is its ``event`` field in the log."""

    KIND: ClassVar[str] = ""
    step: int

    def record(self) -> dict[str, Any]:
        """The JSON line's mapping: ``step``, ``event`` and the event's own fields."""
        return {"event": self.KIND, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class Prune(Event):
    """Heads removed physically (``removed``: site -> head indices), the heads left, and the parameter and
    optimizer-state megabytes either side (a metrics record next to the prune may not exist)."""

    KIND: ClassVar[str] = "prune"
    removed: dict[str, list[int]]
    reason: str = ""
    heads: int | None = None
    param_mb_before: float | None = None
    optimizer_mb_before: float | None = None
    param_mb_after: float | None = None
    optimizer_mb_after: float | None = None


@dataclass(frozen=True)
class Dropout(Event):
    """The model's dropout rates from this step on."""

    KIND: ClassVar[str] = "dropout"
    attention: float | None = None
    residual: float | None = None


@dataclass(frozen=True)
class Redundancy(Event):
    """A redundancy probe (the dropout regime's, at its switch): the share of heads within ``threshold`` of
    another, the most alike pair's cosine, and the attention dropout it was measured under."""

    KIND: ClassVar[str] = "redundancy"
    redundancy_ratio: float | None = None
    max_similarity: float | None = None
    attention_dropout: float | None = None
    threshold: float | None = None
    pooling: str | None = None


@dataclass(frozen=True)
class Wave(Event):
    """A curriculum wave: its threshold, the most alike pair it saw (logged when nothing goes, too) and how
    many heads it removed."""

    KIND: ClassVar[str] = "wave"
    threshold: float | None = None
    pooling: str | None = None
    max_similarity: float | None = None
    removed: int | None = None


@dataclass(frozen=True)
class L0Gates(Event):
    """The L0 gates' deterministic values at the end of training, per site."""

    KIND: ClassVar[str] = "l0_gates"
    gates: dict[str, list[float]]


E = TypeVar("E", bound=Event)
FLOAT_FIELDS = {"param_mb_before", "optimizer_mb_before", "param_mb_after", "optimizer_mb_after", "attention",
                "residual", "redundancy_ratio", "max_similarity", "attention_dropout", "threshold"}


def _field(name: str, value: Any) -> Any:
    """A logged value as its field holds it: floats finite or None (a NaN or a string reads as unknown)."""
    if name in FLOAT_FIELDS:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None
    return value


def read(records: Iterable[Mapping[str, Any]], kind: type[E]) -> list[E]:
    """The events of one kind among a run's log records, typed, in log order. A record without an integer step
    or a required field is not one (a damaged line): left out, never a crash of the report."""
    names = [f.name for f in fields(kind)]
    required = {f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING}
    out = []
    for r in records:
        step = r.get("step")
        if r.get("event") != kind.KIND or not isinstance(step, int) or isinstance(step, bool):
            continue
        if any(name not in r for name in required - {"step"}):
            continue
        out.append(kind(**{name: _field(name, r[name]) for name in names if name in r}))
    return out


def first_action(records: Iterable[Mapping[str, Any]]) -> int | None:
    """The first step after 0 at which the run's strategy did anything it logged (pruned, probed, changed
    dropout): the end of the run's warm-up window, or None for a run whose strategy never acted after its start."""
    steps = [r["step"] for r in records if isinstance(r.get("step"), int) and not isinstance(r.get("step"), bool)
             and r["step"] > 0]
    return min(steps) if steps else None
