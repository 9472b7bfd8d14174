"""Resolve a run configuration: preset < config file < overrides, checked against the registries.

:mod:`heads.config` holds the dataclasses, merging and value checks and imports
nothing else of the package; this module adds what needs the registries (the
task, the strategy and its typed parameters), so the dependency runs one way.
"""

from __future__ import annotations

import json
from pathlib import Path

from heads.config import ConfigError, RunConfig, merge, parse_overrides, validate
from heads.presets import preset_for


def resolve(task: str, preset: str, file: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Preset for ``task`` < config file < overrides, validated."""
    from heads.tasks import get_task

    get_task(task)  # unknown task -> clear error
    config = RunConfig(task=task, preset=preset)
    merge(config, preset_for(task, preset))
    if file is not None:
        from heads.yamlio import read_text, read_yaml

        loaded = json.loads(read_text(file)) if str(file).endswith(".json") else read_yaml(file, ConfigError)
        merge(config, loaded or {})
    merge(config, parse_overrides(overrides or []))
    if config.task != task:
        raise ConfigError(f"task: the config says {config.task!r} but {task!r} was asked for")
    check_run(config)
    return config


def from_dict(data: dict) -> RunConfig:
    """A saved configuration (a run folder's ``config.json``), checked as when it was resolved."""
    config = RunConfig()
    merge(config, data)
    check_run(config)
    return config


def check_run(config: RunConfig) -> None:
    """The value checks of :func:`heads.config.validate`, then the strategy's name and typed parameters."""
    from heads.strategies import build_strategy

    validate(config)
    if config.data.source == "offline" and config.data.dataset is not None:
        from heads.data.prepare import DataError, offline_corpus

        try:
            offline_corpus(config.task, config.data.dataset)
        except DataError as exc:
            raise ConfigError(f"data.dataset: {exc}") from None
    m = config.model
    strategy = build_strategy(config.strategy.name, config.strategy.params)  # unknown name, bad parameter
    if m.source == "config":  # a pretrained source's head count is known only once it is loaded
        for name in ("floor", "keep"):
            value = getattr(strategy.params, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > m.heads:
                raise ConfigError(
                    f"strategy.params.{name}: {value} exceeds the {m.heads} heads of each site (model.heads)"
                )
