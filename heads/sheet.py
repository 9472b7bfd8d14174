"""The run sheet: every run a replication needs, declared as data and looked up by label.

A replication's ``runs.py`` (``replications/<name>/runs.py``) turns its part of
a preset's DAG settings into :class:`RunSpec` entries. The sheet is the union
of all replications' entries, checked before any job runs: labels unique,
every run it starts from on the sheet, the same label never declared twice
with different contents. The workflow looks runs up by label and turns an
entry into one ``heads`` command line (:func:`command_line`); the command
writes the entry's identity (:meth:`RunSpec.identity`) into the run's
``config.json`` / ``summary.json`` (or an analysis's JSON), which is what the
report reads. Nothing is ever parsed back out of a folder name.

This module imports nothing heavy: the workflow builds the sheet at parse time.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

# What a sheet entry runs: the ``heads`` command, and the file that marks it done (relative to the label).
COMMANDS = {"train": "summary.json", "prune": "summary.json", "ablate": ".json", "curve": ".json",
            "speed": ".json", "roles": ".json", "redundancy": ".json", "shift": ".json",
            "memory": ".json", "clock": ".json", "trivial": ".json", "decode-speed": ".json", "mask": ".json"}


class SheetError(ValueError):
    """A run sheet that is not consistent; the message names the label and the key."""


def fmt_ratio(ratio: float) -> str:
    """Ratios in labels: at least one decimal (0.0, 0.5, 0.25)."""
    text = repr(float(ratio))
    return f"{float(ratio):.{max(1, len(text.split('.')[1]))}f}"


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run of the DAG.

    ``label`` is also the run's folder (or, for analyses, its JSON file without
    the suffix) under the run tree. ``arm`` names the compared arm within the
    variant for tables and selectors (``oneshot``, ``dropout0.25``, ``lam0.01``)
    and ``knob`` is the number that orders arms (a penalty, a dropout rate);
    both are declared here, never read back from the label. ``paths`` maps a
    config key or command option to a file of another run (``label/name``),
    ``after`` lists the runs this one needs finished.
    """

    label: str
    command: str
    replication: str
    task: str
    seed: int
    variant: str = "baseline"
    arm: str = "none"
    ratio: float = 0.0
    knob: float | None = None
    strategy: str = "none"
    params: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)  # nested config overrides, typed (train.steps: 40)
    options: dict = field(default_factory=dict)  # command options (--batches 4, --test loss)
    paths: dict = field(default_factory=dict)  # key -> "label/relative file" of another run
    after: tuple = ()

    def identity(self) -> dict[str, Any]:
        """What the run records about itself (``run`` in its config, summary or analysis JSON)."""
        return {"label": self.label, "kind": self.kind, "task": self.task, "seed": self.seed, "variant": self.variant,
                "arm": self.arm, "ratio": float(self.ratio), "knob": self.knob,
                "from_run": self.after[0] if self.after else None}

    @property
    def kind(self) -> str:
        """``run`` for a model-making entry, else the analysis (``ablation``, ``curve``, ...)."""
        return "run" if self.command in ("train", "prune") else self.variant

    def done_file(self) -> str:
        """The file (relative to the run tree) whose existence means the entry is finished."""
        suffix = COMMANDS[self.command]
        return f"{self.label}{suffix}" if suffix.startswith(".") else f"{self.label}/{suffix}"


def run_label(task: str, variant: str, arm: str, ratio: float, seed: int) -> str:
    return f"{task}/{variant}/{arm}/{fmt_ratio(ratio)}/seed{seed}"


def analysis_label(task: str, *parts: str, seed: int | None = None) -> str:
    return "/".join([task, "analysis", *parts] + ([f"seed{seed}"] if seed is not None else []))


# -- building and checking ---------------------------------------------------------------------------------
def load_replication(folder: Path):
    """A replication's ``runs.py`` as a module (it defines ``runs(settings, seeds) -> list[RunSpec]``)."""
    path = folder / "runs.py"
    spec = importlib.util.spec_from_file_location(f"heads_replication_{folder.name}", path)
    if spec is None or spec.loader is None:
        raise SheetError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "runs", None)):
        raise SheetError(f"{path}: defines no runs(settings, seeds)")
    return module


def replications(root: str | Path) -> list[str]:
    """Replication names: the folders of ``root`` that hold a ``runs.py``."""
    return sorted(p.parent.name for p in Path(root).glob("*/runs.py"))


