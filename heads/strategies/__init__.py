"""Pruning strategies: when and which heads go. One file each; ``heads list`` shows them."""

from heads.strategies import (  # noqa: F401  (registration)
    curriculum,
    dropout_regime,
    early,
    iterative,
    l0,
    none,
    oneshot,
    posthoc,
    scratch,
)
from heads.strategies.base import Strategy
from heads.strategies.registry import STRATEGIES, build_strategy, get_strategy, register_strategy

__all__ = ["STRATEGIES", "Strategy", "build_strategy", "get_strategy", "register_strategy"]
