"""``heads plan``: what a preset's DAG costs (runs, FLOPs, GPU-hours, memory, disk) before anything runs.

The CPU minutes measured on this machine and the GPU visit's part-by-part estimate are the repository's
logistics, not the library's: ``python -m tools.plan`` (tools/plan.py) prints this plan and those beside it.
"""

from __future__ import annotations

import argparse
import json

from heads.cli.common import fail


def markdown(plan) -> str:
    """The plan as a Markdown table per task and in all, the analyses by command, and the assumptions."""
    from heads.plan import table

    g = plan.gpu
    lines = [
        f"## Cost of the {plan.preset} preset on {g.name} "
        f"({g.tflops:g} TFLOP/s dense bf16, {g.memory_gib:g} GiB; MFU {plan.mfu:g})",
        "",
        *table(plan),
        "",
        "Analysis jobs: " + "; ".join(
            f"{name} " + ", ".join(f"{c} {n}" for c, n in sorted(t.analyses.items()))
            for name, t in plan.tasks.items() if t.analyses),
        "",
        *([f"The preset trains at train.precision {', '.join(plan.precisions)}: GPU-hours assume bf16 throughput "
           "(set train.precision=bf16); memory follows the preset's precision.", ""]
          if plan.precisions != ["bf16"] else []),
        "Assumptions:",
        "",
        *(f"- {a}" for a in plan.assumptions),
    ]
    return "\n".join(lines)


def costed(args: argparse.Namespace):
    """The plan ``args`` ask for (the options :func:`add_options` adds); a preset, GPU or MFU it cannot cost is
    a one-line refusal."""
    from heads.plan import PlanError, plan

    try:
        return plan(args.preset, args.gpu, args.mfu, args.replications)
    except PlanError as exc:
        raise fail(f"plan: {exc}") from None


def cmd_plan(args: argparse.Namespace) -> int:
    result = costed(args)
    print(json.dumps(result.to_dict(), indent=2) if args.format == "json" else markdown(result))
    return 0


def add_options(p: argparse.ArgumentParser) -> None:
    """The plan's options (tools/plan.py adds its own to the same)."""
    from heads.plan import DEFAULT_GPU, DEFAULT_MFU, GPUS  # the table and defaults only: no torch at parse time

    p.add_argument("--preset", default="tiny", help="smoke | tiny | small | paper (default tiny)")
    p.add_argument("--gpu", default=DEFAULT_GPU,
                   help=f"GPU class for GPU-hours and memory fit: {', '.join(GPUS)} (default {DEFAULT_GPU})")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU,
                   help=f"assumed model-FLOPs utilisation, 0-1 (default {DEFAULT_MFU})")
    p.add_argument("--format", default="md", choices=["md", "json"], help="Markdown table or JSON (default md)")
    p.add_argument("--replications", default="replications",
                   help="the replications folder whose run sheet is costed (default replications)")


def register(sub) -> None:
    p = sub.add_parser("plan", help="what a preset's DAG costs: runs, FLOPs, GPU-hours, memory, disk")
    add_options(p)
    p.set_defaults(func=cmd_plan)
