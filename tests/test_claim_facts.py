"""A claim's note states counts read from its own runs (``facts:``), never numbers typed into claims.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import _claim, make_tree

from heads.report import RunTree, evaluate, load_all
from heads.report.facts import UNMEASURED, placeholders
from heads.report.spec import ClaimSpecError

MASK = {"from": "mask", "arm": "importance", "order": "importance", "ratio": 0.3}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> RunTree:
    return RunTree(make_tree(tmp_path_factory.mktemp("runs")))


def _note(tree: RunTree, note: str, facts: dict, task: str = "lm") -> str:
    claim = _claim(task=task, a={"from": "mask", "arm": "importance", "unit": "head", "ratio": 0.3,
                                 "measure": "loss"}, note=note, facts=facts)
    return evaluate(claim, tree).note


def test_a_note_states_the_counts_its_runs_measured(tree):
    """The synthetic tree masks 3 of 12 query heads, or 1 whole group of 3 (so 4 groups in all), on every seed."""
    note = _note(tree, "with {closed} of {heads} heads, or {groups} of {all_groups} groups ({in_groups} heads)", {
        "closed": {**MASK, "unit": "head", "field": "heads_closed"},
        "heads": {**MASK, "unit": "head", "field": "heads"},
        "groups": {**MASK, "unit": "group", "field": "units_closed"},
        "all_groups": {**MASK, "unit": "group", "field": "units"},
        "in_groups": {**MASK, "unit": "group", "field": "heads_closed"}})
    assert "with 3 of 12 heads, or 1 of 4 groups (3 heads)" in note


def test_a_fact_lists_the_values_it_found_and_counts_one_seeds_rows(tree):
    """The ablation of the synthetic tree covers 4 heads at each of 6 sites (layers 0 and 1 of an encoder and a
    decoder), on 64 examples a seed."""
    note = _note(tree, "the {n} heads of layers {layers}, over {examples} examples", {
        "n": {"from": "ablation", "count": "rows"},
        "layers": {"from": "ablation", "field": "layer"},
        "examples": {"from": "ablation", "field": "examples"}}, task="mt")
    assert "the 24 heads of layers 0 and 1, over 64 examples" in note


def test_a_fact_its_runs_do_not_have_is_said_unmeasured_not_guessed(tree):
    note = _note(tree, "{closed} heads at 90 %", {"closed": {**MASK, "ratio": 0.9, "unit": "head",
                                                             "field": "heads_closed"}})
    assert f"{UNMEASURED} heads at 90 %" in note


@pytest.mark.parametrize("facts, note, says", [
    ({}, "{closed} heads", "{closed} names no fact"),
    ({"closed": {"from": "nowhere", "field": "x"}}, "{closed}", "is not a kind of rows"),
    ({"closed": {"from": "ablation", "field": "x", "count": "rows"}}, "{closed}", "give one of field:"),
    ({"closed": {"from": "ablation", "count": "heads"}}, "{closed}", "count: takes rows"),
    ({"closed": {"from": "mask", "field": "heads"}}, "{closed}", "name it (arm:)"),
])
def test_a_fact_claims_yaml_gets_wrong_is_refused_in_one_line(facts, note, says):
    with pytest.raises(ClaimSpecError, match=says.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")
                       .replace("}", r"\}")):
        _claim(a={"variant": "baseline", "arm": "none", "ratio": 0.0, "field": "value"}, note=note, facts=facts)


def test_the_battery_states_its_models_counts_from_facts_not_by_hand():
    """The battery's notes on SmolLM2 (lm) and MPNet (retrieval) count heads, groups, windows and orders from
    their runs: no note says a count of SmolLM2's layout ("of 270", "of 90") or of MPNet's ("of 144"). Two still
    do, read from physically pruned runs, whose records count query heads but not groups (the fine-tune's and
    D7's "45 of 90 groups", "9 of 90 groups"): stating them from the runs changes their words, and SmolLM2's
    committed ledger can only be re-rendered where its run tree is."""
    root = Path(__file__).resolve().parent.parent / "replications"
    for task in ("lm", "retrieval"):
        claims = [c for c in load_all(root, ["pretrained"], {"pretrained": task}) if not c.not_tested]
        stated = [c.id for c in claims if any(n in c.note for n in ("of 270", "of 90 ", "of 144"))
                  and c.id not in ("A1-pt-50-groups-ft", "D7-pt-shift")]
        assert stated == [], (task, stated)
        assert sum(bool(placeholders(c.note)) for c in claims) >= 8, task
