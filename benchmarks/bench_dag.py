"""Whole-DAG wall-clock: the smoke DAG in a fresh copy of the repository and its no-op rerun (with --tiny-noop, the tiny
DAG's in an up-to-date checkout, --tree), against the targets of the issue
(tiny <= 45 min is measured by a real `snakemake --cores 2` run and passed in with --tiny-seconds; each
replication's small target, <= 150 min, likewise with --small NAME=SECONDS; the pretrained target, <= 150 min,
with --pretrained SECONDS; its translation part, <= 60 min, with --translation SECONDS; README's first command,
the default run on real models from a fresh clone, <= 90 min, with --default SECONDS). dag.md lists every
`dag.*` entry summary.json holds, so a later call that measures one thing keeps the others' rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import entry, update_summary

from heads.io import write_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from smoke_dag import copy_repo  # noqa: E402  (the slow tests' fresh copy of the repository, shared)


def snakemake(cwd: Path, *args: str) -> float:
    started = time.perf_counter()
    run = subprocess.run(["snakemake", *args], cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed in {cwd}:\n{(run.stdout + run.stderr)[-3000:]}")
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, default=ROOT / "results/bench/dag.md")
    p.add_argument("--summary", type=Path, default=ROOT / "results/bench/summary.json")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--tiny-seconds", type=float, help="measured wall-clock of the full tiny run, if known")
    p.add_argument("--small", nargs="+", default=[], metavar="NAME=SECONDS",
                   help="measured wall-clock of `snakemake --cores 2 NAME --config preset=small`, per replication")
    for flag, (_, _, command) in WHOLE_RUNS.items():
        p.add_argument(f"--{flag}", type=float, metavar="SECONDS", help=f"measured wall-clock of {command}")
    p.add_argument("--jobs", type=Path, metavar="BENCHMARKS",
                   help="a run's job benchmark folder (logs/<stage>/benchmarks): where its time went, job kind by job "
                   "kind, written beside --out as dag_jobs_<stage>.md")
    p.add_argument("--conditions", default="",
                   help="how the --small, --pretrained or --translation runs were measured (kept)")
    p.add_argument("--no-smoke", action="store_true", help="skip the fresh smoke run (minutes)")
    p.add_argument("--tiny-noop", action="store_true",
                   help="time `snakemake --cores N` on an up-to-date tiny tree (refused if it has work to do)")
    p.add_argument("--tree", type=Path, default=ROOT,
                   help="the checkout whose tiny DAG --tiny-noop times (default this one)")
    args = p.parse_args()

    entries = {}
    if not args.no_smoke:
        with tempfile.TemporaryDirectory() as tmp:
            repo = copy_repo(Path(tmp))
            smoke = snakemake(repo, "--cores", str(args.cores), "--config", "preset=smoke")
            noop = snakemake(repo, "--cores", str(args.cores), "--config", "preset=smoke")
        entries["dag.smoke.wall_s"] = entry(round(smoke, 1), None, None, "seconds, fresh copy, data prep included")
        entries["dag.smoke.noop_rerun_s"] = entry(round(noop, 2), None, None, "seconds, nothing to do")
    if args.tiny_noop:
        # a dry run first: on a tree with work to do, the timed call would run the tiny DAG for real (once it did,
        # for 12 minutes, over a checkout's committed results)
        dry = subprocess.run(["snakemake", "-n", "--cores", str(args.cores)], cwd=args.tree, capture_output=True,
                             text=True)
        if dry.returncode != 0 or "Nothing to be done" not in dry.stdout + dry.stderr:
            raise SystemExit(f"--tiny-noop: the tiny DAG in {args.tree} is not up to date (snakemake -n has work "
                             "to do); run it first, or name an up-to-date checkout with --tree")
        tiny_noop = snakemake(args.tree, "--cores", str(args.cores))
        entries["dag.tiny.noop_rerun_s"] = entry(
            round(tiny_noop, 2), None, None, "seconds, snakemake on the up-to-date tiny DAG (nothing to do)"
        )
    if args.tiny_seconds:
        minutes = args.tiny_seconds / 60
        entries["dag.tiny.wall_min"] = entry(round(minutes, 1), 45, minutes <= 45, "minutes on 2 cores")
    for item in args.small:
        name, _, seconds = item.partition("=")
        try:
            minutes = float(seconds) / 60
        except ValueError:
            raise SystemExit(f"--small {item!r}: give NAME=SECONDS (e.g. michel2019=8400)") from None
        extra = {"conditions": args.conditions} if args.conditions else {}
        entries[f"dag.small.{name}.wall_min"] = entry(round(minutes, 1), SMALL_TARGET_MIN,
                                                      minutes <= SMALL_TARGET_MIN, "minutes on 2 cores", **extra)
    for flag, (key, target, _) in WHOLE_RUNS.items():
        seconds = getattr(args, flag)
        if seconds:
            extra = {"conditions": args.conditions} if args.conditions else {}
            entries[key] = entry(round(seconds / 60, 1), target, seconds / 60 <= target, "minutes on 2 cores", **extra)
    update_summary(args.summary, entries)
    text = render(json.loads(args.summary.read_text()))
    write_text(args.out, text)
    print(text)
    if args.jobs:
        stage = args.jobs.parent.name
        by_kind = job_costs(args.jobs)
        if not by_kind:
            raise SystemExit(f"--jobs {args.jobs}: no job benchmark files (*.tsv) there")
        jobs = render_jobs(by_kind, stage, args.conditions)
        write_text(args.out.parent / f"dag_jobs_{stage}.md", jobs)
        print(jobs)


def job_costs(folder: Path) -> dict[str, list[float]]:
    """Each job kind's wall-clock seconds, from Snakemake's benchmark files under ``folder``: a kind is the job's
    path with its seed (the last part) dropped, so the shards or replicates of one measurement are one kind."""
    import csv

    out: dict[str, list[float]] = {}
    for path in sorted(folder.rglob("*.tsv")):
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        if rows:
            kind = str(path.relative_to(folder).parent) if path.stem.startswith("seed") else \
                str(path.relative_to(folder).with_suffix(""))
            out.setdefault(kind, []).append(float(rows[-1]["s"]))
    return out


def render_jobs(by_kind: dict[str, list[float]], stage: str, conditions: str = "") -> str:
    """Where a run's time went: per job kind, its jobs, their minutes of one core in all, median and longest."""
    from statistics import median

    total = sum(sum(v) for v in by_kind.values())
    rows = [f"| `{kind}` | {len(v)} | {sum(v) / 60:.1f} | {median(v) / 60:.1f} | {max(v) / 60:.1f} | "
            f"{100 * sum(v) / total:.0f} |" for kind, v in sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))]
    said = f" {conditions}" if conditions else ""
    return (f"# Where the {stage} run's time went\n\nEach job kind of the run (its jobs' benchmark files, "
            f"logs/{stage}/benchmarks/; a kind's shards or replicates together), costliest first: "
            f"{sum(len(v) for v in by_kind.values())} jobs, {total / 60:.1f} minutes of a core in all.{said}\n\n"
            "| job kind | jobs | minutes in all | median | longest | % of all |\n"
            "| --- | --: | --: | --: | --: | --: |\n" + "\n".join(rows) + "\n")


