"""Scorer registry (lm-eval-harness style): ``@register_scorer("name")`` on a ``Scorer`` subclass.

A scorer maps a model and some batches to ``Scores``: site name -> float tensor
over the site's kept heads, in ``head_layout`` order. Every scorer follows one
convention, higher = more important = keep, so "remove the lowest" is the
single selection rule (see ``heads.scoring.select``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from heads import registry
from heads.params import ParamError, check_params
from heads.registry import NoParams, Registry, UnknownName, plugin_hint

SCORER_PLUGINS = registry.PLUGIN_GROUPS["scorer"][0]  # the entry-point group of scorers from other packages

Scores = dict[str, torch.Tensor]


class Scorer:
    """Base class: set ``Params`` (a dataclass with defaults) and implement ``_score``.

    The first line of the class docstring is the scorer's description in ``list_scorers``.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams

    @classmethod
    def description(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    def params(self, **overrides: Any) -> Any:
        """The parameter dataclass with ``overrides``, typed and in range (:func:`heads.params.check_params`);
        unknown names fail with the known ones (a :class:`~heads.params.ParamError`, a TypeError too)."""
        return check_params(self.Params, overrides, "", f"scorer {self.name!r}")

    def score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: Any = None) -> Scores:
        params = self.Params() if params is None else params
        if not isinstance(params, self.Params):
            raise TypeError(f"scorer {self.name!r} takes {self.Params.__name__}, got {type(params).__name__}")
        return self._score(model, batches, params)

    def _score(self, model: nn.Module, batches: Iterable[Mapping[str, Any]], params: Any) -> Scores:
        raise NotImplementedError


_REGISTRY: Registry[type[Scorer]] = Registry("scorer")
UnknownScorerError = UnknownName  # the registry's one error type, under the name scoring has always exported


def register_scorer(name: str) -> Callable[[type[Scorer]], type[Scorer]]:
    """Class decorator: register a ``Scorer`` subclass under ``name`` (names are unique)."""

    def decorate(cls: type[Scorer]) -> type[Scorer]:
        if not (isinstance(cls, type) and issubclass(cls, Scorer)):
            raise TypeError(f"register_scorer({name!r}) decorates Scorer subclasses, got {cls!r}")
        return _REGISTRY.register(name)(cls)

    return decorate


def get_scorer(name: str) -> Scorer:
    """A fresh instance of the scorer registered as ``name``; a name not yet registered imports the plugins first
    (``HEADS_PLUGINS``, as strategies do), so ``heads curve --param scorer=yours`` finds one's own; an unknown
    name's error points to docs/ADDING_A_SCORER.md. The names alone, without torch: :func:`heads.registry.known`."""
    if name not in _REGISTRY:
        registry.import_declared("scorer", name)  # one of the package's own, in a module nothing imported yet
    if name not in _REGISTRY:
        # scorers of other packages: their own entry-point group, and the strategies' (where plugins that
        # register both kinds have always been installed), then HEADS_PLUGINS
        registry.plugins("scorer")
    if name not in _REGISTRY:
        raise UnknownName(f"unknown scorer {name!r}; known scorers: {sorted(_REGISTRY)}; {plugin_hint('scorer')}")
    return _REGISTRY.lookup(name)()


def check_scorer_params(name: str, params: Mapping[str, Any] | None, where: str = "--param ",
                        layers: int | None = None) -> Any:
    """The parameters of scorer ``name`` as its ``Params``, every one declared, typed and in range, a key in an
    error named ``{where}KEY`` (``--param chunk``, ``strategy.params.scorer_params.chunk``); given the model's
    number of ``layers``, a ``layers`` parameter naming one it does not have is refused too. The one check
    ``heads score``, a strategy's ``scorer_params`` and a workflow's entries go through, before any work."""
    scorer = get_scorer(name)
    typed = check_params(scorer.Params, params, where, f"scorer {name!r}")
    chosen = getattr(typed, "layers", None)
    if layers is not None and isinstance(chosen, tuple):
        bad = sorted(x for x in set(chosen) if not 0 <= x < layers)
        if bad:
            raise ParamError(f"{where}layers: {bad} are not layers of this model (0 to {layers - 1})")
    return typed


def list_scorers() -> dict[str, str]:
    """Registered scorer names -> one-line description (every one of the package's own, and the plugins'
    imported so far)."""
    registry.import_declared("scorer")
    return {name: cls.description() for name, cls in sorted(_REGISTRY.items())}


def compute_scores(name: str, model: nn.Module, batches: Iterable[Mapping[str, Any]], **params: Any) -> Scores:
    """Shortcut: ``get_scorer(name).score(model, batches, scorer.params(**params))``."""
    scorer = get_scorer(name)
    return scorer.score(model, batches, scorer.params(**params))
