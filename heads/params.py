"""Declared parameters of strategies and scorers, and the one check every mapping of them goes through.

A strategy's or scorer's ``Params`` is a dataclass. Its annotations are the types, checked and coerced as the
config sections' are (:func:`heads.config.check_type`, plus ``Literal`` choices and ``tuple[T, ...]``); a field
made with :func:`param` declares its range (for a list, the range of each item). :func:`check_params` turns a plain
mapping (a config's ``strategy.params``, ``heads score --param``) into the dataclass, or raises one
:class:`ParamError` naming the key as the user wrote it (``strategy.params.ratio``, ``--param chunk``). A float
must be finite unless its field says otherwise (NaN compares false with everything: a NaN threshold is a strategy
that never acts). The dataclass's own ``check()`` (rules between fields) runs last. Imports nothing of the package
but :mod:`heads.config`, so the scorers and the strategies both use it.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from heads.config import ConfigError, check_type


class ParamError(ConfigError, TypeError):
    """A parameter that is not declared, or not of its type or range; a ConfigError (the CLI's one-line refusal)
    and a TypeError (what a scorer's unknown keyword has always raised)."""


class ParamWarning(UserWarning):
    """Parameters that are allowed but leave a strategy with nothing to do (a ratio without a step to act at)."""


def warn(message: str) -> None:
    """Say once per message that a parameter leaves its strategy idle (refusals are for what cannot work)."""
    import warnings

    warnings.warn(message, ParamWarning, stacklevel=3)


def param(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
          ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
          min_len: int | None = None, finite: bool = True) -> Any:
    """A dataclass field with its range: ``ge``/``gt``/``le``/``lt`` bound the value (each item of a list or
    tuple), ``min_len`` a list's length; ``finite=False`` lets a float be infinite or NaN."""
    metadata = {"range": {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None},
                "min_len": min_len, "finite": finite}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def check_params(cls: type, values: Mapping[str, Any] | None, where: str, owner: str) -> Any:
    """``cls(**values)`` with every value typed and in range; ``where`` prefixes the key in an error
    (``"strategy.params."``, ``"--param "``), ``owner`` names what takes them (``strategy 'oneshot'``)."""
    if values is not None and not isinstance(values, Mapping):
        raise ParamError(f"{where.rstrip('. ') or 'params'}: {owner} takes a mapping of parameters, got {values!r}")
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        named = f"{where}{unknown[0]}: " if where else ""
        raise ParamError(f"{named}{owner} has no parameters {unknown}; parameters: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    typed = {}
    for name, value in values.items():
        key = f"{where}{name}"
        try:
            typed[name] = typed_value(key, value, hints[name])
        except ConfigError as exc:
            raise ParamError(str(exc)) from None
        check_range(key, typed[name], fields[name].metadata)
    params = cls(**typed)
    check = getattr(params, "check", None)
    if check is not None:
        try:
            check()
        except ParamError:
            raise
        except ConfigError as exc:
            raise ParamError(str(exc)) from None
    return params


def typed_value(key: str, value: Any, annotation: Any) -> Any:
    """:func:`heads.config.check_type`, plus ``Literal`` choices and variadic tuples, inside unions too."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return typed_value(key, value, arg)
            except ConfigError as exc:
                errors.append(str(exc))
        if type(None) in args and len(errors) == 1:
            raise ConfigError(f"{errors[0]} (or null)")
        raise ConfigError(errors[0])
    if origin is Literal:
        if value in args and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: {value!r} is not one of {sorted(map(str, args))}")
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list of {args[0].__name__}, got {value!r} ({type(value).__name__})")
        return tuple(typed_value(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
    return check_type(key, value, annotation)


def check_range(key: str, value: Any, metadata: Mapping[str, Any]) -> None:
    """The field's declared range (each item of a list or tuple), its length, and finite floats."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    min_len = metadata.get("min_len")
    if min_len is not None and isinstance(value, (list, tuple)) and len(value) < min_len:
        raise ParamError(f"{key}: {list(value)!r} must hold at least {min_len} item{'s' * (min_len != 1)}")
    bounds = metadata.get("range") or {}
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        if isinstance(item, float) and metadata.get("finite", True) and not math.isfinite(item):
            raise ParamError(f"{key}: {item!r} is not a finite number")
        if not all(_within(item, op, bound) for op, bound in bounds.items()):
            got = repr(item) if item is value else f"{item!r} in {list(value)!r}"
            raise ParamError(f"{key}: {_describe(bounds, got)}")


def _within(value: float, op: str, bound: float) -> bool:
    return {"ge": value >= bound, "gt": value > bound, "le": value <= bound, "lt": value < bound}[op]


def _describe(bounds: Mapping[str, float], got: Any) -> str:
    """``1.5 is outside [0, 1)`` for two bounds, ``must be >= 1, got 0`` for one (the config checks' words)."""
    low = next(((op, b) for op, b in bounds.items() if op in ("ge", "gt")), None)
    high = next(((op, b) for op, b in bounds.items() if op in ("le", "lt")), None)
    if low and high:
        left, right = "[" if low[0] == "ge" else "(", "]" if high[0] == "le" else ")"
        return f"{got} is outside {left}{low[1]:g}, {high[1]:g}{right}"
    op, bound = low or high
    return f"must be {dict(ge='>=', gt='>', le='<=', lt='<')[op]} {bound:g}, got {got}"