def dag_for(root: str | Path, preset: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The DAG's shape at ``preset``: the preset's ``seeds`` and each replication's settings (its folder's
    ``settings.yaml`` at that preset; a replication whose settings there are null or absent does not run at it),
    with ``overrides`` (``seeds``, ``custom``, ``tasks``, or a replication's
    name mapping to keys that replace its own) on top. ``tasks`` maps a task to run-config sections (a user's
    model and data) laid under every run of that task. A replication's settings may name its own ``seeds``
    (``seeds_of``), unless the overrides set the DAG's. The names in the settings (presets, and the tasks and
    scorers their ``settings.schema.yaml`` marks) are checked against the registries here, in one line naming
    the file and key."""
    from heads.presets import preset as load_preset
    from heads.yamlio import read_yaml

    _check_name("preset", preset, "preset")
    overrides = dict(overrides or {})
    user_seeds = overrides.pop("seeds", None)
    dag: dict[str, Any] = {"preset": preset, "seeds": user_seeds or load_preset(preset)["seeds"]}
    for key in ("custom", "tasks"):
        if key in overrides:
            dag[key] = overrides.pop(key)
    _check_task_sections(dag.get("tasks"), preset)
    for name in replications(root):
        path = Path(root) / name / "settings.yaml"
        doc = read_yaml(path, SheetError) if path.is_file() else {}
        if not isinstance(doc or {}, Mapping):
            raise SheetError(f"{path}: must map a preset to the replication's settings there, got {doc!r}")
        for known in doc or {}:  # a preset's settings under a misspelt name would silently never run
            _check_name("preset", known, f"{path}: {known}")
        if (doc or {}).get(preset) is None:  # null or absent: made for other scales (pretrained runs at its own)
            if overrides.pop(name, None):
                said = "sets it to null" if preset in (doc or {}) else "has no settings for it"
                raise SheetError(f"dag overrides name {name!r}, which does not run at preset {preset!r} "
                                 f"({path} {said})")
            continue
        mine = overrides.pop(name, None) or {}
        schema = Path(root) / name / "settings.schema.yaml"
        if schema.is_file():  # the names its settings give, where its schema marks them (registry: scorer)
            _check_names(doc[preset], schema, f"{path}: {preset}.")
            _check_names(mine, schema, f"dag.{preset}.{name}.")
        dag[name] = {**doc[preset], **mine}
        # a replication's own seeds (cheap post-hoc studies afford more): kept beside its settings, which its
        # schema checks; the workflow config's top-level seeds win over them (one seed for a quick look)
        own = dag[name].pop("seeds", None)
        if own is not None and user_seeds is None:
            if not (isinstance(own, list) and own and all(isinstance(x, int) and not isinstance(x, bool)
                                                          and x >= 0 for x in own) and len(set(own)) == len(own)):
                raise SheetError(f"{path}: {preset}.seeds must be a list of distinct seeds >= 0, got {own!r}")
            dag.setdefault("seeds_of", {})[name] = own
    if overrides:
        raise SheetError(f"dag overrides name no replication: {sorted(overrides)}; replications: {replications(root)}")
    return dag


def _check_name(kind: str, value: Any, where: str) -> None:
    """A name of ``kind`` (preset, task, scorer) known to its registry, else a SheetError in one line."""
    from heads.config import ConfigError
    from heads.registry import check_name

    try:
        check_name(kind, value, where)
    except ConfigError as exc:  # an unknown name, or a HEADS_PLUGINS module that cannot be imported
        raise SheetError(str(exc)) from None


def _check_names(doc: Any, schema: Path, where: str) -> None:
    """The names in ``doc`` where its ``schema`` marks them (:func:`heads.registry.check_schema_names`)."""
    from heads.config import ConfigError
    from heads.registry import check_schema_names

    try:
        check_schema_names(doc, schema, where)
    except ConfigError as exc:  # an unknown name, or a HEADS_PLUGINS module that cannot be imported
        raise SheetError(str(exc)) from None


def check_config_names(config: Mapping[str, Any], schema: str | Path, where: str = "config: ") -> None:
    """The workflow config's names (its ``preset``, the presets it keys ``dag`` and ``job_resources`` by, its
    tasks) checked against the registries where its ``schema`` marks them, as a SheetError in one line; its
    schema lists none."""
    _check_names(config, Path(schema), where)


def _check_task_sections(tasks: Any, preset: str) -> None:
    """The workflow config's ``dag.<preset>.tasks`` (task -> run-config sections laid under its runs), checked
    against the run configuration's types before any job runs, with the key named."""
    from heads.config import ConfigError, RunConfig, merge

    if tasks is None:
        return
    if not isinstance(tasks, Mapping):
        raise SheetError(f"dag.{preset}.tasks must map a task to run-config sections, got {tasks!r}")
    for task, sections in tasks.items():
        try:
            merge(RunConfig(task=str(task)), dict(sections or {}))
        except (ConfigError, TypeError, ValueError) as exc:
            raise SheetError(f"dag.{preset}.tasks.{task}: {exc}") from None


