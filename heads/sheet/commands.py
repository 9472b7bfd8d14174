"""Rendering commands: the ``heads`` command line of one sheet entry (:func:`command_line`), every value
shell-quoted. The config an entry lays over the preset's, or over its source run's configuration
(:func:`entry_overrides`), travels as a JSON file (``--overrides-file``: its types kept, no words to parse back);
the job's threads as ``--threads``. ``--param`` and option values are words, written as JSON (valid YAML), so the
command reads back their types.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

from heads.config import flatten, nest
from heads.sheet.declare import RunSpec


def as_word(value: Any) -> str:
    """A typed value as the command line's ``key=value`` reads it back (JSON is valid YAML: types survive)."""
    return value if isinstance(value, str) else json.dumps(value)


def overrides_file(folder: str, label: str) -> str:
    """Where an entry's ``--overrides-file`` lives (under the settings folder, beside its settings file)."""
    return f"{folder}/config/{label}.json"


def entry_overrides(e: RunSpec, runs: str, data_root: str) -> dict:
    """The config sections entry ``e``'s command lays over the preset (a training run: its seed, data root,
    variant and strategy, the files of runs before it under ``runs``) or over its source run's config.json (an
    analysis; with ``options.task``, over the task's preset), as JSON types: what its ``--overrides-file``
    holds. The threads are the job's (``--threads``), so they are not here."""
    if e.command == "train":
        pairs = [("data.root", data_root), ("train.seed", e.seed), ("train.progress", False), *flatten(e.config)]
        pairs += [(key, f"{runs}/{path}") for key, path in e.paths.items()]
        if e.strategy != "none":
            pairs.append(("strategy.name", e.strategy))
            pairs += [(f"strategy.params.{k}", v) for k, v in e.params.items()]
    else:
        pairs = [*flatten(e.config), *([("data.root", data_root)] if e.options.get("task") else [])]
    return json.loads(json.dumps(nest(pairs)))  # as the command reads it back: tuples are lists, nothing shared


def command_line(e: RunSpec, runs: str, preset: str, data_root: str, threads: int, gpus: int = 0,
                 overrides: str | None = None) -> str:
    """The ``heads`` invocation of entry ``e`` (every value shell-quoted), writing under the run tree ``runs``.

    ``threads`` are the job's CPU threads: they reach torch as ``--threads`` (train.threads; ``speed``: its own
    ``--threads``, unless the entry sets them), shared out between the processes of a multi-GPU run. ``gpus`` > 1
    trains with DDP, one process per GPU under ``torchrun``; every other command runs in one process.
    ``overrides``: the JSON file holding :func:`entry_overrides` (:func:`heads.freshness.write_overrides` writes
    it), required where the entry lays any config over its base."""
    q = shlex.quote

    def at(rel: str) -> str:
        return f"{runs}/{rel}"

    if entry_overrides(e, runs, data_root) and overrides is None:
        raise ValueError(f"{e.label}: its command needs the file of its config overrides (overrides=)")
    config = f" --overrides-file {q(overrides)}" if overrides is not None else ""
    identity = f"--run {q(json.dumps(e.identity(), sort_keys=True))}"
    if e.command == "train":
        ranks = max(1, gpus)
        # torchrun sets RANK/WORLD_SIZE/LOCAL_RANK, which make `heads train` train with DDP, a GPU per rank;
        # --standalone picks a free local port, so several such jobs can share a machine.
        launcher = f"torchrun --standalone --nproc_per_node {ranks} -m heads" if ranks > 1 else "heads"
        return (f"{launcher} train --task {e.task} --preset {preset} --out {q(at(e.label))} {identity} "
                f"--threads {max(1, threads // ranks)}{config}")
    # a measurement of a shipped model names it (options.model) instead of a run it starts from
    parts = [f"heads {e.command}" + (f" {q(at(e.paths['source']))}" if "source" in e.paths else "")]
    timing = e.command in ("speed", "decode-speed")  # timings run at their own --threads, which win over the config
    if timing:
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
    if not timing:  # an analysis reads the run's own config.json; its threads are this job's, not the training's
        parts.append(f"--threads {threads}")
    return " ".join(parts) + config


def param_words(e: RunSpec) -> list[str]:
    """An analysis or pruning entry's ``--param KEY=VALUE`` words."""
    return [f"{k}={as_word(v)}" for k, v in e.params.items()]


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]
