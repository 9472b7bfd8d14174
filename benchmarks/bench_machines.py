"""Sensitivity of the tiny results to the machine, measured on two real machines: compare the rendered results of
the whole tiny DAG run here with the same DAG's results from another machine.

``bench_perturbation.py`` imitates another machine inside this one; this compares against one that really was
another (another CPU, so torch dispatches its kernels to another instruction set), with the same code and
environment. Both sides are rendered results, ``results/tiny/`` here and at a git revision (``--other-rev``; a
revision from before tiny moved there with ``--other-folder results``) or in a folder (``--other``): every table's
numbers, cell by cell, and every claim's verdict and effect. The output has the shape ``heads claims --robustness``
reads, so the ledger marks a verdict the other machine gave differently as fragile.

    python benchmarks/bench_machines.py --other-rev 089e404 --other-label "an AVX512 machine (089e404)"

Cells are matched by their table, their row's identity columns (task, arm, site, ratio, step, ...) and the row's
position among rows with the same identity; every other cell is compared, a number by its relative move and text
("2/3" seeds significant, a blank that appeared) as moved or not. A clock column (seconds, throughput, a speed-up
and its interval) is counted apart, since clock readings move on any machine.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from common import relative_move, verdict_rows

from heads.io import write_text

ROOT = Path(__file__).resolve().parents[1]
# columns that hold clock readings or ratios of them: they differ between any two runs
CLOCK = re.compile(r"(second|time|ttt|_s$|per_s|speed|throughput|examples|tokens_per)")
# tables whose interval columns are the interval of a clock reading (speed-ups)
CLOCK_TABLES = {"speed.csv"}
# the columns that say which row a row is (its arm, site, ratio, step), not what was measured there; every other
# column, text included ("2/3" seeds significant, "*", true/false), is compared
# "arm" names a run's arm since the report stopped calling it "strategy" (kept for trees rendered before)
IDENTITY = {"task", "site", "label", "kind", "head", "scorer", "variant", "arm", "strategy", "comparison", "metric",
            "lam", "kept", "ratio", "step", "batch", "attention_dropout"}
WHAT = "the whole tiny DAG"  # what both sides ran, unless --what says otherwise
# sub-folders of a results folder that hold no replication's tables: its run tree and surgery pages, and (in a
# revision from before tiny moved to results/tiny/, read at results/) other presets' and benchmarks' folders
OTHER_FOLDERS = {"runs", "smoke", "small", "paper", "perturbed", "bench", "surgery"}


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_tree(files: Iterable[str], read: Callable[[str], str | None]) -> dict[str, list[dict[str, str]]]:
    """The CSV tables among ``files`` (paths relative to the results folder), parsed; absent ones skipped."""
    tables = {}
    for name in sorted(files):
        text = read(name)
        if text is not None:
            tables[name] = list(csv.DictReader(io.StringIO(text)))
    return tables


def _rendered(name: str) -> bool:
    """A table the tiny DAG renders (``<replication>/*.csv``, the ledger), not another preset's."""
    parts = name.split("/")
    return not (len(parts) > 1 and parts[0] in OTHER_FOLDERS)


def folder_reader(folder: Path) -> tuple[list[str], Callable[[str], str | None]]:
    names = [n for p in folder.rglob("*.csv") if _rendered(n := p.relative_to(folder).as_posix())]

    def read(name: str) -> str | None:
        path = folder / name
        return path.read_text() if path.is_file() else None

    return names, read


def git_reader(rev: str, folder: str = "results/tiny") -> tuple[list[str], Callable[[str], str | None]]:
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", folder], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    names = [n[len(folder) + 1:] for n in listed if n.endswith(".csv") and _rendered(n[len(folder) + 1:])]

    def read(name: str) -> str | None:
        shown = subprocess.run(["git", "show", f"{rev}:{folder}/{name}"], cwd=ROOT, capture_output=True, text=True)
        return shown.stdout if shown.returncode == 0 else None

    return names, read


def _keyed(rows: list[dict[str, str]]) -> dict[tuple, dict[str, str]]:
    """Rows keyed by their identity columns and their position among rows with the same identity."""
    keyed: dict[tuple, dict[str, str]] = {}
    seen: dict[tuple, int] = {}
    for row in rows:
        ident = tuple((k, v) for k, v in row.items() if k in IDENTITY)
        seen[ident] = seen.get(ident, -1) + 1
        keyed[(ident, seen[ident])] = row
    return keyed


def _moved(a: str, b: str) -> float:
    """How far a cell moved: relative for two numbers, 1 for changed text or a value that appeared or vanished."""
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return relative_move(x, y)
    return 0.0 if a == b else 1.0


def compare_tables(here: dict[str, list[dict]], other: dict[str, list[dict]]) -> dict:
    """Per table: cells compared, cells moved, the largest relative move and where; clock columns apart."""
    tables, unmatched, tasks = [], [], {}
    for name in sorted(set(here) | set(other)):
        if name == "claims.csv" or name.startswith("bench/"):
            continue
        if name not in here or name not in other:
            unmatched.append(f"{name}: only {'here' if name in here else 'on the other machine'}")
            continue
        a, b = _keyed(other[name]), _keyed(here[name])
        rows_only = len(set(a) ^ set(b))
        cell = {"table": name, "rows": len(set(a) & set(b)), "rows_unmatched": rows_only, "cells": 0, "moved": 0,
                "max_rel": 0.0, "where": "", "clock_cells": 0, "clock_moved": 0}
        clock_table = name.rsplit("/", 1)[-1] in CLOCK_TABLES
        for key in sorted(set(a) & set(b), key=str):
            for col, va in a[key].items():
                if col in IDENTITY:
                    continue
                vb = b[key].get(col) or ""
                clock = bool(CLOCK.search(col)) or (clock_table and col.startswith("ci_"))
                cell["clock_cells" if clock else "cells"] += 1
                rel = _moved(va or "", vb)
                if not clock:  # the same count per task: the tasks' models differ in how much they move
                    task = tasks.setdefault(a[key].get("task") or "-", {"cells": 0, "moved": 0, "max_rel": 0.0,
                                                                         "where": ""})
                    task["cells"] += 1
                    task["moved"] += rel > 0
                    if rel > task["max_rel"]:
                        task["max_rel"], task["where"] = rel, f"{name} {col}: {va} (there) -> {vb} (here)"
                if rel > 0:
                    cell["clock_moved" if clock else "moved"] += 1
                    if not clock and rel > cell["max_rel"]:
                        where = ", ".join(v for _, v in key[0] if v)
                        cell["max_rel"], cell["where"] = rel, f"{where} {col}: {va} (there) -> {vb} (here)"
        tables.append(cell)
    return {"tables": tables, "unmatched": unmatched, "tasks": dict(sorted(tasks.items()))}


def compare_claims(here: list[dict[str, str]], other: list[dict[str, str]]) -> dict[str, dict]:
    """Per claim of this ledger: its verdict and effect here (``base``) and on the other machine."""
    theirs = {r["claim"]: r for r in other}
    out = {}
    for row in here:
        them = theirs.get(row["claim"])
        if them is None:
            continue
        out[row["claim"]] = {"base": row["verdict"], "perturbed": them["verdict"],
                             "effect_base": _number(row["effect"] or ""),
                             "effect_perturbed": _number(them["effect"] or "")}
    return out


def markdown(data: dict) -> str:
    p = data["perturbation"]
    flipped = [cid for cid, c in data["claims"].items() if c["base"] != c["perturbed"]]
    cells = sum(t["cells"] for t in data["tables"])
    moved = sum(t["moved"] for t in data["tables"])
    what = p.get("what", WHAT)
    lines = [
        f"# Another run: {what}, the same code on both sides",
        "",
        f"Here: {p['here']}. Other: {p['label']}. {what[:1].upper()}{what[1:]} on both, results compared as rendered.",
        "",
        f"Verdicts changed: {len(flipped)} of {len(data['claims'])}" + (f" ({', '.join(flipped)})." if flipped
                                                                          else ".")
        + f" Table cells (clock columns apart): {cells} compared, {moved} moved"
        + (f"; clock cells {sum(t['clock_cells'] for t in data['tables'])}, "
           f"{sum(t['clock_moved'] for t in data['tables'])} moved." if data["tables"] else "."),
        "",
        "## Claims",
        "",
        *verdict_rows(data["claims"], ("claim", "verdict here", "verdict there", "effect here", "effect there")),
    ]
    lines += ["", "## By task (clock columns apart)", "", "| task | cells | moved | largest relative move | where |",
              "| --- | --- | --- | --- | --- |"]
    for task, t in data.get("tasks", {}).items():
        lines.append(f"| {task} | {t['cells']} | {t['moved']} | {t['max_rel']:.3g} | {t['where'] or '–'} |")
    lines += ["", "## Tables", "",
              "| table | rows | cells | moved | largest relative move | where | clock cells moved |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in data["tables"]:
        lines.append(f"| {t['table']} | {t['rows']}" + (f" (+{t['rows_unmatched']} unmatched)" if t["rows_unmatched"]
                                                        else "")
                     + f" | {t['cells']} | {t['moved']} | {t['max_rel']:.3g} | {t['where'] or '–'} | "
                       f"{t['clock_moved']}/{t['clock_cells']} |")
    if data["unmatched"]:
        lines += ["", "Tables on one side only: " + "; ".join(data["unmatched"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=ROOT / "results/tiny", help="this machine's rendered results")
    side = p.add_mutually_exclusive_group(required=True)
    side.add_argument("--other-rev", help="a git revision whose results another machine rendered")
    side.add_argument("--other", type=Path, help="a folder of another machine's rendered results")
    p.add_argument("--other-folder", help="where --other-rev holds them (default: --results' folder; `results` "
                   "for a revision from before tiny's results moved to results/tiny)")
    p.add_argument("--other-label", required=True, help="what the other machine was (its CPU capability, where)")
    p.add_argument("--what", default=WHAT, help=f"what both sides ran, for the title (default: {WHAT})")
    p.add_argument("--out", type=Path, default=ROOT / "results/bench/machines.md")
    args = p.parse_args(argv)

    import torch

    names, read_here = folder_reader(args.results)
    folder = args.other_folder or (args.results.resolve().relative_to(ROOT).as_posix() if args.other_rev else None)
    other_names, read_other = git_reader(args.other_rev, folder) if args.other_rev else folder_reader(args.other)
    here_claims, other_claims = read_here("claims.csv"), read_other("claims.csv")
    if here_claims is None or other_claims is None:
        raise SystemExit(f"no claims.csv {'here' if here_claims is None else 'on the other side'}: render first")
    here = f"kernels at {torch.backends.cpu.get_cpu_capability()} (this machine)"
    data = {
        "perturbation": {"label": args.other_label, "here": here, "other": args.other_rev or str(args.other),
                         "capability": "another machine's", "what": args.what},
        # two real machines: neither is the reference, so a verdict either gave is what the other is measured against
        "symmetric": True,
        "claims": compare_claims(list(csv.DictReader(io.StringIO(here_claims))),
                                 list(csv.DictReader(io.StringIO(other_claims)))),
        **compare_tables(read_tree(names, read_here), read_tree(other_names, read_other)),
    }
    write_text(args.out.with_suffix(".json"), json.dumps(data, indent=2, sort_keys=True) + "\n")
    write_text(args.out, markdown(data))
    print(args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