SMALL_TARGET_MIN = 150
TRANSLATION_TARGET_MIN = 60
DEFAULT_TARGET_MIN = 90
# the whole runs timed by hand and passed in (flag -> summary key, target in minutes, what was timed)
WHOLE_RUNS = {
    "pretrained": ("dag.pretrained.wall_min", SMALL_TARGET_MIN,
                   "`snakemake --cores 2 pretrained --config preset=pretrained`, from nothing"),
    "translation": ("dag.pretrained.translation.wall_min", TRANSLATION_TARGET_MIN,
                    "`snakemake --cores 2 michel2019 voita2019 --config preset=pretrained` (the translation claims on "
                    "the shipped Bergamot model), from nothing"),
    "default": ("dag.quick.wall_min", DEFAULT_TARGET_MIN,
                "README's first command in a fresh clone: the install, then `snakemake --cores 2` (the quick preset on "
                "SmolLM2 and Bergamot), from nothing"),
}
LABELS = {"dag.smoke.wall_s": "smoke, fresh copy", "dag.smoke.noop_rerun_s": "smoke, no-op rerun",
          "dag.tiny.noop_rerun_s": "tiny, no-op rerun",
          "dag.tiny.wall_min": "tiny, full run (`snakemake --cores 2 --config preset=tiny`)",
          "dag.quick.wall_min": "quick, the default run from a fresh clone (README's first command: install, then "
                                "`snakemake --cores 2`)",
          "dag.pretrained.wall_min": "pretrained, from nothing (`snakemake --cores 2 pretrained --config "
                                     "preset=pretrained`)",
          "dag.pretrained.translation.wall_min": "pretrained, translation part, from nothing (`snakemake --cores 2 "
                                                 "michel2019 voita2019 --config preset=pretrained`)"}


def render(summary: dict) -> str:
    """dag.md: one row per ``dag.*`` entry of summary.json (what every call so far measured)."""
    rows = []
    for key, e in sorted((k, v) for k, v in summary.items() if k.startswith("dag.")):
        label = LABELS.get(key) or (f"small, `{key.split('.')[2]}` target (`snakemake --cores 2 {key.split('.')[2]} "
                                    "--config preset=small`)" if key.startswith("dag.small.") else key)
        target = f" (target {e['target']})" if e.get("target") is not None else ""
        note = f" {e['conditions']}" if e.get("conditions") else ""
        rows.append(f"| {label} | {e['measured']} {e['unit']}{target} |{note} |")
    return ("# Whole-DAG wall-clock\n\n| run | wall-clock | conditions |\n| --- | --- | --- |\n"
            + "\n".join(rows) + "\n")

if __name__ == "__main__":
    main()
