"""A model for a task: where it comes from (a shipped name, a checkpoint or run folder), the run configuration that
applies to it, the model, tokenizer and task loaded and checked together, and batches of the task's data.

Every refusal is a :class:`LoadError` with a one-line message; the command line shows it as its own error."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heads.io import InputError, no_file, read_json
from heads.shipped import DEFAULT_ROOT, describe

SHIPPED = describe()
DEFAULT_PRESET = "tiny"


class LoadError(InputError):
    """A model, run folder or configuration that cannot be loaded for a task; the message names it."""


def resolve_source(source: str, root: str = DEFAULT_ROOT) -> Path:
    """The model folder of a checkpoint folder, a run folder (its ``model/``), or the name of a checkpoint shipped
    inside a package (a GGUF converted on first use, cached under the data ``root``)."""
    if source in SHIPPED:  # a shipped name means the shipped checkpoint, as model.source does (./minilm/ or not)
        from heads import shipped

        try:
            return shipped.path(source, root)
        except shipped.ShippedError as exc:
            raise LoadError(str(exc)) from exc
    from heads.surgery.persist import CheckpointError, UnfinishedRun, model_folder

    try:
        return model_folder(source)
    except UnfinishedRun as exc:
        raise LoadError(str(exc)) from exc
    except CheckpointError as exc:
        raise LoadError(f"{exc}; nor one of the shipped models {sorted(SHIPPED)}") from exc


def run_folder_of(source: str, model_dir: Path) -> Path | None:
    """The run folder whose ``model/`` ``source`` named (its config.json applies), else None."""
    return model_dir.parent if model_dir == Path(source) / "model" else None


def check_config_file(file: Path) -> None:
    """A config file that exists and holds a mapping: a missing file or bad YAML named with its line."""
    from heads.yamlio import YamlError, read_yaml

    if not file.is_file():
        raise LoadError(f"--config {file}: {no_file(file)}")
    try:
        data = read_json(file, "JSON") if file.suffix == ".json" else read_yaml(file)
    except YamlError as exc:  # names the file and line: invalid, a key given twice, an alias bomb
        raise LoadError(f"--config {exc}") from exc
    if data is not None and not isinstance(data, dict):
        raise LoadError(f"--config {file}: holds a {type(data).__name__}, not a mapping of config sections")


def read_overlay(file: Path) -> dict:
    """The config sections of an ``--overrides-file`` (JSON, as a workflow job is handed its entry's settings):
    a missing file, bad JSON or anything but a mapping refused in one line naming it."""
    if not file.is_file():
        raise LoadError(f"--overrides-file {file}: {no_file(file)}")
    data = read_json(file, "JSON")
    if not isinstance(data, dict):
        raise LoadError(f"--overrides-file {file}: holds a {type(data).__name__}, not a mapping of config sections")
    return data


def _agrees_with_run(run_dir: Path, data: dict, task: str | None, preset: str | None, config: Path | None) -> None:
    """A run folder's own config.json wins: a task, preset or config file that says otherwise is refused rather
    than silently replacing it (a task or preset the run already has is accepted: it changes nothing)."""
    where = f"{run_dir} is a run with its own config.json"
    hint = "drop it, or change a key of the run's config with KEY=VALUE"
    if task and task != data.get("task"):
        raise LoadError(f"--task {task}: {where} (task {data.get('task')!r}); {hint}")
    if preset and preset != data.get("preset"):
        raise LoadError(f"--preset {preset}: {where} (preset {data.get('preset')!r}); {hint}")
    if config is not None:
        raise LoadError(f"--config {config}: {where}; {hint}")


def run_config(task: str | None = None, preset: str | None = None, config: Path | None = None,
               overrides: list[str] | None = None, run_dir: Path | None = None,
               overlay: Mapping[str, Any] | None = None):
    """The run configuration: a run folder's own config.json (plus ``overlay``, then ``overrides``), else
    ``task`` + ``preset`` (default tiny) < ``config`` file < ``overlay`` < ``overrides``. ``overlay``: config
    sections with their types (a run-sheet job's ``--overrides-file``)."""
    from heads.config import ConfigError, merge, parse_overrides
    from heads.resolve import check_run, resolve

    try:
        if run_dir is not None and (run_dir / "config.json").exists():
            from heads.resolve import from_dict

            data = read_json(run_dir / "config.json", "a run configuration")
            if not isinstance(data, dict):
                raise LoadError(f"{run_dir / 'config.json'}: not a run configuration (a {type(data).__name__})")
            _agrees_with_run(run_dir, data, task, preset, config)
            try:
                cfg = from_dict(data)
            except ConfigError as exc:
                raise LoadError(f"{run_dir / 'config.json'}: {exc}") from exc
            merge(cfg, copy.deepcopy(dict(overlay or {})))
            merge(cfg, parse_overrides(overrides or []))
            check_run(cfg)
            return cfg
        if not task:
            raise LoadError("--task is required unless the source is a run folder with config.json")
        if config is not None:
            check_config_file(Path(config))
        return resolve(task, preset or DEFAULT_PRESET, config, overrides, overlay)
    except (ConfigError, KeyError) as exc:
        raise LoadError(f"bad configuration: {exc.args[0] if isinstance(exc, KeyError) else exc}") from exc


@dataclass
class Loaded:
    model: Any
    tokenizer: Any
    cfg: Any
    task: Any
    placement: Any  # heads.placement.Placement: the device the model is on and the precision it runs at


def model_for_task(source: str, task: str | None = None, preset: str | None = None, config: Path | None = None,
                   overrides: list[str] | None = None, *, head: bool = True, threads: int | None = None,
                   overlay: Mapping[str, Any] | None = None) -> Loaded:
    """Model, tokenizer, configuration and task of ``source`` (a shipped name, a model or run folder; a run
    folder's own config.json applies, else ``task``), on the run's device (``head``: the model must have the
    task's output head; speed and roles measure bare encoders too). ``threads``: torch's, else the config's."""
    if source in SHIPPED:  # the config names the data root it is cached in
        cfg = run_config(task, preset, config, overrides, overlay=overlay)
        model_dir, run_dir = resolve_source(source, cfg.data.root), None
    else:
        model_dir = resolve_source(source)
        run_dir = run_folder_of(source, model_dir)
        cfg = run_config(task, preset, config, overrides, run_dir, overlay)
    return load_for_task(model_dir, cfg, run_dir, head=head, threads=threads)


def load_for_task(model_dir: Path, cfg, run_dir: Path | None = None, *, head: bool = True,
                  threads: int | None = None) -> Loaded:
    """The model in ``model_dir`` for ``cfg``'s task: on the run's device, its family checked against the task,
    with its own tokenizer (else the task's) and, when ``run_dir`` trained it, the run's own model and tokenizer."""
    from heads.config import ConfigError
    from heads.env import fix_threads
    from heads.placement import Placement
    from heads.surgery import load
    from heads.tasks import get_task
    from heads.tasks.text import saved_tokenizer

    try:  # the run's train.device and train.precision (auto: a GPU where there is one, so a GPU-trained run
        # is analysed on a CPU machine too)
        placement = Placement.of(cfg.train)
    except ConfigError as exc:
        raise LoadError(f"bad configuration: {exc}") from exc
    model = load(model_dir).to(placement.device)
    fix_threads(threads or cfg.train.threads, cfg.train.deterministic, placement.device)
    task = get_task(cfg.task)
    task.check_model(model, str(model_dir), head=head)
    if (model_dir / "tokenizer.json").exists() or (model_dir / "tokenizer_config.json").exists():
        tokenizer = saved_tokenizer(model_dir)
    else:
        tokenizer = task.tokenizer(cfg)
    if run_dir is not None and (run_dir / "checkpoint" / "state.json").is_file():
        from heads.train.checkpoint import check_identity, model_shape, tokenizer_checksum

        # The model folder must be the one this run trained, with its tokenizer (a swapped-in model or tokenizer
        # would be scored as this run's).
        check_identity(
            run_dir / "checkpoint",
            {"model": model_shape(model), "tokenizer": tokenizer_checksum(tokenizer)},
            against=f"model in {model_dir}",
            hint="that model or tokenizer is not the one this run trained",
        )
    return Loaded(model, tokenizer, cfg, task, placement)


def load_reference(loaded: Loaded, reference: str, source: str, command: str):
    """The unpruned model ``reference`` that ``loaded`` (from ``source``) was pruned from, on its device: a model
    of another class is refused (not one model before and after pruning)."""
    from heads.surgery import load

    model = load(resolve_source(reference, loaded.cfg.data.root)).to(loaded.placement.device)
    if type(model) is not type(loaded.model):
        raise LoadError(f"{command}: {reference} is a {type(model).__name__}, {source} a "
                        f"{type(loaded.model).__name__}: not one model before and after pruning")
    return model


def split_examples(loaded: Loaded, split: str, command: str) -> list:
    """The examples of ``split`` of the loaded task; an empty split is refused."""
    examples = loaded.task.examples(loaded.cfg, loaded.tokenizer, split)
    if not examples:
        raise LoadError(f"{command}: the {split} split of {loaded.cfg.task} has no examples")
    return examples


def scoring_batches(loaded: Loaded, split: str, n: int) -> list[dict]:
    """The first ``n`` batches of a split, in fixed order (the data every scorer sees), on the model's device."""
    from heads.tasks.batching import eval_batches

    if n < 1:  # eval_batches reads a limit of 0 as "all": a typo must not score the whole split
        raise LoadError(f"batches: must be >= 1, got {n}")
    cfg = loaded.cfg
    examples = loaded.task.examples(cfg, loaded.tokenizer, split)
    batches = list(eval_batches(examples, cfg.data.batch_size, loaded.task.collate, n * cfg.data.batch_size))
    if not batches:
        raise LoadError(f"the {split} split of {cfg.task} has no examples")
    return [loaded.placement.to(b) for b in batches]


def check_corpora(cfg, datasets: list[str], command: str) -> None:
    """Shipped corpora a run of ``cfg`` can be scored or evaluated on: the run reads the offline text, and each
    corpus has the task's columns; refused by name before anything loads or runs."""
    from heads.data.hub import DataError
    from heads.data.prepare import offline_corpus

    if cfg.data.source != "offline":
        raise LoadError(f"{command}: the shipped corpora are of the offline text; the run reads data.source="
                        f"{cfg.data.source}")
    for name in datasets:
        try:
            offline_corpus(cfg.task, name)
        except DataError as exc:
            raise LoadError(f"{command}: {exc}") from exc


def domain_batches(loaded: Loaded, datasets: list[str], split: str, n: int, command: str) -> dict[str, list[dict]]:
    """``{dataset: its first n batches of split}`` for shipped corpora with the task's columns (genres, shifted
    translations), each refused by name before anything is scored."""
    from dataclasses import replace

    from heads.tasks.batching import eval_batches

    cfg = loaded.cfg
    check_corpora(cfg, datasets, command)
    out = {}
    for name in datasets:
        c = replace(cfg, data=replace(cfg.data, dataset=name))
        examples = loaded.task.examples(c, loaded.tokenizer, split)
        found = list(eval_batches(examples, c.data.batch_size, loaded.task.collate, n * c.data.batch_size))
        if not found:
            raise LoadError(f"{command}: the {split} split of {name} has no examples")
        out[name] = [loaded.placement.to(b) for b in found]
    return out
