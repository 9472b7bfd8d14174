"""Scale presets, one YAML data file each (``smoke.yaml``, ``tiny.yaml``, ``small.yaml``, ``paper.yaml`` here):
``tasks`` (each task's run configuration) for ``heads train --preset`` and every run of the DAG, and ``seeds``
for the DAG. Each replication's own settings per preset live in its folder (``replications/<name>/settings.yaml``).

A preset may be another at other samples: ``like: NAME`` takes that preset's file as its base and lays its own
keys over it, mapping by mapping (``quick.yaml``: the pretrained models at a first look's samples), so the models
and data the two share are stated once."""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from functools import cache
from pathlib import Path
from typing import Any

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
    doc = read_yaml(path, ConfigError)
    base = doc.pop("like", None) if isinstance(doc, dict) else None
    if base is None:
        return doc
    other = HERE / f"{base}.yaml"
    if base == preset or not other.is_file() or "like" in (read_yaml(other, ConfigError) or {}):
        raise ConfigError(f"{path}: like: {base!r} must name another preset that is not itself like one; "
                          f"presets: {names()}")
    return laid_over(_load(base), doc)


def laid_over(base: Mapping[str, Any], mine: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``mine`` laid over it: mappings merged key by key, anything else (a list, a number) replaced."""
    out = deepcopy(dict(base))
    for key, value in mine.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = laid_over(out[key], value)
        else:
            out[key] = deepcopy(value)
    return out


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
