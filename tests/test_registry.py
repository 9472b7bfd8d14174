"""One registry for tasks, scorers, strategies and model families: one error type naming the known entries."""

import pytest

from heads.config import ConfigError
from heads.registry import NoParams, Registry, UnknownName
from heads.scoring import get_scorer
from heads.scoring.registry import Scorer
from heads.strategies import get_strategy
from heads.strategies.base import Strategy
from heads.surgery.families import FAMILIES
from heads.tasks import get_task


@pytest.mark.parametrize("lookup,kind", [(get_task, "task"), (get_scorer, "scorer"), (get_strategy, "strategy"),
                                         (FAMILIES.lookup, "model_type")])
def test_an_unknown_name_is_one_error_that_lists_the_known_ones(lookup, kind):
    with pytest.raises(UnknownName) as info:
        lookup("nope")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, KeyError)
    assert str(info.value).startswith(f"unknown {kind} 'nope'; known ")


def test_no_params_is_shared_and_names_are_unique():
    assert Scorer.Params is NoParams and Strategy.Params is NoParams
    reg: Registry[type] = Registry("thing")

    @reg.register("a")
    class A:
        pass

    assert A.name == "a" and dict(reg) == {"a": A} and reg.get("b") is None
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(type("B", (), {}))
    reg.remove("a")
    assert "a" not in reg
