"""A preset's settings: each replication's ``settings.yaml`` at one preset, merged with the workflow config's
overrides and checked (names against the registries, a task's config sections against the run configuration)
before any entry is declared; and the replications themselves (the folders holding a ``runs.py``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heads.sheet.declare import SheetError


def load_replication(folder: Path):
    """A replication's ``runs.py`` as a module (it defines ``runs(settings, seeds) -> list[RunSpec]``)."""
    path = folder / "runs.py"
    spec = importlib.util.spec_from_file_location(f"heads_replication_{folder.name}", path)
    if spec is None or spec.loader is None:
        raise SheetError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "runs", None)):
        raise SheetError(f"{path}: defines no runs(settings, seeds)")
    return module


def replications(root: str | Path) -> list[str]:
    """Replication names: the folders of ``root`` that hold a ``runs.py``."""
    return sorted(p.parent.name for p in Path(root).glob("*/runs.py"))


def preset_settings(root: str | Path, preset: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A preset's settings, from which the sheet declares its runs: the preset's ``seeds`` and each replication's
    settings (its folder's ``settings.yaml`` at that preset; a replication whose settings there are null or absent
    does not run at it), with ``overrides`` (``seeds``, ``custom``, ``tasks``, or a replication's name mapping to
    keys that replace its own, its tasks' own too: :func:`_under_user`) on top. ``tasks`` maps a task to run-config
    sections (a user's model and data) laid under every run of that task. A replication's settings may name its
    own ``seeds`` (``seeds_of``), unless the overrides set the DAG's. The names in the settings (presets, and the
    tasks and scorers their ``settings.schema.yaml`` marks) are checked against the registries here, in one line
    naming the file and key."""
    from heads.presets import preset as load_preset
    from heads.yamlio import read_yaml

    _check_name("preset", preset, "preset")
    overrides = dict(overrides or {})
    user_seeds = overrides.pop("seeds", None)
    dag: dict[str, Any] = {"preset": preset, "seeds": user_seeds or load_preset(preset)["seeds"]}
    for key in ("custom", "tasks"):
        if key in overrides:
            dag[key] = overrides.pop(key)
    _check_task_sections(dag.get("tasks"), preset)
    for name in replications(root):
        path = Path(root) / name / "settings.yaml"
        doc = read_yaml(path, SheetError) if path.is_file() else {}
        if not isinstance(doc or {}, Mapping):
            raise SheetError(f"{path}: must map a preset to the replication's settings there, got {doc!r}")
        for known in doc or {}:  # a preset's settings under a misspelt name would silently never run
            _check_name("preset", known, f"{path}: {known}")
        if (doc or {}).get(preset) is None:  # null or absent: made for other scales (pretrained runs at its own)
            if overrides.pop(name, None):
                said = "sets it to null" if preset in (doc or {}) else "has no settings for it"
                raise SheetError(f"dag overrides name {name!r}, which does not run at preset {preset!r} "
                                 f"({path} {said})")
            continue
        mine = overrides.pop(name, None) or {}
        doc = {**doc, preset: _like(doc, preset, path)}
        schema = Path(root) / name / "settings.schema.yaml"
        if schema.is_file():  # the names its settings give, where its schema marks them (registry: scorer)
            _check_names(doc[preset], schema, f"{path}: {preset}.")
            _check_names(mine, schema, f"dag.{preset}.{name}.")
        dag[name] = _under_user({**doc[preset], **mine}, mine)
        # a replication's own seeds (cheap post-hoc studies afford more): kept beside its settings, which its
        # schema checks; the workflow config's top-level seeds win over them (one seed for a quick look)
        own = dag[name].pop("seeds", None)
        if own is not None and user_seeds is None:
            if not (isinstance(own, list) and own and all(isinstance(x, int) and not isinstance(x, bool)
                                                          and x >= 0 for x in own) and len(set(own)) == len(own)):
                raise SheetError(f"{path}: {preset}.seeds must be a list of distinct seeds >= 0, got {own!r}")
            dag.setdefault("seeds_of", {})[name] = own
    if overrides:
        raise SheetError(f"dag overrides name no replication: {sorted(overrides)}; replications: {replications(root)}")
    return dag


def _like(doc: Mapping[str, Any], preset: str, path: Path) -> dict[str, Any]:
    """A replication's settings at ``preset``: those of the preset its ``like:`` names (a quick look at the
    pretrained models reads their pretrained settings) with its own keys laid over them, or its own alone."""
    from heads.presets import laid_over

    if not isinstance(doc[preset], Mapping):
        return doc[preset]  # its schema says what it should be
    mine = dict(doc[preset])
    base = mine.pop("like", None)
    if base is None:
        return mine
    if base == preset or not isinstance(doc.get(base), Mapping) or "like" in doc[base]:
        raise SheetError(f"{path}: {preset}.like: {base!r} must name another preset's settings in this file, "
                         f"not themselves like one; here: {sorted(k for k, v in doc.items() if v)}")
    return laid_over(doc[base], mine)


def _under_user(settings: dict[str, Any], mine: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the keys the workflow config set (``mine``) taken out of each task's own settings
    (``by_task``, which the replication's runs.py lays over the rest for the task it runs), so a user's key wins
    over a task's as it wins over the replication's: replication < task < user. A ``by_task`` the user gave
    stands as given."""
    by_task = settings.get("by_task")
    if "by_task" in mine or not isinstance(by_task, Mapping):
        return settings
    return {**settings, "by_task": {task: {k: v for k, v in (own or {}).items() if k not in mine}
                                    if isinstance(own, Mapping) else own for task, own in by_task.items()}}


def _check_name(kind: str, value: Any, where: str) -> None:
    """A name of ``kind`` (preset, task, scorer) known to its registry, else a SheetError in one line."""
    from heads.config import ConfigError
    from heads.registry import check_name

    try:
        check_name(kind, value, where)
    except ConfigError as exc:  # an unknown name, or a HEADS_PLUGINS module that cannot be imported
        raise SheetError(str(exc)) from None


def _check_names(doc: Any, schema: Path, where: str) -> None:
    """The names in ``doc`` where its ``schema`` marks them (:func:`heads.registry.check_schema_names`)."""
    from heads.config import ConfigError
    from heads.registry import check_schema_names

    try:
        check_schema_names(doc, schema, where)
    except ConfigError as exc:  # an unknown name, or a HEADS_PLUGINS module that cannot be imported
        raise SheetError(str(exc)) from None


def check_config_names(config: Mapping[str, Any], schema: str | Path, where: str = "config: ") -> None:
    """The workflow config's names (its ``preset``, the presets it keys ``dag`` and ``job_resources`` by, its
    tasks) checked against the registries where its ``schema`` marks them, as a SheetError in one line; its
    schema lists none."""
    _check_names(config, Path(schema), where)


def _check_task_sections(tasks: Any, preset: str) -> None:
    """The workflow config's ``dag.<preset>.tasks`` (task -> run-config sections laid under its runs), checked
    against the run configuration's types before any job runs, with the key named."""
    from heads.config import ConfigError, RunConfig, merge

    if tasks is None:
        return
    if not isinstance(tasks, Mapping):
        raise SheetError(f"dag.{preset}.tasks must map a task to run-config sections, got {tasks!r}")
    for task, sections in tasks.items():
        try:
            merge(RunConfig(task=str(task)), dict(sections or {}))
        except (ConfigError, TypeError, ValueError) as exc:
            raise SheetError(f"dag.{preset}.tasks.{task}: {exc}") from None


def seeds_of(dag: Mapping[str, Any], name: str) -> list[int]:
    """A replication's seeds: its own (``dag["seeds_of"][name]``) where its settings named them, else the preset's."""
    return list((dag.get("seeds_of") or {}).get(name, dag["seeds"]))
