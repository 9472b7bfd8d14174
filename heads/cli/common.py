"""Shared pieces of the commands: where a model comes from and which run configuration applies."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heads.io import read_json
from heads.shipped import DEFAULT_ROOT, describe

SHIPPED = describe()


class UserError(SystemExit):
    """Bad input: its one-line message goes to stderr (printed by ``main``), the exit status is 2."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = 2  # str(self) stays the message; the interpreter exits with 2 and prints nothing more


def fail(message: str) -> UserError:
    return UserError(f"heads: {message}")


def no_file(path: Path) -> str:
    """Why ``path`` is not a file to read, in words: a folder named where a file belongs is not missing."""
    return "a folder, not a file" if Path(path).is_dir() else "no such file"


def one_line(message: str) -> str:
    """A multi-line message (a list of mismatched tensors) as one line."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


def resolve_source(source: str, root: str = DEFAULT_ROOT) -> Path:
    """A checkpoint folder, or the name of a checkpoint shipped inside a package (a GGUF converted on first use,
    cached under the data ``root``)."""
    if source in SHIPPED:  # a shipped name means the shipped checkpoint, as model.source does (./minilm/ or not)
        from heads import shipped

        try:
            return shipped.path(source, root)
        except shipped.ShippedError as exc:
            raise fail(str(exc)) from None
    from heads.surgery.persist import CheckpointError, UnfinishedRun, model_folder

    try:
        return model_folder(source)
    except UnfinishedRun as exc:
        raise fail(str(exc)) from None
    except CheckpointError as exc:
        raise fail(f"{exc}; nor one of the shipped models {sorted(SHIPPED)}") from None


def data_root(args: argparse.Namespace) -> str:
    """The data root a command's ``data.root=`` override names (where shipped checkpoints are cached), else the
    default: commands that load a shipped model before (or without) resolving a run configuration use it."""
    for item in getattr(args, "overrides", None) or []:
        key, _, value = item.partition("=")
        if key == "data.root" and value:
            return value
    return DEFAULT_ROOT


def add_run_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--task", required=required, help="lm | mt | cls | cls_hard | coherence (heads list shows all)")
    p.add_argument("--preset", help="smoke | tiny | small | paper (default tiny; a run folder's own config wins)")
    p.add_argument("--config", type=Path, help="YAML/JSON config file applied over the preset")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. train.lr=3e-4 data.root=resources/data")


def _check_config_file(file: Path) -> None:
    """A --config file that exists and holds a mapping: a missing file or bad YAML named with its line."""
    from heads.yamlio import YamlError, read_yaml

    if not file.is_file():
        raise fail(f"--config {file}: {no_file(file)}")
    try:
        data = read_json(file, "JSON") if file.suffix == ".json" else read_yaml(file)
    except YamlError as exc:  # names the file and line: invalid, a key given twice, an alias bomb
        raise fail(f"--config {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise fail(f"--config {file}: holds a {type(data).__name__}, not a mapping of config sections")


DEFAULT_PRESET = "tiny"


def _agrees_with_run(args: argparse.Namespace, run_dir: Path, data: dict) -> None:
    """A run folder's own config.json wins: a --task, --preset or --config that says otherwise is refused rather
    than silently replacing it (a --task or --preset the run already has is accepted: it changes nothing)."""
    where = f"{run_dir} is a run with its own config.json"
    hint = "drop it, or change a key of the run's config with KEY=VALUE"
    if args.task and args.task != data.get("task"):
        raise fail(f"--task {args.task}: {where} (task {data.get('task')!r}); {hint}")
    if args.preset and args.preset != data.get("preset"):
        raise fail(f"--preset {args.preset}: {where} (preset {data.get('preset')!r}); {hint}")
    if getattr(args, "config", None) is not None:
        raise fail(f"--config {args.config}: {where}; {hint}")


def run_config(args: argparse.Namespace, run_dir: Path | None = None):
    """The run configuration: a run folder's own config.json (plus overrides), else task + preset."""
    from heads.config import ConfigError, merge, parse_overrides
    from heads.resolve import check_run, resolve

    try:
        if run_dir is not None and (run_dir / "config.json").exists():
            from heads.resolve import from_dict

            data = read_json(run_dir / "config.json", "a run configuration")
            if not isinstance(data, dict):
                raise fail(f"{run_dir / 'config.json'}: not a run configuration (a {type(data).__name__})")
            _agrees_with_run(args, run_dir, data)
            try:
                cfg = from_dict(data)
            except ConfigError as exc:
                raise fail(f"{run_dir / 'config.json'}: {exc}") from None
            merge(cfg, parse_overrides(args.overrides or []))
            check_run(cfg)
            return cfg
        if not args.task:
            raise fail("--task is required unless the source is a run folder with config.json")
        if args.config is not None:
            _check_config_file(Path(args.config))
        return resolve(args.task, args.preset or DEFAULT_PRESET, args.config, args.overrides)
    except (ConfigError, KeyError) as exc:
        raise fail(f"bad configuration: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None


@dataclass
class Loaded:
    model: Any
    tokenizer: Any
    cfg: Any
    task: Any
    placement: Any  # heads.placement.Placement: the device the model is on and the precision it runs at


def load_for_task(args: argparse.Namespace, head: bool = True) -> Loaded:
    """Model, tokenizer and task configuration for commands that score or evaluate a trained model
    (``head``: the model must have the task's output head; speed and roles measure bare encoders too)."""
    from heads.config import ConfigError
    from heads.env import fix_threads
    from heads.placement import Placement
    from heads.surgery import load
    from heads.tasks import get_task
    from heads.tasks.text import saved_tokenizer

    if args.source in SHIPPED:  # the config names the data root it is cached in
        cfg = run_config(args, None)
        model_dir, run_dir = resolve_source(args.source, cfg.data.root), None
    else:
        model_dir = resolve_source(args.source)
        run_dir = model_dir.parent if model_dir == Path(args.source) / "model" else None
        cfg = run_config(args, run_dir)
    try:  # the run's train.device and train.precision (auto: a GPU where there is one, so a GPU-trained run
        # is analysed on a CPU machine too)
        placement = Placement.of(cfg.train)
    except ConfigError as exc:
        raise fail(f"bad configuration: {exc}") from None
    model = load(model_dir).to(placement.device)
    fix_threads(getattr(args, "threads", None) or cfg.train.threads, cfg.train.deterministic, placement.device)
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


def add_pair_arguments(p: argparse.ArgumentParser) -> None:
    """A pruned model and the unpruned reference it came from, trained on one split (``heads memory``, ``clock``);
    the caller adds its own options, then :func:`add_output_arguments`."""
    p.add_argument("source", help="the pruned model's run folder (its config applies), or a model folder with --task")
    add_run_options(p, required=False)
    p.add_argument("--reference", required=True, help="the unpruned model it came from (run or model folder)")


def add_output_arguments(p: argparse.ArgumentParser, split: str = "train") -> None:
    p.add_argument("--split", default=split, help=f"examples the steps train on (default {split})")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)


