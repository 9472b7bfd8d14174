"""Assembling the sheet: every replication's declared entries (and a user's, :mod:`heads.sheet.custom_entries`) as one
:class:`Sheet`, checked before any job runs: labels unique, a shared run declared alike, every run an entry
starts from on the sheet; a user's task config laid under its runs, a yardstick's steps set from its baseline's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from heads.sheet.declare import COMMANDS, LONGER, RunSpec, SheetError, layered, run_label
from heads.sheet.settings import load_replication, replications, seeds_of


@dataclass
class Sheet:
    """The checked sheet: ``runs`` (label -> entry) and ``of`` (replication -> the labels it needs)."""

    runs: dict[str, RunSpec]
    of: dict[str, list[str]]

    def __getitem__(self, label: str) -> RunSpec:
        try:
            return self.runs[label]
        except KeyError:
            raise SheetError(f"{label!r} is not on the run sheet") from None

    def labels(self, command: str | None = None) -> list[str]:
        return [k for k, e in self.runs.items() if command is None or e.command == command]


def build(root: str | Path, dag: Mapping[str, Any], names: Iterable[str] | None = None,
          extra: Mapping[str, Iterable[RunSpec]] | None = None) -> Sheet:
    """The sheet of one preset: each replication's ``runs.py`` over its settings in ``dag`` and seeds (its own,
    ``dag["seeds_of"][name]``, where its settings named them, else the preset's), plus ``extra`` entries per
    replication (e.g. a user's own strategies), checked."""
    root = Path(root)
    declared: dict[str, list[RunSpec]] = {}
    for name in names if names is not None else [n for n in replications(root) if n in dag]:
        if name not in dag:
            raise SheetError(f"replication {name!r} has no settings in this preset's dag (keys: {sorted(dag)})")
        declared[name] = list(load_replication(root / name).runs(dag[name], seeds_of(dag, name)))
    for name, entries in (extra or {}).items():
        if entries := list(entries):  # none: the replication may not run at this preset at all
            declared.setdefault(name, []).extend(entries)
    runs = check([_with_task_config(e, (dag.get("tasks") or {}).get(e.task)) for entries in declared.values()
                  for e in entries])
    runs = {label: _yardstick_steps(e, runs, dag.get("preset")) for label, e in runs.items()}
    return Sheet(runs, {name: sorted({e.label for e in entries}) for name, entries in declared.items()})


def _with_task_config(e: RunSpec, base: Mapping[str, Any] | None) -> RunSpec:
    """``e`` with the user's config of its task under its own (an entry's own keys, such as a variant's head
    count, win). Only commands that build their config from the preset take it: training runs, and analyses of
    a bare model folder (``--task``); an analysis of a run reads that run's config.json."""
    if not base or not (e.command == "train" or e.options.get("task")):
        return e
    return replace(e, config=layered(base, e.config))


def check(entries: Iterable[RunSpec]) -> dict[str, RunSpec]:
    """Labels unique (a run several replications share must be declared alike; their ``config`` keys are
    merged, a conflicting value refused), commands known, ``after`` on the sheet, ``paths`` inside runs
    listed in ``after``."""
    sheet: dict[str, RunSpec] = {}
    for e in entries:
        if e.command not in COMMANDS:
            raise SheetError(f"{e.label}: command {e.command!r} is not one of {sorted(COMMANDS)}")
        if not isinstance(e.seed, int) or isinstance(e.seed, bool) or e.seed < 0:
            raise SheetError(f"{e.label}: seed must be an integer >= 0, got {e.seed!r}")
        if e.command == "prune" and e.options.get("evaluate") is not True:
            # its done file, summary.json, is what --evaluate writes: without it the job would never be done
            raise SheetError(f"{e.label}: a prune entry needs options evaluate: true (it writes summary.json)")
        old = sheet.get(e.label)
        if old is None:
            sheet[e.label] = e
            continue
        if _shared(old) != _shared(e):
            raise SheetError(f"{e.label}: declared by {old.replication} and {e.replication} with different "
                             "contents; declare a shared run alike")
        sheet[e.label] = replace(old, config=_merge(old.config, e.config, e.label))
    for e in sheet.values():
        for dep in e.after:
            if dep not in sheet:
                raise SheetError(f"{e.label}: starts from {dep!r}, which is not on the sheet")
        for key, path in e.paths.items():
            if not any(path == d or path.startswith(d + "/") for d in e.after):
                raise SheetError(f"{e.label}: {key} -> {path!r} is not inside a run listed in after")
    return dict(sorted(sheet.items()))


def _shared(e: RunSpec) -> dict:
    """An entry's contents but for who declared it and its config (merged separately)."""
    d = asdict(e)
    d.pop("replication")
    d.pop("config")
    return d


def _merge(a: Mapping, b: Mapping, label: str, prefix: str = "") -> dict:
    out = dict(a)
    for key, value in b.items():
        if key in out and isinstance(out[key], Mapping) and isinstance(value, Mapping):
            out[key] = _merge(out[key], value, label, f"{prefix}{key}.")
        elif key in out and out[key] != value:
            raise SheetError(f"{label}: {prefix}{key} declared as {out[key]!r} and as {value!r}")
        else:
            out[key] = value
    return out


def _yardstick_steps(e: RunSpec, sheet: Mapping[str, RunSpec], preset: str | None) -> RunSpec:
    """A longer baseline with its steps: ``knob`` (the factor) times its baseline's, as that baseline will train
    (its entry's config, where a user's task config lies, else the preset's), so the yardstick stays twice the
    baseline whatever overrides the steps. Its baseline is the ``baseline`` entry of the same arm and seed: arm
    ``none`` the preset's model, another arm a model of another shape (the scaling sweep's sizes)."""
    if e.variant != LONGER:
        return e
    base = sheet.get(run_label(e.task, "baseline", e.arm, 0.0, e.seed))
    if base is None:
        raise SheetError(f"{e.label}: the baseline it is the yardstick of is not on the sheet")
    steps = (base.config.get("train") or {}).get("steps")
    if steps is None:
        if preset is None:
            raise SheetError(f"{e.label}: no preset to read its baseline's steps from")
        from heads.presets import preset_for

        steps = preset_for(e.task, preset)["train"]["steps"]
    return replace(e, config=layered(e.config, {"train": {"steps": round(float(e.knob or 2.0) * int(steps))}}))
