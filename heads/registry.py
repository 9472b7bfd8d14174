"""One registry for everything looked up by name: tasks, scorers, strategies and model families.

``Registry`` is a read-only mapping (name -> entry) with a ``register`` decorator and a ``lookup`` whose error,
:class:`UnknownName`, names the known entries. It is a configuration error (a ``ConfigError``) and a lookup
error (a ``KeyError``) at once, so callers catch it either way. ``NoParams`` is the parameter dataclass of
anything that takes none. :func:`known` lists a kind's names and :func:`check_name` checks one, without importing
the modules that register them (torch) unless a plugin is named. Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from heads import names
from heads.config import ConfigError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class NoParams:
    """For scorers and strategies without parameters."""


class UnknownName(ConfigError, KeyError):
    """A name nobody registered; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


def plugin_hint(kind: str) -> str:
    """How a ``kind`` (strategy, scorer) of one's own is found, for the error of a name nobody registered: its
    module is imported when named in ``HEADS_PLUGINS`` (or installed under the kind's entry-point group); the
    guide to writing one (``docs/ADDING_A_SCORER.md``, ...)."""
    where = os.environ.get(PLUGINS_ENV)
    guide = names.guide(kind if kind in names.KINDS else "strategy")
    if where:
        return f"{PLUGINS_ENV}={where!r} was imported and does not register it ({guide})"
    group = PLUGIN_GROUPS.get(kind, PLUGIN_GROUPS["strategy"])[0]
    return (f"a {kind} of your own registers when its module is imported: name that module in {PLUGINS_ENV} "
            f"({PLUGINS_ENV}=my_module), or install it under the {group} entry points ({guide})")


PLUGINS_ENV = "HEADS_PLUGINS"
# kind -> the entry-point groups its plugins are installed under (scorers and strategies have always shared
# theirs: a plugin may register both)
PLUGIN_GROUPS = {"task": ("heads.tasks",), "scorer": ("heads.scorers", "heads.strategies"),
                 "strategy": ("heads.strategies", "heads.scorers"), "preset": ()}


class PluginError(ConfigError):
    """A module named in ``HEADS_PLUGINS`` that cannot be imported (a typo, a folder not on the path)."""


def load_plugins(*groups: str) -> None:
    """Import the plugins of one kind: the modules installed under the entry-point ``groups`` (``heads.tasks``,
    ``heads.scorers``, ``heads.strategies``), then every module named in ``HEADS_PLUGINS`` (comma-separated).
    Importing a module is what registers its tasks, scorers or strategies; the registries call this the first
    time a name is not found."""
    import importlib
    from importlib.metadata import entry_points

    for group in groups:
        for ep in entry_points(group=group):
            ep.load()
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module == exc.name or module.startswith(f"{exc.name}.")):
                raise  # the plugin exists and itself imports a missing module: its own traceback says which
            raise PluginError(f"{PLUGINS_ENV}={os.environ[PLUGINS_ENV]!r}: no module named {module!r} can be "
                              "imported; install it or put its folder on PYTHONPATH") from None


