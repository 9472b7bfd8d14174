"""A preset like another (``like: NAME``): the quick preset is the pretrained one at smaller samples, its models
and data stated once; a replication's settings at it lay their own keys over the other preset's."""

from pathlib import Path

import pytest
import yaml

from heads import presets
from heads.config import ConfigError
from heads.sheet import SheetError, build, preset_settings

ROOT = Path(__file__).resolve().parents[1]


def test_quick_reads_the_pretrained_models_and_data_on_three_shards():
    quick, pretrained = presets.preset("quick"), presets.preset("pretrained")
    assert quick["tasks"] == pretrained["tasks"]
    assert quick["seeds"] == [0, 1, 2] and pretrained["seeds"] == [0, 1, 2, 3]
    assert "like" not in quick


@pytest.mark.parametrize("replication", ["pretrained", "michel2019", "voita2019"])
def test_quick_settings_are_pretrained_ones_with_only_the_keys_it_states(replication):
    doc = yaml.safe_load((ROOT / "replications" / replication / "settings.yaml").read_text())
    own = {k: v for k, v in doc["quick"].items() if k != "like"}
    quick = preset_settings(ROOT / "replications", "quick")
    full = preset_settings(ROOT / "replications", "pretrained")
    mine = {**quick[replication], **({"seeds": quick["seeds_of"][replication]}
                                     if replication in quick.get("seeds_of", {}) else {})}
    theirs = {**full[replication], **({"seeds": full["seeds_of"][replication]}
                                      if replication in full.get("seeds_of", {}) else {})}
    assert {k for k in mine if mine[k] != theirs.get(k)} == set(own)
    assert all(mine[k] == v for k, v in own.items())


def test_the_quick_sheet_runs_the_translation_and_lm_claims_on_three_shards_without_the_oracle():
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", "quick"))
    assert set(sheet.of) == {"pretrained", "michel2019", "voita2019"}
    # every shard-read run on three shards, and three masking replicates (seeds of their own)
    assert {e.seed for e in sheet.runs.values()} == {0, 1, 2}
    def ablated(runs) -> dict[str, list[int]]:
        return {task: sorted(e.seed for e in runs.values() if e.task == task and e.command == "ablate")
                for task in ("lm", "mt")}

    # SmolLM2's single-head ablation and Bergamot's BLEU ablation on one shard each
    assert ablated(sheet.runs) == {"lm": [0], "mt": [0]}
    assert not [label for label in sheet.runs if "oracle" in label]
    full = build(ROOT / "replications", preset_settings(ROOT / "replications", "pretrained"))
    assert [label for label in full.runs if "oracle" in label]  # what quick leaves out, the full preset runs
    assert ablated(full.runs) == {"lm": [0, 1, 2, 3], "mt": [0, 1, 2, 3]}  # the full preset: every shard


def _replication(root: Path, settings: dict) -> Path:
    (root / "rep").mkdir(parents=True)
    (root / "rep" / "runs.py").write_text("def runs(settings, seeds):\n    return []\n")
    (root / "rep" / "settings.yaml").write_text(yaml.safe_dump(settings))
    return root


def test_settings_like_another_preset_lay_their_keys_over_it(tmp_path):
    root = _replication(tmp_path, {"pretrained": {"a": 1, "b": [1, 2], "by_task": {"mt": {"c": 3, "d": 4}}},
                                   "quick": {"like": "pretrained", "b": [1], "by_task": {"mt": {"d": 5}}}})
    assert preset_settings(root, "quick")["rep"] == {"a": 1, "b": [1], "by_task": {"mt": {"c": 3, "d": 5}}}


@pytest.mark.parametrize("like", ["quick", "paper", "pretrained"])  # itself, absent, itself like one
def test_settings_like_themselves_an_absent_preset_or_a_like_are_refused(tmp_path, like):
    root = _replication(tmp_path, {"pretrained": {"like": "tiny", "a": 1}, "tiny": {"a": 0},
                                   "quick": {"like": like}})
    with pytest.raises(SheetError, match=rf"settings.yaml: quick.like: '{like}'"):
        preset_settings(root, "quick")


def test_a_preset_like_another_lays_its_mappings_over_it_and_refuses_a_bad_like(tmp_path, monkeypatch):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"seeds": [0, 1], "tasks": {"lm": {"a": 1, "b": {"c": 2}}}}))
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"like": "base", "seeds": [5],
                                                        "tasks": {"lm": {"b": {"d": 3}}}}))
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump({"like": "mine", "seeds": [0]}))
    (tmp_path / "self.yaml").write_text(yaml.safe_dump({"like": "self", "seeds": [0]}))
    monkeypatch.setattr(presets, "HERE", tmp_path)
    presets._load.cache_clear()
    try:
        assert presets.preset("mine") == {"seeds": [5], "tasks": {"lm": {"a": 1, "b": {"c": 2, "d": 3}}}}
        for bad in ("loop", "self"):
            with pytest.raises(ConfigError, match=rf"{bad}.yaml: like: "):
                presets.preset(bad)
    finally:
        presets._load.cache_clear()
