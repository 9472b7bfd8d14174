"""The names of what the package registers, read without importing it: its tasks, scorers and strategies (from
their ``@register_*("name")`` decorators in the source), its presets (``heads/presets/<name>.yaml``) and the
model families a config builds from.

Registering a task, scorer or strategy means importing its module, and those modules import torch (seconds);
checking that a workflow's settings name known ones must not. So the names are read from the source files, by
the same decorator that registers them at import (``tests/test_names.py`` holds the two readings equal): a new
scorer is its one file, no list to extend. Names of plugins (``HEADS_PLUGINS``, entry points) and the one lookup
of them all are :func:`heads.registry.known`. Imports only the standard library: :mod:`heads.config` uses it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent

# kind -> (its subpackage, the decorator that registers one, or None: one YAML file each; the guide to adding one)
KINDS = {
    "task": ("tasks", "register_task", "heads/tasks/base.py"),
    "scorer": ("scoring", "register_scorer", "docs/ADDING_A_SCORER.md"),
    "strategy": ("strategies", "register_strategy", "docs/ADDING_A_STRATEGY.md"),
    "preset": ("presets", None, "heads/presets/<name>.yaml"),
}

# Model families a run builds from config (``model.source: config``): heads.models has one builder of each name
# (``heads.models.BUILDERS``, checked against this at import). A config may also name ``bergamot`` and
# ``gemma3``, whose models only ship converged (``model.source`` names one).
FROM_CONFIG = ("llama", "bert", "marian", "mpnet")
SHIPPED_FAMILIES = ("bergamot", "gemma3")


def config_families() -> list[str]:
    """Every ``model.family`` a run config may name, sorted."""
    return sorted(FROM_CONFIG + SHIPPED_FAMILIES)


def declared(path: Path, decorator: str) -> dict[str, str]:
    """Names registered in one source file by ``@decorator("name")`` (or ``@module.decorator("name")``) ->
    the file's stem."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and dec.args and isinstance(dec.args[0], ast.Constant)):
                continue
            func = dec.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called == decorator and isinstance(dec.args[0].value, str):
                found[dec.args[0].value] = path.stem
    return found


@cache
def builtin(kind: str) -> dict[str, str]:
    """The package's own names of ``kind`` (task, scorer, strategy, preset) -> the module (under its subpackage)
    that registers each, read from the source (a preset: its YAML file)."""
    if kind not in KINDS:
        raise KeyError(f"no registry of {kind!r}; registries: {sorted(KINDS)}")
    folder, decorator, _ = KINDS[kind]
    if decorator is None:
        return {p.stem: p.name for p in sorted((HERE / folder).glob("*.yaml"))}
    out: dict[str, str] = {}
    for path in sorted((HERE / folder).glob("*.py")):
        out.update(declared(path, decorator))
    return dict(sorted(out.items()))


def guide(kind: str) -> str:
    """The document that says how to add one of ``kind``."""
    return KINDS[kind][2]
