"""``heads data prepare``, ``heads train``, ``heads evaluate``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from heads import loading
from heads.cli.common import (
    add_identity_option,
    add_run_options,
    check_out_file,
    check_split,
    fail,
    load_for_task,
    run_config,
    user_errors,
)
from heads.env import with_environment
from heads.outpath import writes_outputs


def _pairs(items: list[str] | None, option: str) -> dict[str, str | None]:
    """``["src=translation.de"]`` -> {"src": "translation.de"}; an empty value or ``null`` is None."""
    out: dict[str, str | None] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"data prepare: {option} {item!r} is not KEY=VALUE")
        out[key.strip()] = None if value.strip() in ("", "null") else value.strip()
    return out


def _data_overrides(args: argparse.Namespace) -> list[str]:
    """The hub options as ``data.*`` overrides (for --preset, resolved like a run's)."""
    out = [f"data.{k}={v}" for k in ("dataset", "config", "revision") if (v := getattr(args, k)) is not None]
    out += [f"data.columns.{k}={'null' if v is None else v}" for k, v in _pairs(args.column, "--column").items()]
    out += [f"data.splits.{k}={v}" for k, v in _pairs(args.split, "--split").items()]
    if args.labels:
        out.append(f"data.labels=[{', '.join(args.labels)}]")
    return out


def cmd_data_prepare(args: argparse.Namespace) -> int:
    """Prepare data (and, with --preset, the preset's tokenizer too, so parallel jobs never race to train it)."""
    from heads.data.prepare import prepare, prepare_for

    if args.limit is not None and args.limit < 1:
        raise fail(f"data prepare: --limit must be >= 1 rows per split, got {args.limit}")
    hub_options = _data_overrides(args)
    if (args.overrides or args.overrides_file) and not args.preset:
        raise fail("data prepare: KEY=VALUE overrides and --overrides-file apply with --preset (they change a "
                   "preset's run config)")
    with user_errors():
        overlay = loading.read_overlay(args.overrides_file) if args.overrides_file else None
    if hub_options and len(args.task) != 1:
        raise fail("data prepare: --dataset, --config, --column, --split, --labels and --revision describe one "
                   f"task's data; pass one --task (got {args.task})")
    for task in args.task:
        if args.preset:
            from heads.config import ConfigError
            from heads.resolve import resolve
            from heads.tasks import get_task

            source = [f"data.source={args.source}"] if args.source != "offline" else []  # else: the preset's
            try:
                cfg = resolve(task, args.preset, None,
                              [f"data.root={args.root}", *source, *hub_options, *(args.overrides or [])], overlay)
            except ConfigError as exc:
                raise fail(f"bad configuration: {exc}") from None
            task_obj = get_task(task)
            path = prepare_for(task, cfg.data)
            task_obj.tokenizer(cfg)
        else:
            path = prepare(
                task,
                source=args.source,
                root=args.root,
                limit=args.limit,
                hub_path=args.hub_path,
                dataset=args.dataset,
                config=args.config,
                columns=_pairs(args.column, "--column"),
                splits=_pairs(args.split, "--split"),
                labels=args.labels,
                revision=args.revision,
            )
        print(f"{task}: {path}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from heads.run import RunConflict, train_run
    from heads.train.loop import NonFiniteLoss

    cfg = run_config(args)
    if args.identity is not None:
        cfg.run = args.identity
    try:
        summary = train_run(cfg, args.out)
    except RunConflict as exc:
        raise fail(f"train: {exc}") from None
    except NonFiniteLoss as exc:
        # The run is over and says so in summary.json (status "diverged"); the report marks it failed
        # instead of the workflow dropping it. Exit 0 so a DAG run goes on to render that.
        print(f"heads train: {exc}", file=sys.stderr)
        return 0
    if "rank" in summary:  # a distributed run's other ranks: rank 0 writes and reports the run
        return 0
    print(json.dumps({k: summary[k] for k in ("status", "metric", "value", "steps", "train_seconds")}, indent=2))
    return 0


@writes_outputs
def cmd_evaluate(args: argparse.Namespace) -> int:
    from heads import examples
    from heads.io import is_stream, write_json

    split = check_split(args.split) if args.split else None
    check_out_file(args.out)
    beside = None  # a stream (/dev/stdout, a pipe) has no folder to put the columns beside it in
    if args.out and not is_stream(args.out):
        beside = check_out_file(examples.path_beside(Path(args.out)), lock=False)
    loaded = load_for_task(args)
    with loaded.placement.autocast():
        result, columns = examples.split_off(
            loaded.task.evaluate(loaded.model, loaded.cfg, loaded.tokenizer, split or loaded.cfg.eval.split))
    if beside is not None:
        if columns is not None:  # NAME.examples.json beside NAME.json, written first: the result marks it done
            write_json(beside, examples.record(columns, result))
        else:
            beside.unlink(missing_ok=True)  # an earlier evaluation's columns would not be this one's
    if args.out:
        write_json(args.out, with_environment(result, loaded.model))
    print(json.dumps(result, indent=2))
    return 0


def register(sub) -> None:
    p = sub.add_parser("data", help="prepare datasets (offline corpora or hub datasets)")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    q = data_sub.add_parser("prepare", help="write a task's data once (Arrow + checksum) under --root")
    q.add_argument("--task", nargs="+", default=["lm", "mt", "cls"], help="tasks to prepare (default all)")
    q.add_argument("--source", default="offline", choices=["offline", "hub"])
    q.add_argument("--root", type=Path, default=Path("resources/data"))
    q.add_argument("--limit", type=int, help="at most this many rows per split")
    q.add_argument("--hub-path", help="a local folder in the hub's format instead of the hub id")
    q.add_argument("--dataset", help="hub: a preset, a hub id, a local folder in hub layout, or one data file")
    q.add_argument("--config", help="hub: the dataset's configuration (glue: mrpc, sst2, mnli)")
    q.add_argument("--column", action="append", metavar="OURS=THEIRS",
                   help="task column <- dataset column (src=translation.de; text_b= for one text); repeatable")
    q.add_argument("--split", action="append", metavar="OURS=THEIRS",
                   help="our split <- the dataset's, optionally sliced (test=validation, validation=train[-5%%:])")
    q.add_argument("--labels", nargs="+", help="cls: label names in id order (default: read from the data)")
    q.add_argument("--revision", help="hub: branch, tag or commit of the dataset repository")
    q.add_argument("--preset", help="prepare what this preset's runs use (data source, limit, tokenizer)")
    q.add_argument("--overrides-file", type=Path, metavar="JSON",
                   help="with --preset: run-config sections laid over the preset (KEY=VALUE wins over it)")
    q.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="with --preset: run-config overrides (a user's model.source, data.*), as a run would take them")
    q.set_defaults(func=cmd_data_prepare)

    p = sub.add_parser("train", help="train one run (resumes from its checkpoint; a finished run is not redone)")
    add_run_options(p)
    p.add_argument("--out", type=Path, required=True, help="run folder: config, metrics, checkpoint, model, summary")
    add_identity_option(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="evaluate a saved model on a split with the task metric")
    p.add_argument("source", help="run folder (its config applies) or model folder (with --task)")
    add_run_options(p, required=False)
    p.add_argument("--split", help="validation | test (default from the config)")
    p.add_argument("--out", type=Path, help="also write the result JSON here")
    p.set_defaults(func=cmd_evaluate)
