"""The strategy registry: ``@register_strategy("name")``; strategies from other packages register alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heads import registry
from heads.config import ConfigError, RunConfig
from heads.registry import Registry, UnknownName, plugin_hint
from heads.strategies.base import Strategy

STRATEGY_PLUGINS = registry.PLUGIN_GROUPS["strategy"][0]  # the entry-point group of strategies from other packages
STRATEGIES: Registry[type[Strategy]] = Registry("strategy", "strategies")
register_strategy = STRATEGIES.register


def get_strategy(name: str) -> type[Strategy]:
    if name not in STRATEGIES:
        registry.import_declared("strategy", name)  # one of the package's own, in a module not imported yet
    if name not in STRATEGIES:
        load_plugins()
    if name not in STRATEGIES:
        raise UnknownName(f"unknown strategy {name!r}; known strategies: {sorted(STRATEGIES)}; "
                          f"{plugin_hint('strategy')}")
    return STRATEGIES.lookup(name)


def kind_of(name: str) -> str:
    """How a strategy named by a workflow config's ``custom:`` entry prunes: ``during`` (a registered strategy
    that prunes while training: the entry is a training run) or ``posthoc`` (a registered scorer: heads chosen on
    a trained model, as ``heads curve --param scorer=NAME`` does). A strategy that only acts on a trained model
    (``posthoc``, ``iterative``) is refused, its scorer named instead; an unknown name says how one's own is found."""
    from heads.scoring.registry import list_scorers

    if name not in STRATEGIES and name not in list_scorers():
        load_plugins()
    scorers = list_scorers()
    if name in STRATEGIES:
        cls = STRATEGIES[name]
        if cls.select is not Strategy.select and cls.hooks is Strategy.hooks:
            raise ConfigError(f"strategy {name!r} prunes a trained model, not while training: name a scorer "
                              f"instead ({sorted(scorers)} or your own) to add its pruning curves (michel2019)")
        return "during"
    if name in scorers:
        return "posthoc"
    raise UnknownName(f"unknown strategy {name!r}: neither a strategy (known: {sorted(STRATEGIES)}) nor a scorer "
                      f"(known: {sorted(scorers)}); {plugin_hint('strategy or scorer')}")


def build_strategy(name: str, params: Mapping[str, Any] | None = None) -> Strategy:
    return get_strategy(name).from_dict(params)


def check_params(name: str, params: Mapping[str, Any] | None, config: RunConfig | None = None) -> Strategy:
    """Strategy ``name`` built from ``params``, each declared, typed and in its range (a scorer's own
    ``scorer_params`` too), and, given the run's ``config``, checked against it (heads within the model's, steps
    within the run's; parameters that leave the strategy idle warned about). The one check of a strategy's
    parameters: every run (:func:`heads.resolve.check_run`), so a workflow's custom entries, goes through it
    before anything is written. An error names ``strategy.params.KEY``."""
    strategy = build_strategy(name, params)
    if config is not None:
        strategy.check_config(config)
    return strategy


def load_plugins() -> None:
    """Strategies (and scorers) from other packages: the ``heads.strategies`` and ``heads.scorers`` entry-point
    groups, then the ``HEADS_PLUGINS`` modules (:func:`heads.registry.plugins`). The names alone, without
    torch: :func:`heads.registry.known`."""
    registry.plugins("strategy")
