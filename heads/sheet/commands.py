"""Rendering commands: the ``heads`` command line of one sheet entry (:func:`command_line`), every value
shell-quoted, with the ``KEY=VALUE`` config words it lays over the preset's or its source run's configuration.
A value is written as JSON (valid YAML), so the command reads back its type.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from heads.sheet.declare import RunSpec


def as_word(value: Any) -> str:
    """A typed value as the command line's ``key=value`` reads it back (JSON is valid YAML: types survive)."""
    return value if isinstance(value, str) else json.dumps(value)


def task_overrides(sections: Mapping[str, Any]) -> list[str]:
    """A task's config sections (``{model: {source: ...}, data: {...}}``) as ``KEY=VALUE`` overrides."""
    return [f"{k}={as_word(v)}" for k, v in flatten(sections)]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested config sections as ``(dotted.key, value)`` pairs, in order (an empty section is a value)."""
    out = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out += flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def command_line(e: RunSpec, runs: str, preset: str, data_root: str, threads: int, gpus: int = 0) -> str:
    """The ``heads`` invocation of entry ``e`` (every value shell-quoted), writing under the run tree ``runs``.

    ``threads`` are the job's CPU threads: they reach torch as ``train.threads`` (``speed``: its ``--threads``,
    unless the entry sets them), shared out between the processes of a multi-GPU run. ``gpus`` > 1 trains
    with DDP, one process per GPU under ``torchrun``; every other command runs in one process."""
    q = shlex.quote

    def at(rel: str) -> str:
        return f"{runs}/{rel}"

    identity = f"--run {q(json.dumps(e.identity(), sort_keys=True))}"
    if e.command == "train":
        ranks = max(1, gpus)
        overrides = " ".join(q(word) for word in train_overrides(e, runs, data_root, max(1, threads // ranks)))
        # torchrun sets RANK/WORLD_SIZE/LOCAL_RANK, which make `heads train` train with DDP, a GPU per rank;
        # --standalone picks a free local port, so several such jobs can share a machine.
        launcher = f"torchrun --standalone --nproc_per_node {ranks} -m heads" if ranks > 1 else "heads"
        return f"{launcher} train --task {e.task} --preset {preset} --out {q(at(e.label))} {identity} {overrides}"
    # a measurement of a shipped model names it (options.model) instead of a run it starts from
    parts = [f"heads {e.command}" + (f" {q(at(e.paths['source']))}" if "source" in e.paths else "")]
    if e.command in ("speed", "decode-speed"):  # timings run at their own --threads, which win over the config
        e = replace(e, options={"threads": threads, **e.options})
    if e.options.get("task"):  # a bare model folder (a snapshot): the task's preset applies
        parts.append(f"--task {e.task} --preset {preset}")
    if e.command == "prune":
        parts.append(f"--strategy {e.strategy}")
    if e.params:
        parts.append("--param " + " ".join(q(word) for word in param_words(e)))
    for key, value in e.options.items():
        if key == "task":
            continue
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"{flag} " + " ".join(q(as_word(x)) for x in _listed(value)))
    parts += [f"--{key} {q(at(path))}" for key, path in e.paths.items() if key != "source"]
    parts.append(f"{identity} --out {q(at(e.label if e.command == 'prune' else e.done_file()))}")
    parts += [q(word) for word in analysis_overrides(e, data_root, threads)]
    return " ".join(parts)


def train_overrides(e: RunSpec, runs: str, data_root: str, threads: int) -> list[str]:
    """The ``KEY=VALUE`` words a training entry's ``heads train`` gets (``threads``: each process's)."""
    config: dict[str, Any] = {"data.root": data_root, "train.seed": e.seed, "train.threads": threads,
                              "train.progress": False, **dict(flatten(e.config))}
    config.update({key: f"{runs}/{path}" for key, path in e.paths.items()})
    if e.strategy != "none":
        config["strategy.name"] = e.strategy
        config.update({f"strategy.params.{k}": v for k, v in e.params.items()})
    return [f"{k}={as_word(v)}" for k, v in config.items()]


def analysis_overrides(e: RunSpec, data_root: str, threads: int) -> list[str]:
    """The ``KEY=VALUE`` words an analysis or pruning entry's command lays over its source's config.json (or,
    with ``options.task``, over the task's preset)."""
    # An analysis reads the run's own config.json; its threads are this job's, not the training job's.
    config = {"train.threads": threads, **dict(flatten(e.config))}
    if e.command in ("speed", "decode-speed"):  # timings run at their own --threads, which win over the config
        config.pop("train.threads")
    if e.options.get("task"):
        config["data.root"] = data_root
    return [f"{k}={as_word(v)}" for k, v in config.items()]


def param_words(e: RunSpec) -> list[str]:
    """An analysis or pruning entry's ``--param KEY=VALUE`` words."""
    return [f"{k}={as_word(v)}" for k, v in e.params.items()]


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]
