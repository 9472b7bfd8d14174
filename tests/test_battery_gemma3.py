"""The battery on Gemma 3 270M (multi-query attention: 18 layers x 4 query heads, one key/value head each), so a
whole key/value group is a layer's whole attention: a floor of one head per layer would let nothing go by whole
groups, and a uniform share of a layer's one group is all of it or none. `model=gemma3` plans with a floor of 0
under its own results folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from battery_plan import plan_shipped
from test_workflow import needs_snakemake, overrides_of

from heads.battery import BATTERY, for_model, kv_heads, layout_settings
from heads.sheet import build, preset_settings

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"
FLOORED = {"prune", "curve", "mask", "speed"}  # the commands that choose heads to remove


def _mqa(kv: int = 1):
    from conftest import build as build_model

    return build_model("gemma3_text", layers=2, heads=4, kv_heads=kv).eval()


def _battery(source: str, user: dict | None = None) -> list:
    dag, _ = for_model(preset_settings(REPLICATIONS, "pretrained", {BATTERY: user} if user else None), source,
                       REPLICATIONS)
    sheet = build(REPLICATIONS, dag)
    return [sheet[label] for label in sheet.of[BATTERY]]


def _floors(entries: list) -> dict[str, set]:
    """Each choosing command's floor as its job is given it (None: the command's own 1)."""
    out: dict[str, set] = {}
    for e in entries:
        if e.command in FLOORED:
            out.setdefault(e.command, set()).add({**e.params, **e.options}.get("floor"))
    return out


# -- why: under multi-query attention a floor of one head keeps every group -------------------------------------
def test_under_multi_query_attention_whole_groups_go_only_with_a_floor_of_zero():
    from heads.analysis.masking import masking
    from heads.analysis.speed import layout_at_ratio
    from heads.scoring.select import group_sizes, select
    from heads.surgery import head_layout, ratio_layout
    from tests.conftest import batch_for

    model = _mqa()
    batches = []
    for k in range(2):
        b = batch_for("gemma3_text", batch=2, seq=10, seed=k)
        b["attention_mask"] = torch.ones_like(b["input_ids"])
        batches.append(b)
    with pytest.raises(ValueError, match="units can close"):
        masking(model, batches[:1], batches[1:], units=("group",), ratios=(0.5,))
    row = masking(model, batches[:1], batches[1:], units=("group",), ratios=(0.5,), floor=0)["rows"][0]
    assert row["heads_closed"] == 4 and sorted(len(c) for c in row["closed"].values() if c) == [4]  # one layer
    scores = {site: torch.rand(len(kept)) for site, kept in head_layout(model).items()}
    with pytest.raises(ValueError, match="maximum reachable ratio is 0.0000"):
        select(scores, 0.5, floor=1, group_size=group_sizes(model))
    assert sorted(map(len, select(scores, 0.5, floor=0, group_size=group_sizes(model)).values())) == [0, 4]
    # the speed job: a uniform third of a layer's one group is none of it; by importance, whole layers go
    assert ratio_layout(model, 0.3333) == head_layout(model)
    assert sorted(map(len, layout_at_ratio(model, 0.5, scores, floor=0).values())) == [0, 4]


# -- the plan ---------------------------------------------------------------------------------------------------
def test_gemma3_plans_every_choosing_job_with_a_floor_of_zero_and_smollm2_as_before(tmp_path):
    assert kv_heads("gemma3") == 1 and kv_heads("smollm2") == 3 and kv_heads("someone/some-model") is None
    gemma = _battery("gemma3")
    assert {e.task for e in gemma} == {"lm"}
    assert _floors(gemma) == {c: {0} for c in FLOORED}
    speed = next(e for e in gemma if e.command == "speed")
    assert speed.options["scorer"] == "importance"  # a third of the layers' attention, not a third of each
    # SmolLM2 (3 groups per layer), by name or as the preset's own: no floor written, every job as committed
    own = build(REPLICATIONS, preset_settings(REPLICATIONS, "pretrained"))
    for entries in (_battery("smollm2"), [own[label] for label in own.of[BATTERY]]):
        assert _floors(entries) == {c: {None} for c in FLOORED}
        assert "scorer" not in next(e for e in entries if e.command == "speed").options
    # a user's floor wins over the layout's
    assert _floors(_battery("gemma3", {"floor": 1})) == {c: {None} for c in FLOORED}


def test_a_local_folder_s_layout_is_read_from_its_config(tmp_path):
    _mqa(kv=1).save_pretrained(tmp_path / "mqa")
    _mqa(kv=2).save_pretrained(tmp_path / "gqa")
    assert kv_heads(str(tmp_path / "mqa")) == 1 and layout_settings(str(tmp_path / "mqa")) == {"floor": 0}
    assert kv_heads(str(tmp_path / "gqa")) == 2 and layout_settings(str(tmp_path / "gqa")) == {}
    assert kv_heads(str(tmp_path / "nothing")) is None


# -- the dry run ------------------------------------------------------------------------------------------------
@needs_snakemake
def test_the_battery_on_gemma3_plans_under_its_own_folder_and_leaves_the_committed_results(tmp_path):
    out, outputs, unchanged = plan_shipped(tmp_path, "gemma3")
    assert outputs and all(p.startswith("results/pretrained/gemma3/")
                           or p == "resources/data/.ready-lm-pretrained-gemma3" for p in outputs), outputs
    assert "results/pretrained/gemma3/pretrained/claims.md" in outputs
    assert any(p.startswith("results/pretrained/gemma3/runs/lm/analysis/mask/") for p in outputs)
    assert unchanged  # the committed SmolLM2 results, byte for byte
    trains = [line.split("Shell command: ", 1)[1] for line in out.splitlines()
              if line.startswith("Shell command: heads train")]
    sources = {overrides_of(line, tmp_path / "repo")["model"]["source"] for line in trains}
    # the baselines train from the shipped model, the fine-tunes from their pruned copies in its own folder
    assert "gemma3" in sources and all(s == "gemma3" or s.startswith("results/pretrained/gemma3/runs/")
                                       for s in sources), sources
    assert "heads mask " in out
    for command in ("heads prune", "heads curve", "heads mask", "heads speed"):  # whole layers may go
        lines = [line for line in out.splitlines() if command + " " in line]
        assert lines and all("floor=0" in line or "--floor 0" in line for line in lines), command
