"""One registry for everything looked up by name: tasks, scorers, strategies and model families.

``Registry`` is a read-only mapping (name -> entry) with a ``register`` decorator and a ``lookup`` whose error,
:class:`UnknownName`, names the known entries. It is a configuration error (a ``ConfigError``) and a lookup
error (a ``KeyError``) at once, so callers catch it either way. ``NoParams`` is the parameter dataclass of
anything that takes none. Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

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
    module is imported when named in ``HEADS_PLUGINS`` (or installed under the ``heads.strategies`` entry points)."""
    where = os.environ.get("HEADS_PLUGINS")
    if where:
        return f"HEADS_PLUGINS={where!r} was imported and does not register it"
    group = "heads.scorers" if kind == "scorer" else "heads.strategies"
    return (f"a {kind} of your own registers when its module is imported: name that module in HEADS_PLUGINS "
            f"(HEADS_PLUGINS=my_strategies), or install it under the {group} entry points "
            "(docs/ADDING_A_STRATEGY.md)")


PLUGINS_ENV = "HEADS_PLUGINS"


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


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one kind (``kind``: "task", "scorer", ...) by name; names are unique."""

    def __init__(self, kind: str, plural: str | None = None):
        self.kind, self.plural = kind, plural or f"{kind}s"
        self._entries: dict[str, T] = {}

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