@dataclass
class Sheet:
    """The checked sheet: ``runs`` (label -> entry) and ``of`` (replication -> the labels it needs)."""

    runs: dict[str, RunSpec]
    of: dict[str, list[str]]

    def __getitem__(self, label: str) -> RunSpec:
        try:
            return self.runs[label]
        except KeyError:
            raise SheetError(f"{label!r} is not on the run sheet") from None

    def labels(self, command: str | None = None) -> list[str]:
        return [k for k, e in self.runs.items() if command is None or e.command == command]


def build(root: str | Path, dag: Mapping[str, Any], names: Iterable[str] | None = None,
          extra: Mapping[str, Iterable[RunSpec]] | None = None) -> Sheet:
    """The sheet of one preset: each replication's ``runs.py`` over its settings in ``dag`` and seeds (its own,
    ``dag["seeds_of"][name]``, where its settings named them, else the preset's), plus ``extra`` entries per
    replication (e.g. a user's own strategies), checked."""
    root = Path(root)
    declared: dict[str, list[RunSpec]] = {}
    for name in names if names is not None else [n for n in replications(root) if n in dag]:
        if name not in dag:
            raise SheetError(f"replication {name!r} has no settings in this preset's dag (keys: {sorted(dag)})")
        declared[name] = list(load_replication(root / name).runs(dag[name], seeds_of(dag, name)))
    for name, entries in (extra or {}).items():
        if entries := list(entries):  # none: the replication may not run at this preset at all
            declared.setdefault(name, []).extend(entries)
    runs = check([_with_task_config(e, (dag.get("tasks") or {}).get(e.task)) for entries in declared.values()
                  for e in entries])
    runs = {label: _yardstick_steps(e, runs, dag.get("preset")) for label, e in runs.items()}
    return Sheet(runs, {name: sorted({e.label for e in entries}) for name, entries in declared.items()})


def seeds_of(dag: Mapping[str, Any], name: str) -> list[int]:
    """A replication's seeds: its own (``dag["seeds_of"][name]``) where its settings named them, else the preset's."""
    return list((dag.get("seeds_of") or {}).get(name, dag["seeds"]))


def _with_task_config(e: RunSpec, base: Mapping[str, Any] | None) -> RunSpec:
    """``e`` with the user's config of its task under its own (an entry's own keys, such as a variant's head
    count, win). Only commands that build their config from the preset take it: training runs, and analyses of
    a bare model folder (``--task``); an analysis of a run reads that run's config.json."""
    if not base or not (e.command == "train" or e.options.get("task")):
        return e
    return replace(e, config=layered(base, e.config))


