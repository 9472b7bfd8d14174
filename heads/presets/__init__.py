"""Scale presets, one YAML data file each (``smoke.yaml``, ``tiny.yaml``, ``small.yaml``, ``paper.yaml`` here):
``tasks`` (each task's run configuration) for ``heads train --preset`` and every run of the DAG, and ``seeds``
for the DAG. Each replication's own settings per preset live in its folder (``replications/<name>/settings.yaml``)."""

from __future__ import annotations

from copy import deepcopy
from functools import cache
from pathlib import Path

from heads.config import ConfigError
from heads.names import builtin
from heads.yamlio import read_yaml

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The presets, one per YAML file here (:func:`heads.names.builtin`, which the workflow's checks read)."""
    return list(builtin("preset"))


@cache
def _load(preset: str) -> dict:
    path = HERE / f"{preset}.yaml"
    if not path.is_file():
        raise ConfigError(f"preset: {preset!r} is not one of {names()}")
    return read_yaml(path, ConfigError)


def preset(name: str) -> dict:
    """The whole preset file: ``{"seeds": [...], "tasks": {task: config}}``."""
    return deepcopy(_load(name))


def preset_for(task: str, preset: str) -> dict:
    """The run configuration of ``task`` at ``preset`` (a nested mapping of config sections)."""
    tasks = _load(preset)["tasks"]
    if task in tasks:
        return deepcopy(tasks[task])
    # A plugin task brings its own presets (a ``presets`` class attribute: preset name -> config sections).
    from heads.tasks import get_task

    try:
        own = getattr(get_task(task), "presets", {}) or {}
    except KeyError:
        own = {}
    if preset not in own:
        raise ConfigError(f"task: {task!r} has no {preset!r} preset; tasks: {sorted(tasks)} (a plugin task "
                          "gives its own in a `presets` class attribute: {preset name: config sections})")
    return deepcopy(own[preset])