def load_pair(args: argparse.Namespace, command: str):
    """``(loaded, reference, examples)`` of a pruned model (``args.source``, its run's task and config), the
    unpruned ``args.reference`` on the same device, and ``args.split``'s examples: one model before and after
    pruning, or a clear error."""
    from heads.surgery import load

    check_split(args.split)
    check_out_file(args.out)
    loaded = load_for_task(args)
    reference = load(resolve_source(args.reference, loaded.cfg.data.root)).to(loaded.placement.device)
    if type(reference) is not type(loaded.model):
        raise fail(f"{command}: {args.reference} is a {type(reference).__name__}, {args.source} a "
                   f"{type(loaded.model).__name__}: not one model before and after pruning")
    examples = loaded.task.examples(loaded.cfg, loaded.tokenizer, args.split)
    if not examples:
        raise fail(f"{command}: the {args.split} split of {loaded.cfg.task} has no examples")
    return loaded, reference, examples


def scoring_batches(loaded: Loaded, split: str, n: int) -> list[dict]:
    """The first ``n`` batches of a split, in fixed order (the data every scorer sees)."""
    from heads.tasks.batching import eval_batches

    check_split(split)
    if n < 1:  # eval_batches reads a limit of 0 as "all": a typo must not score the whole split
        raise fail(f"batches: must be >= 1, got {n}")
    cfg = loaded.cfg
    examples = loaded.task.examples(cfg, loaded.tokenizer, split)
    batches = list(eval_batches(examples, cfg.data.batch_size, loaded.task.collate, n * cfg.data.batch_size))
    if not batches:
        raise fail(f"the {split} split of {cfg.task} has no examples")
    return [loaded.placement.to(b) for b in batches]


