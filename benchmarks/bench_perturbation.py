"""Sensitivity of the tiny results to the machine: re-run the runs that decide verdicts under a perturbation.

Another machine differs in the instruction set torch's kernels dispatch to and often in the thread count. This
re-runs the tiny DAG's runs for the chosen replications into a separate run tree (``--runs-out``) with
``ATEN_CPU_CAPABILITY`` forced (``default``: no vector extensions) and another ``threads``, then compares them
with the committed run tree (``--base``): how far each run's numbers moved, and which verdicts of the ledger
changed. ``perturbation.json`` is what ``heads claims --robustness`` reads to mark fragile verdicts.

    python benchmarks/bench_perturbation.py                      # run, then compare (tens of minutes)
    python benchmarks/bench_perturbation.py --compare-only       # compare an existing --runs-out
    python benchmarks/bench_perturbation.py --replications michel2019 --carry results/bench/perturbation.json

``--carry OLD.json`` keeps an earlier measurement of the replications this call does not re-run (their claims,
and their runs' moves summed into the same task and field), saying so in ``carried``: use it only when those
replications' base runs are unchanged since (their untimed numbers equal), so the old comparison still holds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import relative_move, verdict_rows

from heads.io import write_text
from heads.report import RunTree, evaluate_all, load_all

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("value", "final_val_loss", "heads", "params", "time_to_target", "steps_to_target", "redundancy_ratio",
          "max_similarity", "late_improvement", "over_trivial")


def run_dag(out: Path, replications: list[str], capability: str, threads: int, cores: int) -> float:
    """The replications' runs and per-replication claims under the perturbation, into ``out``."""
    targets = [f"{out}/{name}/claims.md" for name in replications]
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    started = time.perf_counter()
    run = subprocess.run(["snakemake", "--cores", str(cores), "--rerun-incomplete", "--config", f"out={out}",
                          f"threads={threads}", "--", *targets], cwd=ROOT, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the perturbed DAG failed:\n{(run.stdout + run.stderr)[-3000:]}")
    return time.perf_counter() - started


def compare_runs(base: RunTree, other: RunTree) -> tuple[list[dict], int, int]:
    """Per (task, field): runs compared, runs whose value moved, the largest relative move and where."""
    index = {r.name: r for r in base.runs if not r.failed}
    moves: dict[tuple[str, str], dict] = {}
    compared = identical = 0
    for run in other.runs:
        ref = index.get(run.name)
        if ref is None or run.failed:
            continue
        compared += 1
        same = True
        for fld in FIELDS:
            a, b = ref.record.get(fld), run.record.get(fld)
            if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
                continue
            cell = moves.setdefault((run.task, fld), {"task": run.task, "field": fld, "runs": 0, "moved": 0,
                                                      "max_rel": 0.0, "where": ""})
            cell["runs"] += 1
            rel = relative_move(float(a), float(b))
            if rel > 0:
                same = False
                cell["moved"] += 1
                if rel > cell["max_rel"]:
                    cell["max_rel"], cell["where"] = rel, f"{run.name}: {a:.6g} -> {b:.6g}"
        identical += same
    return sorted(moves.values(), key=lambda c: (c["task"], c["field"])), compared, identical


def compare_claims(base: RunTree, other: RunTree, replications: list[str]) -> dict[str, dict]:
    claims = [c for c in load_all(ROOT / "replications") if c.replication in replications]
    before = {r.claim.id: r for r in evaluate_all(claims, base)}
    after = {r.claim.id: r for r in evaluate_all(claims, other)}
    return {cid: {"base": before[cid].verdict, "perturbed": after[cid].verdict,
                  "effect_base": before[cid].estimate.mean, "effect_perturbed": after[cid].estimate.mean}
            for cid in before}


def carry(data: dict, old: dict, replications: list[str]) -> dict:
    """``data`` with ``old``'s measurement of the replications ``data`` did not re-run merged in."""
    kept = [name for name in old["perturbation"]["replications"] if name not in replications]
    if not kept:
        return data
    claims = {c.id for c in load_all(ROOT / "replications") if c.replication in kept}
    under = old["perturbation"].get("label")  # a carried verdict names the perturbation it was measured under
    merged = {**data, "claims": {**data["claims"], **{cid: {**c, "under": c.get("under", under)}
                                                      for cid, c in old["claims"].items() if cid in claims}}}
    moves = {(m["task"], m["field"]): dict(m) for m in data["runs"]}
    for m in old["runs"]:
        cell = moves.setdefault((m["task"], m["field"]), {**m, "runs": 0, "moved": 0, "max_rel": 0.0, "where": ""})
        cell["runs"] += m["runs"]
        cell["moved"] += m["moved"]
        if m["max_rel"] > cell["max_rel"]:
            cell["max_rel"], cell["where"] = m["max_rel"], m["where"]
    merged["runs"] = sorted(moves.values(), key=lambda c: (c["task"], c["field"]))
    merged["runs_compared"] = data["runs_compared"] + old["runs_compared"]
    merged["runs_identical"] = data["runs_identical"] + old["runs_identical"]
    merged["carried"] = {"replications": kept, "perturbation": old["perturbation"],
                         "runs_compared": old["runs_compared"], "runs_identical": old["runs_identical"]}
    merged["perturbation"] = {**data["perturbation"], "replications": [*replications, *kept]}
    return merged


def markdown(data: dict) -> str:
    p = data["perturbation"]
    flipped = [cid for cid, c in data["claims"].items() if c["base"] != c["perturbed"]]
    lines = [
        "# Perturbation: the tiny results on an imitated other machine",
        "",
        f"Perturbation: {p['label']} (`ATEN_CPU_CAPABILITY={p['capability']}`, `threads={p['threads']}`), "
        f"replications {', '.join(p['replications'])}; base: `{p['base']}` (its own capability "
        f"{p['base_capability']}, 1 thread). Runs compared: {data['runs_compared']}, bit-identical in every field "
        f"below: {data['runs_identical']}. Verdicts changed: {len(flipped)} of {len(data['claims'])}"
        + (f" ({', '.join(flipped)})." if flipped else ".")
        + (f" Perturbed DAG wall-clock: {p['seconds'] / 60:.1f} min." if p.get("seconds") else ""),
    ]
    if data.get("carried"):
        c = data["carried"]
        lines.append("")
        lines.append(
            f"Carried from an earlier measurement (their base runs unchanged since): {', '.join(c['replications'])}, "
            f"under {c['perturbation']['label']} ({c['runs_compared']} runs, {c['runs_identical']} bit-identical"
            + (f", {c['perturbation']['seconds'] / 60:.1f} min" if c["perturbation"].get("seconds") else "") + ").")
    lines += ["", "## Claims", "", *verdict_rows(data["claims"], (
        "claim", "verdict", "perturbed verdict", "effect", "perturbed effect"))]
    lines += ["", "## Run records", "", "| task | field | runs | moved | largest relative move | where |",
              "| --- | --- | --- | --- | --- | --- |"]
    for m in data["runs"]:
        lines.append(f"| {m['task']} | {m['field']} | {m['runs']} | {m['moved']} | {m['max_rel']:.3g} | "
                     f"{m['where'] or '–'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, default=Path("results/tiny/runs"), help="the tiny run tree's runs")
    p.add_argument("--runs-out", type=Path, default=Path("results/perturbed"), help="OUT of the perturbed DAG")
    p.add_argument("--replications", nargs="+", default=["training_time"], help="(default: %(default)s)")
    p.add_argument("--capability", default="default", help="ATEN_CPU_CAPABILITY (default, avx2, avx512)")
    p.add_argument("--threads", type=int, default=2, help="torch threads per job in the perturbed run")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--compare-only", action="store_true", help="compare an existing --runs-out")
    p.add_argument("--out", type=Path, default=Path("results/bench/perturbation.md"))
    p.add_argument("--carry", type=Path, help="an earlier perturbation.json: keep its replications not re-run here")
    args = p.parse_args()
    old = json.loads(args.carry.read_text()) if args.carry else None  # read before --out may overwrite it

    import torch

    seconds = None
    if not args.compare_only:
        seconds = run_dag(args.runs_out, args.replications, args.capability, args.threads, args.cores)
    base, other = RunTree(ROOT / args.base), RunTree(ROOT / args.runs_out / "runs")
    if not other.runs:
        raise SystemExit(f"no runs under {args.runs_out}/runs: run without --compare-only first")
    moves, compared, identical = compare_runs(base, other)
    threads = f"{args.threads} thread{'s' if args.threads != 1 else ''} per job"
    label = f"kernels at {args.capability} instead of {torch.backends.cpu.get_cpu_capability()}, {threads}"
    data = {
        "perturbation": {"label": label, "capability": args.capability, "threads": args.threads,
                         "replications": args.replications, "base": str(args.base),
                         "base_capability": torch.backends.cpu.get_cpu_capability(), "seconds": seconds},
        "runs_compared": compared, "runs_identical": identical, "runs": moves,
        "claims": compare_claims(base, other, args.replications),
    }
    if old is not None:
        data = carry(data, old, args.replications)
    write_text(args.out.with_suffix(".json"), json.dumps(data, indent=2, sort_keys=True) + "\n")
    write_text(args.out, markdown(data))
    print(args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
