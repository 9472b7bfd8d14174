"""Custom entries: a user's own strategies (the workflow config's ``dag.<preset>.custom``) as runs of the
replications they join, each through that replication's ``custom`` hook in its ``runs.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heads.sheet.declare import RunSpec, SheetError
from heads.sheet.settings import load_replication, replications, seeds_of

CUSTOM_JOINS = "training_time"  # the replication an entry naming none joins


@dataclass(frozen=True, kw_only=True)
class Custom:
    """One entry of a workflow config's ``dag.<preset>.custom``, as a replication's ``custom`` hook takes it.

    ``kind`` is how its strategy prunes (:func:`heads.strategies.registry.kind_of`): ``during`` (a strategy that
    prunes while training) or ``posthoc`` (a scorer choosing heads of a trained model). ``task`` and ``ratio``
    are None where the entry names none; the hook decides what that means."""

    label: str
    strategy: str
    kind: str
    task: str | None = None
    ratio: float | None = None
    params: dict = field(default_factory=dict)


def custom(root: str | Path, dag: Mapping[str, Any], entries: Iterable[Mapping[str, Any]]) -> dict[str, list[RunSpec]]:
    """A user's own strategies (workflow config ``dag.<preset>.custom``) as runs of the replications they join,
    for :func:`build`'s ``extra``. Each ``{label, strategy, task, ratio, params, replication}`` joins its
    ``replication`` (default ``training_time``), whose ``runs.py`` says how with an optional
    ``custom(entry, settings, seeds) -> list[RunSpec]`` (``entry``: a :class:`Custom`; ``settings`` and
    ``seeds``: the replication's own at this preset), every run's ``arm`` the entry's label, or raises
    :class:`SheetError` for an entry it cannot take. Refused in one line naming the entry, before any job: a
    label twice, an unknown strategy or replication, one not run at this preset or without that hook. An entry
    imports the strategy and scorer registries (torch), to tell its kind; none, nothing heavy."""
    entries = list(entries)
    labels = [c.get("label") for c in entries]
    repeated = sorted({str(x) for x in labels if labels.count(x) > 1})
    if repeated:  # one arm per label: two strategies under one label would be read as one arm's runs
        raise SheetError(f"custom: labels {repeated} name more than one entry; give each entry its own label")
    known = replications(root)
    out: dict[str, list[RunSpec]] = {}
    for c in entries:
        name, where = c.get("replication", CUSTOM_JOINS), f"custom, entry {c.get('label')!r}"
        if name not in known:
            raise SheetError(f"{where}: replication {name!r} is not one of {known}")
        if name not in dag:
            raise SheetError(f"{where}: it joins the {name} replication, which does not run at preset "
                             f"{dag.get('preset')!r} (replications/{name}/settings.yaml sets it to null)")
        hook = getattr(load_replication(Path(root) / name), "custom", None)
        if not callable(hook):
            takes = [n for n in known if callable(getattr(load_replication(Path(root) / n), "custom", None))]
            raise SheetError(f"{where}: replication {name!r} takes no custom entries (its runs.py defines no "
                             f"custom(entry, settings, seeds)); those that do: {takes}")
        try:
            ratio = None if "ratio" not in c else float(c["ratio"])
        except (TypeError, ValueError):
            raise SheetError(f"{where}: ratio must be a number, got {c.get('ratio')!r}") from None
        given = (c.get("params") or {}).get("ratio") if isinstance(c.get("params"), Mapping) else None
        if ratio is not None and given is not None and given != ratio:
            # the label's ratio (the arm's folder, the tables' column) would say one thing, the strategy do another
            raise SheetError(f"{where}: ratio {c['ratio']!r} and params.ratio {given!r} contradict each other "
                             "(the run would be labelled one and prune the other); give the ratio once")
        from heads.config import ConfigError
        from heads.strategies.registry import kind_of

        try:
            kind = kind_of(c["strategy"])
        except ConfigError as exc:
            raise SheetError(f"{where}: {exc}") from None
        entry = Custom(label=c["label"], strategy=c["strategy"], kind=kind, task=c.get("task"), ratio=ratio,
                       params=dict(c.get("params") or {}))
        try:
            runs = list(hook(entry, dag[name], seeds_of(dag, name)))
        except SheetError as exc:
            raise SheetError(f"{where}: {name}: {exc}") from None
        out.setdefault(name, []).extend(runs)
    return out
