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