def check_corpora(cfg, datasets: list[str], command: str) -> None:
    """Shipped corpora a run of ``cfg`` can be scored or evaluated on: the run reads the offline text, and each
    corpus has the task's columns; refused by name before anything loads or runs."""
    from heads.data.hub import DataError
    from heads.data.prepare import offline_corpus

    if cfg.data.source != "offline":
        raise fail(f"{command}: the shipped corpora are of the offline text; the run reads data.source="
                   f"{cfg.data.source}")
    for name in datasets:
        try:
            offline_corpus(cfg.task, name)
        except DataError as exc:
            raise fail(f"{command}: {exc}") from None


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
            raise fail(f"{command}: the {split} split of {name} has no examples")
        out[name] = [loaded.placement.to(b) for b in found]
    return out


def check_out_file(out: Path | None, lock: bool = True) -> Path | None:
    """A result file's --out, by the one rule of :mod:`heads.outpath` (not a folder, not a run's or model's
    record, not inside a run folder, a symlink or stream written through), checked before any work and, with
    ``lock``, claimed for the command's run (commands decorated with ``writes_outputs``)."""
    from heads.io import OutputConflict
    from heads.outpath import FILE, hold, target

    if out is None:
        return None
    try:
        return hold(out, "", FILE) if lock else target(out, "", FILE)
    except OutputConflict as exc:
        raise fail(str(exc)) from None


def claim_out(out: Path, command: str, kind: str, part: str | None = None) -> Path:
    """A folder or file output of ``command`` (``heads.outpath``'s kinds), checked and claimed by the one rule of
    :mod:`heads.outpath` until the command ends (only ``part`` of a folder, where the command writes just that);
    the path to write (a symlink followed)."""
    from heads.io import OutputConflict
    from heads.outpath import hold

    try:
        return hold(out, "", kind, part)
    except OutputConflict as exc:
        raise fail(f"{command}: {exc}") from None


def check_split(split: str) -> str:
    from heads.config import SPLITS

    if split not in SPLITS:
        raise fail(f"--split: {split!r} is not one of {list(SPLITS)}")
    return split


def parse_params(items: list[str]) -> dict:
    from heads.config import ConfigError, parse_overrides

    try:
        return parse_overrides(items or [])
    except ConfigError as exc:
        raise fail(str(exc)) from None


def add_identity_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", dest="identity", type=_identity, default=None, metavar="JSON",
                   help="what this output is on the run sheet (label, variant, arm, ...): recorded under 'run'")


def _identity(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--run takes a JSON object ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--run takes a JSON object, got {text!r}")
    return value


def with_identity(args: argparse.Namespace, result: dict) -> dict:
    """``result`` with the run-sheet identity (``--run``) under ``run``, when one was given."""
    identity = getattr(args, "identity", None)
    return result if identity is None else {"run": identity, **result}


class PhaseClock:
    """Seconds per phase of a command, each announced on stderr as it starts and ends: a job killed at its
    timeout (a GPU visit's part) leaves in its log how far it got and what took the time."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.record: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        print(f"{self.command}: {phase} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        yield
        self.record[phase] = round(time.perf_counter() - start, 3)
        print(f"{self.command}: {phase} done in {self.record[phase]:.1f} s", file=sys.stderr, flush=True)