def layered(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict:
    """Nested config sections: ``top``'s keys over ``base``'s, section by section."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = layered(out[key], value)
        else:
            out[key] = value
    return out


def check(entries: Iterable[RunSpec]) -> dict[str, RunSpec]:
    """Labels unique (a run several replications share must be declared alike; their ``config`` keys are
    merged, a conflicting value refused), commands known, ``after`` on the sheet, ``paths`` inside runs
    listed in ``after``."""
    sheet: dict[str, RunSpec] = {}
    for e in entries:
        if e.command not in COMMANDS:
            raise SheetError(f"{e.label}: command {e.command!r} is not one of {sorted(COMMANDS)}")
        if not isinstance(e.seed, int) or isinstance(e.seed, bool) or e.seed < 0:
            raise SheetError(f"{e.label}: seed must be an integer >= 0, got {e.seed!r}")
        if e.command == "prune" and e.options.get("evaluate") is not True:
            # its done file, summary.json, is what --evaluate writes: without it the job would never be done
            raise SheetError(f"{e.label}: a prune entry needs options evaluate: true (it writes summary.json)")
        old = sheet.get(e.label)
        if old is None:
            sheet[e.label] = e
            continue
        if _shared(old) != _shared(e):
            raise SheetError(f"{e.label}: declared by {old.replication} and {e.replication} with different "
                             "contents; declare a shared run alike")
        sheet[e.label] = replace(old, config=_merge(old.config, e.config, e.label))
    for e in sheet.values():
        for dep in e.after:
            if dep not in sheet:
                raise SheetError(f"{e.label}: starts from {dep!r}, which is not on the sheet")
        for key, path in e.paths.items():
            if not any(path == d or path.startswith(d + "/") for d in e.after):
                raise SheetError(f"{e.label}: {key} -> {path!r} is not inside a run listed in after")
    return dict(sorted(sheet.items()))


def _shared(e: RunSpec) -> dict:
    """An entry's contents but for who declared it and its config (merged separately)."""
    d = asdict(e)
    d.pop("replication")
    d.pop("config")
    return d


def _merge(a: Mapping, b: Mapping, label: str, prefix: str = "") -> dict:
    out = dict(a)
    for key, value in b.items():
        if key in out and isinstance(out[key], Mapping) and isinstance(value, Mapping):
            out[key] = _merge(out[key], value, label, f"{prefix}{key}.")
        elif key in out and out[key] != value:
            raise SheetError(f"{label}: {prefix}{key} declared as {out[key]!r} and as {value!r}")
        else:
            out[key] = value
    return out


def shard_config(seeds: Sequence[int], seed: int) -> dict:
    """The eval section that makes ``seed`` one disjoint shard of the held-out text (one pretrained model has no
    training seeds: its seeds are shards of the test set, ``eval.shards`` / ``eval.shard``)."""
    return {"eval": {"shards": len(seeds), "shard": list(seeds).index(seed)}}


def baseline(replication: str, task: str, seed: int, config: dict | None = None) -> RunSpec:
    """The full model trained from scratch: one per task and seed, shared by every replication."""
    return RunSpec(label=run_label(task, "baseline", "none", 0.0, seed), command="train", replication=replication,
                   task=task, seed=seed,
                   config=config or {})


def masking_runs(replication: str, task: str, settings: Mapping[str, Any], source: str) -> list[RunSpec]:
    """Michel's unit on a model that ``source`` (a run label) holds: per replicate of the procedure (its own
    slice of the scoring split), ``mask_units`` (query heads and/or key/value groups; default both) masked by
    importance at each of ``mask_ratios``, all evaluated on one common test set (``mask_test_windows``, 0: all);
    the oracle order (greedy by measured cost, re-measured every ``oracle_step``) over ``oracle_units`` on the
    first ``oracle_replicates``, whose job ranks by importance too, on the same few examples. The replicates are
    these claims' seeds, whatever the preset's are."""
    s = settings
    common = {"ratios": list(s["mask_ratios"]), "test_windows": s["mask_test_windows"]}
    out = []
    for arm, replicates, orders, units, windows in (
            ("importance", s["mask_replicates"], ["importance"], list(s.get("mask_units", ["head", "group"])),
             s["mask_score_windows"]),
            ("oracle", s["oracle_replicates"], ["importance", "oracle"], list(s["oracle_units"]),
             s["oracle_score_windows"])):
        for r in range(replicates):
            out.append(RunSpec(label=analysis_label(task, "mask", arm, seed=r), command="mask",
                               replication=replication, task=task, seed=r, variant="mask", arm=arm,
                               options={**common, "units": units, "orders": orders, "seed": r,
                                        "score_windows": windows,
                                        **({"oracle_step": s["oracle_step"]} if arm == "oracle" else {})},
                               paths={"source": source}, after=(source,)))
    return out


LONGER = "baseline_2x"  # the variant of a baseline trained twice its steps (the convergence precondition's yardstick)


def longer_baselines(replication: str, longer: Mapping[str, Any] | None, seeds: Sequence[int]) -> list[RunSpec]:
    """``longer`` (``{task, factor, seeds: n}``): the baseline of ``task`` trained ``factor`` times its steps on
    the first ``n`` of ``seeds``, or on every seed with ``seeds: all`` (:func:`build` sets the steps from the
    baseline's own, the preset's or a user's task config). A baseline is converged when its final validation loss
    is within a stated share of this run's, seed by seed (replications/preconditions.yaml: lm-converged);
    replications declare it alike and share it."""
    if not longer:
        return []
    n = len(seeds) if longer["seeds"] == "all" else int(longer["seeds"])
    if n > len(seeds):
        raise SheetError(f"{replication}: longer_baseline asks for {n} seeds, the replication has {len(seeds)}")
    return [RunSpec(label=run_label(longer["task"], LONGER, "none", 0.0, seed), command="train",
                    replication=replication, task=longer["task"],
                    seed=seed, variant=LONGER, knob=float(longer["factor"])) for seed in list(seeds)[:n]]


def _yardstick_steps(e: RunSpec, sheet: Mapping[str, RunSpec], preset: str | None) -> RunSpec:
    """A longer baseline with its steps: ``knob`` (the factor) times its baseline's, as that baseline will train
    (its entry's config, where a user's task config lies, else the preset's), so the yardstick stays twice the
    baseline whatever overrides the steps. Its baseline is the ``baseline`` entry of the same arm and seed: arm
    ``none`` the preset's model, another arm a model of another shape (the scaling sweep's sizes)."""
    if e.variant != LONGER:
        return e
    base = sheet.get(run_label(e.task, "baseline", e.arm, 0.0, e.seed))
    if base is None:
        raise SheetError(f"{e.label}: the baseline it is the yardstick of is not on the sheet")
    steps = (base.config.get("train") or {}).get("steps")
    if steps is None:
        if preset is None:
            raise SheetError(f"{e.label}: no preset to read its baseline's steps from")
        from heads.presets import preset_for

        steps = preset_for(e.task, preset)["train"]["steps"]
    return replace(e, config=layered(e.config, {"train": {"steps": round(float(e.knob or 2.0) * int(steps))}}))


# -- the command line of an entry --------------------------------------------------------------------------
def _value(value: Any) -> str:
    """A typed value as the command line's ``key=value`` reads it back (JSON is valid YAML: types survive)."""
    return value if isinstance(value, str) else json.dumps(value)


def task_overrides(sections: Mapping[str, Any]) -> list[str]:
    """A task's config sections (``{model: {source: ...}, data: {...}}``) as ``KEY=VALUE`` overrides."""
    return [f"{k}={_value(v)}" for k, v in _flatten(sections)]


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out += _flatten(value, f"{prefix}{key}.")
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
        parts.append(flag if value is True else f"{flag} " + " ".join(q(_value(x)) for x in _listed(value)))
    parts += [f"--{key} {q(at(path))}" for key, path in e.paths.items() if key != "source"]
    parts.append(f"{identity} --out {q(at(e.label if e.command == 'prune' else e.done_file()))}")
    parts += [q(word) for word in analysis_overrides(e, data_root, threads)]
    return " ".join(parts)


def train_overrides(e: RunSpec, runs: str, data_root: str, threads: int) -> list[str]:
    """The ``KEY=VALUE`` words a training entry's ``heads train`` gets (``threads``: each process's)."""
    config: dict[str, Any] = {"data.root": data_root, "train.seed": e.seed, "train.threads": threads,
                              "train.progress": False, **dict(_flatten(e.config))}
    config.update({key: f"{runs}/{path}" for key, path in e.paths.items()})
    if e.strategy != "none":
        config["strategy.name"] = e.strategy
        config.update({f"strategy.params.{k}": v for k, v in e.params.items()})
    return [f"{k}={_value(v)}" for k, v in config.items()]


def analysis_overrides(e: RunSpec, data_root: str, threads: int) -> list[str]:
    """The ``KEY=VALUE`` words an analysis or pruning entry's command lays over its source's config.json (or,
    with ``options.task``, over the task's preset)."""
    # An analysis reads the run's own config.json; its threads are this job's, not the training job's.
    config = {"train.threads": threads, **dict(_flatten(e.config))}
    if e.command in ("speed", "decode-speed"):  # timings run at their own --threads, which win over the config
        config.pop("train.threads")
    if e.options.get("task"):
        config["data.root"] = data_root
    return [f"{k}={_value(v)}" for k, v in config.items()]


def param_words(e: RunSpec) -> list[str]:
    """An analysis or pruning entry's ``--param KEY=VALUE`` words."""
    return [f"{k}={_value(v)}" for k, v in e.params.items()]


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


# -- a user's own strategies ------------------------------------------------------------------------------
CUSTOM_JOINS = "training_time"  # the replication an entry naming none joins


@dataclass(frozen=True, kw_only=True)
class Custom:
    """One entry of a workflow config's ``dag.<preset>.custom``, as a replication's ``custom`` hook takes it.

    ``kind`` is how its strategy prunes (:func:`heads.strategies.registry.kind_of`): ``during`` (a strategy that
    prunes while training) or ``posthoc`` (a scorer choosing heads of a trained model). ``task`` and ``ratio``
    are None where the entry names none; the hook decides what that means."""

    label: str
    strategy: str
    kind: str
    task: str | None = None
    ratio: float | None = None
    params: dict = field(default_factory=dict)


def custom(root: str | Path, dag: Mapping[str, Any], entries: Iterable[Mapping[str, Any]]) -> dict[str, list[RunSpec]]:
    """A user's own strategies (workflow config ``dag.<preset>.custom``) as runs of the replications they join,
    for :func:`build`'s ``extra``. Each ``{label, strategy, task, ratio, params, replication}`` joins its
    ``replication`` (default ``training_time``), whose ``runs.py`` says how with an optional
    ``custom(entry, settings, seeds) -> list[RunSpec]`` (``entry``: a :class:`Custom`; ``settings`` and
    ``seeds``: the replication's own at this preset), every run's ``arm`` the entry's label, or raises
    :class:`SheetError` for an entry it cannot take. Refused in one line naming the entry, before any job: a
    label twice, an unknown strategy or replication, one not run at this preset or without that hook. An entry
    imports the strategy and scorer registries (torch), to tell its kind; none, nothing heavy."""
    entries = list(entries)
    labels = [c.get("label") for c in entries]
    repeated = sorted({str(x) for x in labels if labels.count(x) > 1})
    if repeated:  # one arm per label: two strategies under one label would be read as one arm's runs
        raise SheetError(f"custom: labels {repeated} name more than one entry; give each entry its own label")
    known = replications(root)
    out: dict[str, list[RunSpec]] = {}
    for c in entries:
        name, where = c.get("replication", CUSTOM_JOINS), f"custom, entry {c.get('label')!r}"
        if name not in known:
            raise SheetError(f"{where}: replication {name!r} is not one of {known}")
        if name not in dag:
            raise SheetError(f"{where}: it joins the {name} replication, which does not run at preset "
                             f"{dag.get('preset')!r} (replications/{name}/settings.yaml sets it to null)")
        hook = getattr(load_replication(Path(root) / name), "custom", None)
        if not callable(hook):
            takes = [n for n in known if callable(getattr(load_replication(Path(root) / n), "custom", None))]
            raise SheetError(f"{where}: replication {name!r} takes no custom entries (its runs.py defines no "
                             f"custom(entry, settings, seeds)); those that do: {takes}")
        try:
            ratio = None if "ratio" not in c else float(c["ratio"])
        except (TypeError, ValueError):
            raise SheetError(f"{where}: ratio must be a number, got {c.get('ratio')!r}") from None
        given = (c.get("params") or {}).get("ratio") if isinstance(c.get("params"), Mapping) else None
        if ratio is not None and given is not None and given != ratio:
            # the label's ratio (the arm's folder, the tables' column) would say one thing, the strategy do another
            raise SheetError(f"{where}: ratio {c['ratio']!r} and params.ratio {given!r} contradict each other "
                             "(the run would be labelled one and prune the other); give the ratio once")
        from heads.config import ConfigError
        from heads.strategies.registry import kind_of

        try:
            kind = kind_of(c["strategy"])
        except ConfigError as exc:
            raise SheetError(f"{where}: {exc}") from None
        entry = Custom(label=c["label"], strategy=c["strategy"], kind=kind, task=c.get("task"), ratio=ratio,
                       params=dict(c.get("params") or {}))
        try:
            runs = list(hook(entry, dag[name], seeds_of(dag, name)))
        except SheetError as exc:
            raise SheetError(f"{where}: {name}: {exc}") from None
        out.setdefault(name, []).extend(runs)
    return out
