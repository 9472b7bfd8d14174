"""Render one replication's folder: its tables, figures and the ledger rows of its claims.

What a replication renders is declared in its folder, ``replications/<name>/report.yaml``: ``tables:``, each a
spec (:mod:`heads.report.table_spec`) or, left empty, one of :data:`heads.report.tables.BUILT_IN`, and
``figures:``, each a name of :data:`heads.report.figures.FIGURES` mapped to its caption (the HTML report's
words under it; a task's own under ``tasks.<task>.figures``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from heads.report.claims import evaluate_all, write_ledger
from heads.report.collect import RunTree
from heads.report.figures import FIGURES, NEEDS
from heads.report.fmt import Table
from heads.report.ledger import write_environments
from heads.report.spec import load_all
from heads.report.table_spec import TableSpec, TableSpecError
from heads.report.tables import BUILT_IN, Tables
from heads.yamlio import read_yaml

DEFAULT_REPLICATIONS = Path("replications")


def replications(root: str | Path = DEFAULT_REPLICATIONS) -> list[str]:
    """The replications under ``root``: folders with a ``report.yaml``."""
    return sorted(p.parent.name for p in Path(root).glob("*/report.yaml"))


def artefacts(name: str, root: str | Path = DEFAULT_REPLICATIONS) -> dict[str, list[str]]:
    """The stems a replication renders: ``{"tables": [...], "figures": [...]}``, checked against the renderers."""
    specs, figures = _declared(name, root)
    return {"tables": list(specs), "figures": list(figures)}


def caption(name: str, figure: str, root: str | Path = DEFAULT_REPLICATIONS, task: str | None = None) -> str:
    """The caption report.yaml gives ``figure`` beside its name, as read on ``task`` (``tasks.<task>.figures``)."""
    captions = _declared(name, root, task)[1]
    if figure not in captions:
        raise TableSpecError(f"{Path(root) / name / 'report.yaml'}: no figure {figure!r}; it declares "
                             f"{list(captions)}")
    return captions[figure]


def _figure_captions(figures: object, path: Path) -> dict[str, str]:
    """``figures:`` of report.yaml (a name mapped to its caption) as a dict; a caption must be words."""
    if not figures:  # none declared (an empty list or mapping says the same)
        return {}
    if not isinstance(figures, dict) or not all(isinstance(c, str) and c.strip() for c in figures.values()):
        raise TableSpecError(f"{path}: figures must map each figure's name to its caption (a line of words)")
    return {name: " ".join(text.split()) for name, text in figures.items()}


def tables(name: str, tree: RunTree, root: str | Path = DEFAULT_REPLICATIONS) -> Tables:
    """The tables replication ``name`` declares, over ``tree`` (each built when first asked for)."""
    return Tables(tree, _declared(name, root, _one_task(tree))[0])


def _one_task(tree: RunTree) -> str | None:
    """The task of a tree read on one task (the ``--tasks`` the workflow gives a replication), else None."""
    return next(iter(tree.only)) if tree.only is not None and len(tree.only) == 1 else None


def _for_task(tables: dict, overlays: object, task: str | None, path: Path) -> dict:
    """``tables`` with ``tasks.<task>.tables`` of report.yaml laid over them: each key given replaces the table's
    own (a title or caption that names another model's layout). Every task's entry is checked, whichever is read."""
    if overlays is None:
        return tables
    if not isinstance(overlays, dict):
        raise TableSpecError(f"{path}: tasks must map a task's name to {{tables: {{TABLE: {{KEY: VALUE}}}}}}")
    chosen = tables
    for name, entry in overlays.items():
        given = (entry or {}).get("tables", {}) if isinstance(entry, dict) else None
        if not isinstance(given, dict) or set(entry) - {"tables", "figures"}:
            raise TableSpecError(f"{path}: tasks.{name} must be {{tables: {{TABLE: {{KEY: VALUE}}}}, "
                                 "figures: {FIGURE: CAPTION}}")
        merged = dict(tables)
        for table, keys in given.items():
            if not isinstance(tables.get(table), dict) or not isinstance(keys, dict):
                raise TableSpecError(f"{path}: tasks.{name}.tables.{table}: names no table declared with a spec "
                                     "above, or is not a mapping of its keys")
            merged[table] = {**tables[table], **keys}
            TableSpec.parse(table, merged[table], f"{path} (tasks.{name})")  # a wrong overlay fails on every task
        if name == task:
            chosen = merged
    return chosen


def _declared(name: str, root: str | Path, task: str | None = None) -> tuple[dict[str, TableSpec | None],
                                                                              dict[str, str]]:
    """A replication's report.yaml: its table specs (None: built in) and its figures with their captions, as read
    on ``task`` where it says how (``tasks:``), checked."""
    path = Path(root) / name / "report.yaml"
    if not path.is_file():
        raise TableSpecError(f"unknown replication {name!r}; known: {replications(root)} (no {path})")
    doc = read_yaml(path, TableSpecError) or {}
    if not isinstance(doc, dict):
        raise TableSpecError(f"{path}: expected a mapping with tables: and figures: (each a mapping)")
    tables, figures = doc.get("tables") or {}, _figure_captions(doc.get("figures"), path)
    for other, entry in (doc.get("tasks") or {}).items():  # a task's captions name figures declared above
        own = _figure_captions((entry or {}).get("figures") if isinstance(entry, dict) else None, path)
        if set(own) - set(figures):
            raise TableSpecError(f"{path}: tasks.{other}.figures: {sorted(set(own) - set(figures))} are not among "
                                 f"figures: {list(figures)}")
        if other == task:
            figures = {**figures, **own}
    if isinstance(tables, list):  # names alone: built-in tables
        tables = dict.fromkeys(tables)
    if not isinstance(tables, dict):
        raise TableSpecError(f"{path}: tables must map each table's name to its spec (empty: built in)")
    tables = _for_task(tables, doc.get("tasks"), task, path)
    specs = {t: None if raw is None else TableSpec.parse(t, raw, str(path)) for t, raw in tables.items()}
    for kind, names, known in (("tables", [t for t, s in specs.items() if s is None], BUILT_IN),
                               ("figures", figures, FIGURES)):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise TableSpecError(f"{path}: {kind} {unknown} have no renderer; known: {sorted(known)}")
    for figure in figures:  # each figure's contract (heads.report.figures.NEEDS), checked before anything renders
        for table, columns in NEEDS[figure].items():
            if table not in specs:
                raise TableSpecError(f"{path}: figure {figure} draws table {table!r}, which tables: does not declare")
            spec = specs[table]
            missing = [c for c in columns if spec is not None and c not in spec.outputs]
            if missing:
                raise TableSpecError(f"{path}: figure {figure} needs columns {missing} of table {table!r}, which "
                                     f"its columns: do not make (it makes {list(spec.outputs)})")
    return specs, figures


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
    specs, figures = _declared(name, replications, _one_task(tree))
    tables, out = Tables(tree, specs), Path(out)
    if only is not None:
        return _render_one(name, specs, figures, tables, out, replications, only)
    note = None if figures_only else tree.environment_note()
    written = [] if figures_only else [p for t in specs for p in _table(t, tables, note).write(out, t)]
    written += [FIGURES[f](tables, out / f"{f}.png") for f in figures]
    if not figures_only and (Path(replications) / name / "claims.yaml").exists():
        written += _claims_page(name, tree, out, replications)
    return written


def _table(name: str, tables: Tables, note: str | None) -> Table:
    """A table, its caption saying so when the runs behind it come from different environments (``note``)."""
    table = tables(name)
    return replace(table, caption=f"{table.caption} **Environments differ:** {note}.".strip()) if note else table


def _claims_page(name: str, tree: RunTree, out: Path, replications: str | Path) -> list[Path]:
    """The replication's ledger: ``claims.md``, ``claims.csv``, its tasks' ``baselines.{csv,md}`` and the
    environments its records name: what :mod:`heads.report.ledger` merges into the whole ledger."""
    tree.reset_reads()  # the environments of what the claims read, whatever the tables read before
    # a replication whose runs are of one task (the --tasks the workflow gives it) has its claims read on that task
    # where they follow their runs' (the battery on another model: heads.report.spec.load_claims)
    task = {name: _one_task(tree)} if _one_task(tree) is not None else None
    results = evaluate_all(load_all(replications, [name], task), tree)
    envs = tree.environments(read_only=True)
    written = write_ledger(results, out, tree.environment_note(read_only=True), tree, title=f"Claims: {name}",
                           page="claims.md")
    return [*written, write_environments(out, envs)]


def _render_one(name: str, specs: dict, figures: dict[str, str], tables: Tables, out: Path, replications,
                only: str) -> list[Path]:
    """``only``: ``stem.png`` a figure, ``stem`` (or ``stem.csv``/``stem.md``) a table, ``claims`` the ledger page."""
    stem, _, ext = only.partition(".")
    if ext == "png" and stem in figures:
        return [FIGURES[stem](tables, out / f"{stem}.png")]
    if ext in ("", "csv", "md") and stem in specs:
        return _table(stem, tables, tables.tree.environment_note()).write(out, stem)
    if only == "claims":
        return _claims_page(name, tables.tree, out, replications)
    known = [*specs, *(f"{f}.png" for f in figures), "claims"]
    raise TableSpecError(f"replication {name!r} renders no {only!r}; it renders: {known}")
