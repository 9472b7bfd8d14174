"""Shared pieces of the commands: their arguments, and library refusals as one-line errors (the model for a
task is :mod:`heads.loading`'s)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from heads import loading
from heads.loading import Loaded, LoadError
from heads.shipped import DEFAULT_ROOT


class UserError(SystemExit):
    """Bad input: its one-line message goes to stderr (printed by ``main``), the exit status is 2."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = 2  # str(self) stays the message; the interpreter exits with 2 and prints nothing more


def fail(message: str) -> UserError:
    return UserError(f"heads: {message}")


@contextmanager
def user_errors() -> Iterator[None]:
    """A library refusal (:class:`heads.loading.LoadError`) as the command's one-line ``UserError``, worded as
    the library words it."""
    try:
        yield
    except LoadError as exc:
        raise fail(str(exc)) from None


def one_line(message: str) -> str:
    """A multi-line message (a list of mismatched tensors) as one line."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


def resolve_source(source: str, root: str = DEFAULT_ROOT) -> Path:
    """:func:`heads.loading.resolve_source`, a refusal as the command's one-line error."""
    with user_errors():
        return loading.resolve_source(source, root)


def data_root(args: argparse.Namespace) -> str:
    """The data root a command's ``data.root=`` override (or its overrides file) names (where shipped
    checkpoints are cached), else the default: commands that load a shipped model before (or without) resolving
    a run configuration use it."""
    for item in reversed(getattr(args, "overrides", None) or []):  # the last one given wins, as in the config
        key, _, value = item.partition("=")
        if key == "data.root" and value:
            return value
    root = (overlay(args).get("data") or {}).get("root")
    return str(root) if root else DEFAULT_ROOT


def add_run_options(p: argparse.ArgumentParser, required: bool = True, threads: bool = True) -> None:
    """The options that choose a run configuration (``threads``: also ``--threads``, which sets train.threads;
    a timing command that takes its own leaves it out)."""
    p.add_argument("--task", required=required, help="lm | mt | cls | cls_hard | coherence (heads list shows all)")
    p.add_argument("--preset", help="smoke | tiny | small | paper (default tiny; a run folder's own config wins)")
    p.add_argument("--config", type=Path, help="YAML/JSON config file applied over the preset")
    p.add_argument("--overrides-file", type=Path, metavar="JSON",
                   help="config sections laid over the preset, or over a run folder's own config.json, as KEY=VALUE "
                        "would (which win over it), their types kept: what a workflow job is handed")
    if threads:
        p.add_argument("--threads", dest="train_threads", type=int, metavar="N",
                       help="torch threads (train.threads; default the config's)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="e.g. train.lr=3e-4 data.root=resources/data (anywhere after the command; they win over "
                        "the rest)")


def overlay(args: argparse.Namespace) -> dict:
    """The config sections ``--overrides-file`` holds, with ``--threads`` as train.threads; {} without them."""
    file = getattr(args, "overrides_file", None)
    out: dict = {}
    if file is not None:
        with user_errors():
            out = loading.read_overlay(Path(file))
    threads = getattr(args, "train_threads", None)
    if threads is not None:
        if threads < 1:
            raise fail(f"--threads must be >= 1, got {threads}")
        out = {**out, "train": {**(out.get("train") or {}), "threads": threads}}
    return out


def run_config(args: argparse.Namespace, run_dir: Path | None = None):
    """The run configuration of ``--task``, ``--preset``, ``--config``, ``--overrides-file`` and the overrides
    (a run folder's own config.json wins): :func:`heads.loading.run_config`."""
    with user_errors():
        return loading.run_config(args.task, args.preset, getattr(args, "config", None), args.overrides, run_dir,
                                  overlay(args))


def load_for_task(args: argparse.Namespace, head: bool = True) -> Loaded:
    """Model, tokenizer and task configuration of ``args.source`` for commands that score or evaluate a trained
    model (``head``: the model must have the task's output head): :func:`heads.loading.model_for_task`."""
    with user_errors():
        return loading.model_for_task(args.source, args.task, args.preset, getattr(args, "config", None),
                                      args.overrides, head=head, threads=getattr(args, "threads", None),
                                      overlay=overlay(args))


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
    check_split(args.split)
    check_out_file(args.out)
    loaded = load_for_task(args)
    with user_errors():
        reference = loading.load_reference(loaded, args.reference, args.source, command)
        return loaded, reference, loading.split_examples(loaded, args.split, command)


def scoring_batches(loaded: Loaded, split: str, n: int) -> list[dict]:
    """:func:`heads.loading.scoring_batches` of a checked ``--split``."""
    check_split(split)
    with user_errors():
        return loading.scoring_batches(loaded, split, n)


def check_corpora(cfg, datasets: list[str], command: str) -> None:
    with user_errors():
        loading.check_corpora(cfg, datasets, command)


def domain_batches(loaded: Loaded, datasets: list[str], split: str, n: int, command: str) -> dict[str, list[dict]]:
    with user_errors():
        return loading.domain_batches(loaded, datasets, split, n, command)


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
