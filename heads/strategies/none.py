"""``none``: the baseline, every head kept."""

from heads.strategies.base import Strategy
from heads.strategies.registry import register_strategy


@register_strategy("none")
class NoPruning(Strategy):
    """The baseline: train and keep every head."""
