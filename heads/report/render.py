"""Render one replication's folder: its tables, figures and the ledger rows of its claims.

What a replication renders is declared in its folder, ``replications/<name>/report.yaml``
(``tables:`` and ``figures:``, names of the renderers in :data:`TABLES` and :data:`FIGURES`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from heads.report.claims import evaluate_all, write_ledger
from heads.report.collect import RunTree
from heads.report.figures import FIGURES
from heads.report.ledger import write_environments
from heads.report.spec import load_all
from heads.report.tables import TABLES

DEFAULT_REPLICATIONS = Path("replications")


def replications(root: str | Path = DEFAULT_REPLICATIONS) -> list[str]:
    """The replications under ``root``: folders with a ``report.yaml``."""
    return sorted(p.parent.name for p in Path(root).glob("*/report.yaml"))


def artefacts(name: str, root: str | Path = DEFAULT_REPLICATIONS) -> dict[str, list[str]]:
    """The stems a replication renders: ``{"tables": [...], "figures": [...]}``, checked against the renderers."""
    path = Path(root) / name / "report.yaml"
    if not path.is_file():
        raise KeyError(f"unknown replication {name!r}; known: {replications(root)} (no {path})")
    doc = yaml.safe_load(path.read_text()) or {}
    out = {"tables": list(doc.get("tables") or []), "figures": list(doc.get("figures") or [])}
    for kind, known in (("tables", TABLES), ("figures", FIGURES)):
        unknown = [n for n in out[kind] if n not in known]
        if unknown:
            raise KeyError(f"{path}: {kind} {unknown} have no renderer; known: {sorted(known)}")
    return out


def render_replication(
    name: str,
    tree: RunTree,
    out: str | Path,
    replications: str | Path = DEFAULT_REPLICATIONS,
    figures_only: bool = False,
    only: str | None = None,
) -> list[Path]:
    """Write ``out/<table>.{csv,md}``, ``out/<figure>.png`` and the replication's ledger (``out/claims.md``, ...).

    ``only``: just that one artefact (a table stem, ``<figure>.png``, or ``claims``), so the workflow can
    regenerate exactly what is missing.
    """
    kinds = artefacts(name, replications)
    out = Path(out)
    if only is not None:
        return _render_one(name, kinds, tree, out, replications, only)
    written = [] if figures_only else [p for t in kinds["tables"] for p in _table(t, tree).write(out, t)]
    written += [FIGURES[f](tree, out / f"{f}.png") for f in kinds["figures"]]
    if not figures_only and (Path(replications) / name / "claims.yaml").exists():
        written += _claims_page(name, tree, out, replications)
    return written


def _table(name: str, tree: RunTree):
    """A table, its caption saying so when the runs behind it come from different environments."""
    table = TABLES[name](tree)
    note = tree.environment_note()
    if note:
        table.caption = f"{table.caption} **Environments differ:** {note}.".strip()
    return table


def _claims_page(name: str, tree: RunTree, out: Path, replications: str | Path) -> list[Path]:
    """The replication's ledger: ``claims.md``, ``claims.csv``, its tasks' ``baselines.{csv,md}`` and the
    environments its records name: what :mod:`heads.report.ledger` merges into the whole ledger."""
    tree.reset_reads()  # the environments of what the claims read, whatever the tables read before
    results = evaluate_all(load_all(replications, [name]), tree)
    envs = tree.environments(read_only=True)
    written = write_ledger(results, out, tree.environment_note(read_only=True), tree, title=f"Claims: {name}",
                           page="claims.md")
    return [*written, write_environments(out, envs)]


def _render_one(name: str, kinds: dict, tree: RunTree, out: Path, replications, only: str) -> list[Path]:
    """``only``: ``stem.png`` a figure, ``stem`` (or ``stem.csv``/``stem.md``) a table, ``claims`` the ledger page."""
    stem, _, ext = only.partition(".")
    if ext == "png" and stem in kinds["figures"]:
        return [FIGURES[stem](tree, out / f"{stem}.png")]
    if ext in ("", "csv", "md") and stem in kinds["tables"]:
        return _table(stem, tree).write(out, stem)
    if only == "claims":
        return _claims_page(name, tree, out, replications)
    known = [*kinds["tables"], *(f"{f}.png" for f in kinds["figures"]), "claims"]
    raise KeyError(f"replication {name!r} renders no {only!r}; it renders: {known}")
