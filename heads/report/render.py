"""Render one replication's folder: its tables, figures and the ledger rows of its claims."""

from __future__ import annotations

from pathlib import Path

from heads.io import write_text
from heads.report.claims import evaluate_all, ledger_markdown
from heads.report.collect import RunTree
from heads.report.figures import FIGURES, write_figures
from heads.report.spec import load_all
from heads.report.tables import TABLES, write_tables

REPLICATIONS = tuple(TABLES)


def render_replication(
    name: str,
    tree: RunTree,
    out: str | Path,
    replications: str | Path | None = None,
    figures_only: bool = False,
    only: str | None = None,
) -> list[Path]:
    """Write ``out/<table>.{csv,md}``, ``out/<figure>.png`` and (with ``replications``) ``out/claims.md``.

    ``only``: just that one artefact (a table stem, ``<figure>.png``, or ``claims``), so the workflow can
    regenerate exactly what is missing.
    """
    if name not in TABLES or name not in FIGURES:
        raise KeyError(f"unknown replication {name!r}; known: {list(REPLICATIONS)}")
    out = Path(out)
    if only is not None:
        return _render_one(name, tree, out, replications, only)
    written = [] if figures_only else write_tables(name, tree, out)
    written += write_figures(name, tree, out)
    if not figures_only and replications is not None and (Path(replications) / name / "claims.yaml").exists():
        results = evaluate_all(load_all(replications, [name]), tree)
        written.append(write_text(out / "claims.md", ledger_markdown(results, title=f"Claims: {name}")))
    return written


def artefacts(name: str) -> dict[str, list[str]]:
    """The stems a replication renders: ``{"tables": [...], "figures": [...]}``."""
    return {"tables": list(TABLES[name]), "figures": list(FIGURES[name])}


def _render_one(name: str, tree: RunTree, out: Path, replications, only: str) -> list[Path]:
    """``only``: ``stem.png`` a figure, ``stem`` (or ``stem.csv``/``stem.md``) a table, ``claims`` the ledger page."""
    stem, _, ext = only.partition(".")
    if ext == "png" and stem in FIGURES[name]:
        return [FIGURES[name][stem](tree, out / f"{stem}.png")]
    if ext in ("", "csv", "md") and stem in TABLES[name]:
        return TABLES[name][stem](tree).write(out, stem)
    if only == "claims" and replications is not None:
        results = evaluate_all(load_all(replications, [name]), tree)
        return [write_text(out / "claims.md", ledger_markdown(results, title=f"Claims: {name}"))]
    known = [*TABLES[name], *(f"{f}.png" for f in FIGURES[name]), "claims"]
    raise KeyError(f"replication {name!r} renders no {only!r}; it renders: {known}")
