"""Resolve a run configuration: preset < config file < overrides, checked against the registries.

:mod:`heads.config` holds the dataclasses, merging and value checks and imports
nothing else of the package; this module adds what needs the registries (the
task, the strategy and its typed parameters), so the dependency runs one way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heads.config import ConfigError, RunConfig, merge, parse_overrides, validate
from heads.presets import preset_for


def resolve(task: str, preset: str, file: str | Path | None = None, overrides: list[str] | None = None,
            overlay: Mapping[str, Any] | None = None) -> RunConfig:
    """Preset for ``task`` < config file < ``overlay`` (config sections, typed: what a run-sheet job's
    ``--overrides-file`` holds) < ``KEY=VALUE`` overrides, validated."""
    from heads.tasks import get_task

    get_task(task)  # unknown task -> clear error
    config = RunConfig(task=task, preset=preset)
    merge(config, preset_for(task, preset))
    if file is not None:
        from heads.yamlio import read_text, read_yaml

        loaded = json.loads(read_text(file)) if str(file).endswith(".json") else read_yaml(file, ConfigError)
        merge(config, loaded or {})
    merge(config, copy.deepcopy(dict(overlay or {})))  # merge keeps the overlay's own lists and mappings
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
    """The value checks of :func:`heads.config.validate`, then the strategy's name and its parameters, typed, in
    range and against this run (:func:`heads.strategies.registry.check_params`): every run's config goes
    through here before anything is written."""
    from heads.strategies.registry import check_params

    validate(config)
    if config.data.source == "offline" and config.data.dataset is not None:
        from heads.data.prepare import DataError, offline_corpus

        try:
            offline_corpus(config.task, config.data.dataset)
        except DataError as exc:
            raise ConfigError(f"data.dataset: {exc}") from None
    check_params(config.strategy.name, config.strategy.params, config)  # unknown name, bad or idle parameter
