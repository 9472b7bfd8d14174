"""The committed results agree with each other: README's claims table is results/claims.csv as the pipeline wrote
it (a hand-edited or stale copy fails here, and the message prints the table to paste)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "| claim | verdict | our effect [95 % CI] | seeds | p |"


def _signed(value: str) -> str:
    return f"{float(value):+.3f}"


def expected_table(claims_csv: Path) -> list[str]:
    """README's rendering of the ledger: one row per claim, effect and interval to three decimals."""
    lines = [HEADER, "| --- | --- | --- | --- | --- |"]
    with claims_csv.open() as f:
        for row in csv.DictReader(f):
            exact = row["method"].startswith("exact")  # a count checked on every seed: no interval
            effect = "–" if not row["effect"] else _signed(row["effect"]) + (
                f" [{_signed(row['ci_low'])}, {_signed(row['ci_high'])}]" if row["ci_low"] else
                " (exact)" if exact else " (one value)")
            lines.append(f"| {row['claim']} | {row['verdict']} | {effect} | {row['n_seeds']} | "
                         f"{row['p_value'] or '–'} |")
    return lines


def readme_table(readme: Path) -> list[str]:
    lines = readme.read_text().splitlines()
    start = lines.index(HEADER)
    end = next((i for i in range(start, len(lines)) if not re.match(r"^\|", lines[i])), len(lines))
    return lines[start:end]


def test_readme_claims_table_is_the_committed_ledger():
    expected = expected_table(ROOT / "results" / "claims.csv")
    assert readme_table(ROOT / "README.md") == expected, "README's claims table is stale; paste:\n" + "\n".join(
        expected)
