"""Deterministic table output: fixed float precision, CSV and Markdown, written atomically."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heads.io import write_text

PRECISION = 4
# Columns whose numbers read better with another fixed precision (means of counts, shares of heads removed).
COLUMN_FORMATS = {"ratio": ".3f", "heads": ".1f", "params": ".0f", "steps_to_target": ".1f", "tokens_per_s": ".1f",
                  "tokens_per_s_early": ".1f", "examples_per_s": ".2f", "train_seconds": ".3f", "step": ".0f"}


def fmt(value: Any, spec: str | None = None, empty: str = "") -> str:
    """One cell: None/NaN -> ``empty``; floats with a fixed precision; ints, bools and text as they are."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return empty
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return format(value, spec or f".{PRECISION}f")
    return str(value)


@dataclass
class Table:
    """A named table: columns, rows of plain values, optional per-column float formats and a caption."""

    name: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    caption: str = ""

    def __post_init__(self) -> None:
        self.formats = {**COLUMN_FORMATS, **self.formats}

    def cells(self, empty: str) -> list[list[str]]:
        specs = [self.formats.get(c) for c in self.columns]
        return [[fmt(v, s, empty) for v, s in zip(row, specs, strict=True)] for row in self.rows]

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.cells(""))
        return buf.getvalue()

    def to_markdown(self) -> str:
        lines = [f"# {self.name}", ""]
        if self.caption:
            lines += [self.caption, ""]
        if not self.rows:
            lines.append("_No data: the runs or analyses this table needs are not in the run tree._")
            return "\n".join(lines) + "\n"
        cells = [[c.replace("|", "\\|") for c in row] for row in self.cells("–")]  # a | in a cell would split it
        lines += ["| " + " | ".join(row) + " |" for row in (self.columns, ["---"] * len(self.columns), *cells)]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path, stem: str) -> list[Path]:
        """``folder/stem.csv`` and ``folder/stem.md``."""
        return [write_text(Path(folder) / f"{stem}.csv", self.to_csv()),
                write_text(Path(folder) / f"{stem}.md", self.to_markdown())]


def records(table: Table) -> list[dict[str, Any]]:
    """A table's rows as dicts by column name (what the figures draw from)."""
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]