_LIVE: dict[str, Registry] = {}


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one kind (``kind``: "task", "scorer", ...) by name; names are unique."""

    def __init__(self, kind: str, plural: str | None = None):
        self.kind, self.plural = kind, plural or f"{kind}s"
        self._entries: dict[str, T] = {}
        _LIVE[kind] = self  # what :func:`known` reads once the kind's package is imported

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register a class under ``name`` (and set its ``name``); a second, different one fails."""

        def decorate(entry: T) -> T:
            self.add(name, entry)
            if isinstance(entry, type):
                entry.name = name
            return entry

        return decorate

    def add(self, name: str, entry: T) -> None:
        old = self._entries.get(name)
        if old is not None and old is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered ({getattr(old, '__name__', old)!r})")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Unregister ``name`` (a test's temporary entry)."""
        self._entries.pop(name, None)

    def lookup(self, name: str) -> T:
        """The entry registered as ``name``; :class:`UnknownName` listing the known ones otherwise."""
        if name not in self._entries:
            raise UnknownName(f"unknown {self.kind} {name!r}; known {self.plural}: {sorted(self._entries)}")
        return self._entries[name]

    def __getitem__(self, name: str) -> T:
        return self.lookup(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def plugins(kind: str) -> None:
    """Import the plugins that may register a ``kind`` (task, scorer, strategy): its entry-point groups, then
    the ``HEADS_PLUGINS`` modules. Presets are files, which no plugin adds."""
    if PLUGIN_GROUPS[kind]:
        load_plugins(*PLUGIN_GROUPS[kind])


def import_declared(kind: str, name: str | None = None) -> None:
    """Import the package's module that registers ``name`` of ``kind`` (every such module without ``name``):
    a scorer added as one file under heads/scoring/ is found without an import line anywhere else."""
    import importlib

    folder = names.KINDS[kind][0]
    modules = names.builtin(kind)
    for module in sorted(set(modules.values()) if name is None else {modules[name]} if name in modules else ()):
        importlib.import_module(f"heads.{folder}.{module}")


def known(kind: str) -> list[str]:
    """Every name of ``kind`` (task, scorer, strategy, preset), sorted: the package's own, read from its source
    (:func:`heads.names.builtin`, no torch), those its plugins register (imported here, where any is named),
    and any registered at run time (a test's). Imports nothing heavy unless a plugin does."""
    plugins(kind)
    live = _LIVE.get(kind)
    return sorted(set(names.builtin(kind)) | set(live or ()))


def check_name(kind: str, value: object, where: str) -> None:
    """Refuse a ``value`` that is not a known name of ``kind``, in one line: ``where`` (the file and key, e.g.
    ``replications/michel2019/settings.yaml: smoke.curve_scorers``), the value and the known names. A package's
    own name is found without importing anything."""
    if isinstance(value, str) and value in names.builtin(kind):
        return
    options = known(kind)
    if value in options:
        return
    hint = plugin_hint(kind) if PLUGIN_GROUPS[kind] else f"a {kind} is one file, {names.guide(kind)}"
    raise UnknownName(f"{where}: unknown {kind} {value!r}; known {_plural(kind)}: {options}; {hint}")


def _plural(kind: str) -> str:
    return "strategies" if kind == "strategy" else f"{kind}s"


# -- names in a settings file, at the places its JSON schema marks ------------------------------------------------
SCHEMA_KEYWORD = "registry"  # a schema annotation, ``registry: scorer``: the string here names a scorer


def check_schema_names(doc: Any, schema: str | Path, where: str) -> None:
    """Every name in ``doc`` that its JSON ``schema`` marks (``registry: KIND`` on a string, or on
    ``propertyNames`` for a mapping's keys) checked against the registry of that kind (:func:`check_name`): a
    schema says where a scorer's name goes, never which scorers exist. ``where`` prefixes the key in an error
    (``replications/michel2019/settings.yaml: smoke.``). Local and relative-file ``$ref`` are followed; values of
    the wrong type are left to the schema's own validation."""
    path = Path(schema).resolve()
    _walk(doc, _schema(path), path, where, "")


@cache
def _schema(path: Path) -> dict:
    from heads.yamlio import read_yaml

    return read_yaml(path, ConfigError) or {}


def _walk(value: Any, node: Any, file: Path, where: str, key: str) -> None:
    if not isinstance(node, Mapping):
        return
    if isinstance(node.get("$ref"), str):
        target, _, pointer = node["$ref"].partition("#")
        file = (file.parent / target).resolve() if target else file
        # a file not there (an example's schema before its folder is copied into replications/) names nothing
        sub: Any = _schema(file) if file.is_file() else None
        for part in filter(None, pointer.split("/")):
            sub = sub.get(part) if isinstance(sub, Mapping) else None
        _walk(value, sub, file, where, key)
    kind = node.get(SCHEMA_KEYWORD)
    if isinstance(kind, str) and isinstance(value, str):
        check_name(kind, value, f"{where}{key}")
    if isinstance(value, Mapping):
        props, extra, keys = node.get("properties") or {}, node.get("additionalProperties"), node.get("propertyNames")
        for k, v in value.items():
            at = f"{key}.{k}" if key else str(k)
            if isinstance(keys, Mapping) and isinstance(keys.get(SCHEMA_KEYWORD), str):
                check_name(keys[SCHEMA_KEYWORD], k, f"{where}{at}")
            _walk(v, props[k] if k in props else extra, file, where, at)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _walk(v, node.get("items"), file, where, f"{key}[{i}]")
