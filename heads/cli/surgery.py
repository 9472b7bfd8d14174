"""``heads inspect``: sites, layout, parameters and FLOPs of a checkpoint."""

from __future__ import annotations

import argparse
import json

from heads.cli.common import resolve_source
from heads.loading import SHIPPED


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


def register(sub) -> None:
    p = sub.add_parser("inspect", help="sites, head layout, parameters and FLOPs of a checkpoint")
    p.add_argument(
        "source", help=f"checkpoint or run folder, or one of: {', '.join(f'{k} ({v})' for k, v in SHIPPED.items())}"
    )
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence for FLOP counts (default 128)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=cmd_inspect)
