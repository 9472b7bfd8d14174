"""Configuration: presets < file < overrides, typed, and every bad value named."""

import pytest

from heads.config import ConfigError, parse_overrides
from heads.resolve import resolve


def test_overrides_win_and_are_typed(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("train:\n  lr: 0.01\n  steps: 7\n")
    cfg = resolve("lm", "smoke", file, ["train.steps=9", "model.heads=2", "train.betas=[0.8, 0.9]"])
    assert (cfg.train.lr, cfg.train.steps, cfg.model.heads, cfg.train.betas) == (0.01, 9, 2, (0.8, 0.9))


def test_parse_overrides_nests():
    assert parse_overrides(["a.b=1", "a.c=x", "d="]) == {"a": {"b": 1, "c": "x"}, "d": None}


@pytest.mark.parametrize(
    "overrides,match",
    [
        (["train.lrr=1"], "unknown config key 'train.lrr'"),
        (["train.steps=ten"], "train.steps: expected int"),
        (["model.heads=3"], "3 heads do not divide the model width"),
        (["train.dropout=1.5"], r"train.dropout: 1.5 is outside \[0, 1\)"),
        (["model.family=gpt"], "model.family: 'gpt' is not one of"),
        (["train.schedule=step"], "train.schedule"),
        (["data.source=web"], "data.source"),
        (["strategy.name=oneshot", "strategy.params.scorer=magic"], r"strategy.params.scorer: 'magic' is not one of"),
        (["strategy.name=oneshot", "strategy.params.floor=5"], "floor: 5 exceeds the 4 heads of each site"),
        (["strategy.name=posthoc", "strategy.params.floor=-1"], "floor: must be >= 0"),
        (["strategy.name=scratch", "strategy.params.keep=9"], "keep: 9 exceeds the 4 heads of each site"),
        (["strategy.name=oneshot", "strategy.params.ratio=1.0"], r"ratio: 1.0 is outside \[0, 1\)"),
        (["strategy.name=curriculum", "strategy.params.max_ratio=half"], "max_ratio: expected float"),
        (["strategy.name=magic"], "unknown strategy 'magic'"),
    ],
)
def test_bad_values_are_named(overrides, match):
    with pytest.raises(ConfigError, match=match):
        resolve("lm", "smoke", None, overrides)


def test_unknown_preset_and_task():
    with pytest.raises(ConfigError, match="preset: 'huge' is not one of"):
        resolve("lm", "huge")
    with pytest.raises(KeyError, match="unknown task 'qa'"):
        resolve("qa", "smoke")
