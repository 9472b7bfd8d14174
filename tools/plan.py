"""``python -m tools.plan``: ``heads plan``'s estimate of a preset, with this repository's logistics beside it.

* ``--cpu-from PRESET`` (with ``--logs``, ``--runs``, ``--cores``): each replication in CPU minutes, calibrated
  on the jobs of PRESET this machine ran (:mod:`tools.cpu_cost`);
* ``--visits ARCHIVE...`` (at the ``gpu`` preset by default from ``results/gpu/visits/*.tar.gz``): the next GPU
  visit part by part, from what earlier visits measured (:mod:`tools.visit`).

The options ``heads plan`` takes mean the same here, and its output comes first, unchanged::

    python -m tools.plan --preset small --cpu-from tiny --cores 2
    python -m tools.plan --preset gpu --visits results/gpu/visits/*.tar.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from heads.cli.common import UserError, one_line
from heads.cli.plan import add_options, markdown
from tools.visit import BUDGET_S, RESERVE_S

PROG = "python -m tools.plan"


def fail(message: str) -> UserError:
    """A one-line refusal (exit status 2), naming this command."""
    return UserError(f"tools.plan: {message}")


def visit_markdown(parts, start: float | None, visits: list[str], budget: float, reserve: float) -> str:
    """The GPU visit part by part: each part's estimate against its cap, and what the estimate rests on."""
    lines = [f"## The GPU visit, part by part (from {', '.join(visits) if visits else 'no visit yet'})", "",
             "| part | jobs | estimate, s | cap, s | fits | basis (slowest job of each kind) |",
             "|---|--:|--:|--:|---|---|"]
    used = start or 0.0
    for part in parts:
        cap = part.cap_s if part.cap_s is not None else budget - reserve - used
        if part.skipped:
            lines.append(f"| {part.name} | {len(part.jobs)} | - | {cap:.0f} | skipped | {part.skipped} |")
            continue
        fits = "?" if part.seconds is None else ("yes" if part.seconds <= cap else "no")
        bases: dict[str, str] = {}
        for j in sorted(part.jobs, key=lambda j: -(j.seconds or 0.0)):
            bases.setdefault(j.kind, j.basis)
        lines.append(f"| {part.name} | {len(part.jobs)} | "
                     f"{'unknown' if part.seconds is None else f'{part.seconds:.0f}'} | "
                     f"{cap:.0f}{'' if part.cap_s is not None else ' (left)'} | {fits} | "
                     + "; ".join(f"{k}: {b}" for k, b in bases.items()) + " |")
        if part.cap_s is not None:  # a part ends by its cap at the latest; scratch runs only if it fits
            used += cap if part.seconds is None else min(part.seconds, cap)
        elif part.seconds is not None and part.seconds <= cap:
            used += part.seconds
    unknown = sorted({k for p in parts for k in p.unknown})
    lines += ["", f"Start-up before the parts: {'unknown' if start is None else f'{start:.0f} s'} (the latest "
              "visit's elapsed time less its parts'). " + (
                  f"In all {used:.0f} s of the {budget:g} s budget ({reserve:g} s kept back)."
                  if not unknown and start is not None else
                  f"In all: unknown; no visit measured {', '.join(unknown) or 'the start-up'} as the sheet runs "
                  "it now, so whether the visit fits its budget is not known until one does."), ""]
    return "\n".join(lines)


def _visit(args: argparse.Namespace):
    """The visit's part-by-part estimate for ``args.preset`` from the archives ``args.visits`` (default: every
    archive in results/gpu/visits, oldest first, at the gpu preset)."""
    from heads.config import ConfigError
    from heads.sheet import build, preset_settings
    from tools.visit import TASK, estimate, read_visit

    paths = args.visits
    if paths is None:
        if args.preset != "gpu":
            return None
        paths = sorted(Path("results/gpu/visits").glob("*.tar.gz"))
    visits = []
    for p in paths:
        try:
            visits.append(read_visit(Path(p)))
        except (tarfile.TarError, EOFError, zlib.error):  # not a tar at all, or one cut short
            raise fail(f"--visits {p}: not a visit's archive (a .tar.gz or a folder), or one cut short") from None
        except (OSError, ValueError) as exc:
            raise fail(f"--visits: {one_line(exc)}") from None
    try:
        sheet = build(args.replications, preset_settings(args.replications, args.preset, None))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    entries = [e for e in sheet.runs.values() if e.task == TASK]
    if not entries:
        raise fail(f"the {args.preset} preset runs no {TASK} job for a visit to estimate")
    parts, start = estimate(entries, visits, args.preset)
    return parts, start, visits


