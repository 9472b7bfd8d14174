"""Whole-DAG wall-clock: the smoke DAG in a fresh copy of the repository, and the no-op rerun of an
up-to-date DAG (smoke, and tiny when its outputs are present), against the targets of the issue
(tiny <= 45 min is measured by a real `snakemake --cores 2` run and passed in with --tiny-seconds).
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--no-smoke", action="store_true", help="skip the fresh smoke run (minutes)")
    args = p.parse_args()

    entries, rows = {}, []
    if not args.no_smoke:
        with tempfile.TemporaryDirectory() as tmp:
            repo = copy_repo(Path(tmp))
            smoke = snakemake(repo, "--cores", str(args.cores), "--config", "preset=smoke")
            noop = snakemake(repo, "--cores", str(args.cores), "--config", "preset=smoke")
        entries["dag.smoke.wall_s"] = entry(round(smoke, 1), None, None, "seconds, fresh copy, data prep included")
        entries["dag.smoke.noop_rerun_s"] = entry(round(noop, 2), None, None, "seconds, nothing to do")
        rows += [f"| smoke, fresh | {smoke:.0f} s |", f"| smoke, no-op rerun | {noop:.1f} s |"]
    if (ROOT / "results/CLAIMS.md").exists():
        tiny_noop = snakemake(ROOT, "--cores", str(args.cores))
        entries["dag.tiny.noop_rerun_s"] = entry(
            round(tiny_noop, 2), None, None, "seconds, snakemake on the up-to-date tiny DAG (nothing to do)"
        )
        rows.append(f"| tiny, no-op rerun | {tiny_noop:.1f} s |")
    if args.tiny_seconds:
        minutes = args.tiny_seconds / 60
        entries["dag.tiny.wall_min"] = entry(round(minutes, 1), 45, minutes <= 45, "minutes on 2 cores")
        rows.append(f"| tiny, full run (measured by `snakemake --cores 2`) | {minutes:.1f} min (target 45) |")
    text = "# Whole-DAG wall-clock\n\n| run | wall-clock |\n| --- | --- |\n" + "\n".join(rows) + "\n"
    write_text(args.out, text)
    update_summary(args.summary, entries)
    print(text)


if __name__ == "__main__":
    main()
