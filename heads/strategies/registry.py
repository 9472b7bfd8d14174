"""The strategy registry: ``@register_strategy("name")``; strategies from other packages register alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heads.registry import Registry
from heads.strategies.base import Strategy

STRATEGIES: Registry[type[Strategy]] = Registry("strategy", "strategies")
register_strategy = STRATEGIES.register


def get_strategy(name: str) -> type[Strategy]:
    if name not in STRATEGIES:
        load_plugins()
    if name not in STRATEGIES:
        import os

        from heads.registry import UnknownName

        where = os.environ.get("HEADS_PLUGINS")
        hint = (f"HEADS_PLUGINS={where!r} was imported and does not register it" if where else
                "a strategy of your own registers when its module is imported: name that module in HEADS_PLUGINS "
                "(HEADS_PLUGINS=my_strategies), or install it under the heads.strategies entry points "
                "(docs/ADDING_A_STRATEGY.md)")
        raise UnknownName(f"unknown strategy {name!r}; known strategies: {sorted(STRATEGIES)}; {hint}")
    return STRATEGIES.lookup(name)


def build_strategy(name: str, params: Mapping[str, Any] | None = None) -> Strategy:
    return get_strategy(name).from_dict(params)


def load_plugins() -> None:
    """Strategies from other packages: modules named in the ``heads.strategies`` entry-point group,
    or in the ``HEADS_PLUGINS`` environment variable (comma-separated module names)."""
    import importlib
    import os
    from importlib.metadata import entry_points

    for ep in entry_points(group="heads.strategies"):
        ep.load()
    for module in filter(None, os.environ.get("HEADS_PLUGINS", "").split(",")):
        importlib.import_module(module.strip())
