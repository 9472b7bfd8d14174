"""Sensitivity of the tiny results to the machine, measured on two real machines: compare the rendered results of
the whole tiny DAG run here with the same DAG's results from another machine.

``bench_perturbation.py`` imitates another machine inside this one; this compares against one that really was
another (another CPU, so torch dispatches its kernels to another instruction set), with the same code and
environment. Both sides are rendered results, ``results/`` here and ``results/`` at a git revision (``--other-rev``)
or in a folder (``--other``): every table's numbers, cell by cell, and every claim's verdict and effect. The
output has the shape ``heads claims --robustness`` reads, so the ledger marks a verdict the other machine gave
differently as fragile.

    python benchmarks/bench_machines.py --other-rev 089e404 --other-label "an AVX512 machine (089e404)"

Cells are matched by their table, their row's text and coordinate columns (task, arm, ratio, step, ...) and the
row's position among rows with the same ones; a clock column (seconds, throughput, speed-up) is counted apart, since
clock readings move on any machine.
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

from heads.io import write_text

ROOT = Path(__file__).resolve().parents[1]
# columns that hold clock readings or ratios of them: they differ between any two runs
CLOCK = re.compile(r"(second|time|ttt|_s$|per_s|speed|throughput|examples|tokens_per)")
# numeric columns that say where a row sits (a ratio, a step), not what was measured there
COORDINATES = {"ratio", "step", "batch", "head", "lam", "attention_dropout"}


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _rel(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), 1e-12)


def read_tree(files: Iterable[str], read: Callable[[str], str | None]) -> dict[str, list[dict[str, str]]]:
    """The CSV tables among ``files`` (paths relative to the results folder), parsed; absent ones skipped."""
    tables = {}
    for name in sorted(files):
        text = read(name)
        if text is not None:
            tables[name] = list(csv.DictReader(io.StringIO(text)))
    return tables


def folder_reader(folder: Path) -> tuple[list[str], Callable[[str], str | None]]:
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*.csv") if "runs" not in p.parts]

    def read(name: str) -> str | None:
        path = folder / name
        return path.read_text() if path.is_file() else None

    return names, read


def git_reader(rev: str, folder: str = "results") -> tuple[list[str], Callable[[str], str | None]]:
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", folder], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    names = [n[len(folder) + 1:] for n in listed if n.endswith(".csv")]

    def read(name: str) -> str | None:
        shown = subprocess.run(["git", "show", f"{rev}:{folder}/{name}"], cwd=ROOT, capture_output=True, text=True)
        return shown.stdout if shown.returncode == 0 else None

    return names, read


def _keyed(rows: list[dict[str, str]]) -> dict[tuple, dict[str, str]]:
    """Rows keyed by their text columns and their position among rows with the same text."""
    keyed: dict[tuple, dict[str, str]] = {}
    seen: dict[tuple, int] = {}
    for row in rows:
        text = tuple((k, v) for k, v in row.items() if k in COORDINATES or _number(v or "") is None)
        seen[text] = seen.get(text, -1) + 1
        keyed[(text, seen[text])] = row
    return keyed


def compare_tables(here: dict[str, list[dict]], other: dict[str, list[dict]]) -> dict:
    """Per table: cells compared, cells moved, the largest relative move and where; clock columns apart."""
    tables, unmatched = [], []
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
        for key in sorted(set(a) & set(b), key=str):
            for col, va in a[key].items():
                x, y = _number(va or ""), _number(b[key].get(col) or "")
                if x is None or y is None or col in COORDINATES:
                    continue
                clock = bool(CLOCK.search(col))
                cell["clock_cells" if clock else "cells"] += 1
                rel = _rel(x, y)
                if rel > 0:
                    cell["clock_moved" if clock else "moved"] += 1
                    if not clock and rel > cell["max_rel"]:
                        where = ", ".join(v for _, v in key[0] if v)
                        cell["max_rel"], cell["where"] = rel, f"{where} {col}: {va} -> {b[key][col]}"
        tables.append(cell)
    return {"tables": tables, "unmatched": unmatched}


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


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:+.4g}"


def markdown(data: dict) -> str:
    p = data["perturbation"]
    flipped = [cid for cid, c in data["claims"].items() if c["base"] != c["perturbed"]]
    cells = sum(t["cells"] for t in data["tables"])
    moved = sum(t["moved"] for t in data["tables"])
    lines = [
        "# Another machine: the tiny results of the same code on two CPUs",
        "",
        f"Here: {p['here']}. Other: {p['label']}. Whole tiny DAG on both, results compared as rendered.",
        "",
        f"Verdicts changed: {len(flipped)} of {len(data['claims'])}" + (f" ({', '.join(flipped)})." if flipped
                                                                          else ".")
        + f" Table cells (clock columns apart): {cells} compared, {moved} moved"
        + (f"; clock cells {sum(t['clock_cells'] for t in data['tables'])}, "
           f"{sum(t['clock_moved'] for t in data['tables'])} moved." if data["tables"] else "."),
        "",
        "## Claims",
        "",
        "| claim | verdict here | verdict there | effect here | effect there |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cid, c in data["claims"].items():
        mark = " **(changed)**" if c["base"] != c["perturbed"] else ""
        lines.append(f"| {cid} | {c['base']} | {c['perturbed']}{mark} | {_fmt(c['effect_base'])} | "
                     f"{_fmt(c['effect_perturbed'])} |")
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
    p.add_argument("--results", type=Path, default=ROOT / "results", help="this machine's rendered results")
    side = p.add_mutually_exclusive_group(required=True)
    side.add_argument("--other-rev", help="a git revision whose results/ another machine rendered")
    side.add_argument("--other", type=Path, help="a folder of another machine's rendered results")
    p.add_argument("--other-label", required=True, help="what the other machine was (its CPU capability, where)")
    p.add_argument("--out", type=Path, default=ROOT / "results/bench/machines.md")
    args = p.parse_args(argv)

    import torch

    names, read_here = folder_reader(args.results)
    other_names, read_other = git_reader(args.other_rev) if args.other_rev else folder_reader(args.other)
    here_claims, other_claims = read_here("claims.csv"), read_other("claims.csv")
    if here_claims is None or other_claims is None:
        raise SystemExit(f"no claims.csv {'here' if here_claims is None else 'on the other side'}: render first")
    here = f"kernels at {torch.backends.cpu.get_cpu_capability()} (this machine)"
    data = {
        "perturbation": {"label": args.other_label, "here": here, "other": args.other_rev or str(args.other),
                         "capability": "another machine's"},
        "claims": compare_claims(list(csv.DictReader(io.StringIO(here_claims))),
                                 list(csv.DictReader(io.StringIO(other_claims)))),
        **compare_tables(read_tree(names, read_here), read_tree(other_names, read_other)),
    }
    write_text(args.out.with_suffix(".json"), json.dumps(data, indent=2, sort_keys=True) + "\n")
    write_text(args.out, markdown(data))
    print(args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