def run(args: argparse.Namespace) -> int:
    from heads.config import ConfigError
    from heads.plan import PlanError, plan
    from tools import cpu_cost

    if args.cores < 1:  # the CPU minutes divide by it
        raise fail(f"--cores must be >= 1, got {args.cores}")
    given = [name for name, value in (("--logs", args.logs), ("--runs", args.runs)) if value is not None]
    if given and not args.cpu_from:  # read only to calibrate: without it the plan would ignore them unsaid
        raise fail(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} read only to calibrate the CPU "
                   f"minutes on a preset's measured jobs: add --cpu-from PRESET, or drop {' and '.join(given)}")
    try:
        result = plan(args.preset, args.gpu, args.mfu, args.replications)
    except PlanError as exc:
        raise fail(str(exc)) from None
    cpu = None
    if args.cpu_from:
        try:
            calibration = cpu_cost.calibrate(args.cpu_from, args.logs or "logs", args.replications, args.runs)
            cpu = (calibration, cpu_cost.cost(args.preset, calibration, args.replications))
        except (PlanError, ConfigError) as exc:
            raise fail(one_line(exc)) from None
    visit = _visit(args)
    if args.format == "json":
        data = result.to_dict()
        if visit is not None:
            parts, start, visits = visit
            data["visit"] = {"from": [v.name for v in visits], "devices": [v.device for v in visits],
                             "start_s": start, "budget_s": BUDGET_S, "reserve_s": RESERVE_S,
                             "parts": [{**asdict(p), "unknown": p.unknown} for p in parts]}
        if cpu is not None:
            data["cpu"] = {"calibrated_on": args.cpu_from, "start_s": cpu[0].start_s, "cores": args.cores,
                           "replications": {c.name: {"jobs": c.jobs, "core_minutes": c.core_s / 60,
                                                     "minutes": c.minutes(args.cores), "longest": list(c.longest)}
                                            for c in cpu[1]}}
        print(json.dumps(data, indent=2))
    else:
        print(markdown(result))
        if cpu is not None:
            print("\n" + cpu_cost.markdown(args.preset, cpu[0], cpu[1], args.cores), end="")
        if visit is not None:
            print("\n" + visit_markdown(visit[0], visit[1], [v.label for v in visit[2]], BUDGET_S, RESERVE_S), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="heads plan's estimate of a preset, with the CPU minutes "
                                "on this machine and the GPU visit's parts beside it (run from the repository root)")
    add_options(p)
    p.add_argument("--cpu-from", metavar="PRESET",
                   help="also cost each replication in CPU minutes, calibrated on the jobs of PRESET this machine "
                        "ran (their Snakemake benchmark files under --logs)")
    p.add_argument("--logs", help="where the workflow's logs are (default logs)")
    p.add_argument("--runs", help="the run tree the --cpu-from jobs wrote (e.g. results/small/runs): each training "
                   "job is costed by the config.json it ran with, not by what the preset says now")
    p.add_argument("--cores", type=int, default=2, help="cores for the CPU minutes (default 2)")
    p.add_argument("--visits", nargs="*", metavar="ARCHIVE",
                   help="also estimate the GPU visit (benchmarks/gpu_evidence.py) part by part from these visits' "
                        "archives, oldest first (default at the gpu preset: results/gpu/visits/*.tar.gz)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run, and turn a bad input into one line on stderr and exit status 2, as ``heads`` does."""
    from heads.config import ConfigError
    from heads.io import InputError

    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(one_line(exc), file=sys.stderr)
        raise
    except (ConfigError, InputError) as exc:
        print(f"tools.plan: {one_line(exc)}", file=sys.stderr)
        raise UserError(f"tools.plan: {one_line(exc)}") from None
    except OSError as exc:  # a file it reads (a run's config.json, a log) unreadable: the path and why
        message = f"tools.plan: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}"
        print(message, file=sys.stderr)
        raise UserError(message) from None


if __name__ == "__main__":
    sys.exit(main())
