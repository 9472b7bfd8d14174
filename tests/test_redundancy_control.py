"""``heads redundancy`` as the report defines its signals: both units of a grouped-query model, value and
residual space, JS divergence of attention patterns per query head, a planted duplicate as positive control and
split-half reliability; callers that ask for none of these get the rows they always got."""

import argparse
import json

import pytest
import torch
from conftest import batch_for, build

import heads.cli as cli_module
from heads import models
from heads.analysis.control import attach, control_site, plant_duplicate, planted_control
from heads.analysis.redundancy import redundancy, split_half_r
from heads.cli import analysis
from heads.scoring.js import js_matrices
from heads.scoring.similarity import SimilarityParams, similarity_matrices
from heads.surgery import save, sites


def gqa() -> torch.nn.Module:
    """A tiny Llama with grouped-query attention: 3 layers of 6 query heads in 3 key/value groups."""
    return build("llama", d=48, layers=3, heads=6, kv_heads=3, initializer_range=0.2)


def batches(n: int = 4) -> list[dict]:
    return [batch_for("llama", batch=3, seed=i) for i in range(n)]


def test_old_options_give_the_old_rows():
    """No new option: one row per pooling, in the model's default unit and one space, with the old keys only."""
    model = gqa()
    rows = redundancy(model, batches(2), poolings=("token", "mean"))
    assert [(r["unit"], r["space"], r["pooling"]) for r in rows] == [("group", "value", "token"),
                                                                     ("group", "value", "mean")]
    assert all(set(r) == {"pooling", "space", "threshold", "unit", "redundancy_ratio", "max_similarity", "sites"}
               for r in rows)
    for r in rows:  # the numbers are the group similarities they always were
        want = similarity_matrices(model, batches(2), SimilarityParams(pooling=r["pooling"]),
                                   {s.name: s.group_size for s in sites(model)})
        assert r["max_similarity"] == pytest.approx(max(float(m[~torch.eye(3, dtype=torch.bool)].max())
                                                        for m in want.values()))
    (mha,) = redundancy(build("llama", initializer_range=0.2), batches(2), poolings=("token",), space="residual")
    assert (mha["unit"], mha["space"]) == ("head", "residual")


def test_both_units_and_spaces_in_one_job_a_row_each():
    model = gqa()
    rows = redundancy(model, batches(2), poolings=("token", "mean"), spaces=("value", "residual"),
                      units=("group", "head"))
    keys = [(r["unit"], r["space"], r["pooling"]) for r in rows]
    assert keys == [(u, s, p) for u in ("group", "head") for s in ("value", "residual") for p in ("token", "mean")]
    for r in rows:
        assert all(site["units"] == (3 if r["unit"] == "group" else 6) for site in r["sites"].values())
    # the head rows are the single-head similarity, the group rows the summed groups'
    head = next(r for r in rows if (r["unit"], r["space"], r["pooling"]) == ("head", "residual", "token"))
    want = similarity_matrices(model, batches(2), SimilarityParams(space="residual"))
    assert head["max_similarity"] == pytest.approx(max(float(m[~torch.eye(6, dtype=torch.bool)].max())
                                                       for m in want.values()), abs=1e-6)


@pytest.mark.parametrize("unit", ["group", "head"])
def test_a_planted_duplicate_is_found_in_value_and_residual_space(unit):
    model = gqa()
    before = [p.detach().clone() for p in model.parameters()]
    control = planted_control(model, batches(2), units=[unit], spaces=["value", "residual"],
                              poolings=["token", "mean"], threshold=0.85, js=True)
    assert control["site"] == sites(model)[1].name and control["planted"] == [0, 1]  # the middle layer
    assert {(r["unit"], r["space"], r["pooling"]) for r in control["rows"]} >= {
        (unit, s, p) for s in ("value", "residual") for p in ("token", "mean")}
    for r in control["rows"]:
        assert r["found"] is True
        if r["space"] == "attention":
            assert r["js"] == pytest.approx(0.0, abs=1e-6)
        else:
            assert r["similarity"] == pytest.approx(1.0, abs=1e-5)
    # the model itself is untouched: the duplicate lives in a copy
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_plant_copies_a_group_whole_and_a_head_inside_its_group():
    model = gqa()
    site = sites(model)[0]
    twin = gqa()
    plant_duplicate(twin, site, "group", 0, 2)
    sim = similarity_matrices(twin, batches(2), SimilarityParams(space="residual"),
                              {s.name: s.group_size for s in sites(twin)})[site.name]
    assert sim[0, 2].item() == pytest.approx(1.0, abs=1e-5) and sim[0, 1].item() < 0.99
    heads = similarity_matrices(twin, batches(2))[site.name]  # its query heads pair up one by one
    assert heads[0, 4].item() == pytest.approx(1.0, abs=1e-5) and heads[1, 5].item() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="different key/value groups"):
        plant_duplicate(twin, site, "head", 0, 2)
    with pytest.raises(ValueError, match="cannot copy"):
        plant_duplicate(twin, site, "group", 0, 3)


@pytest.mark.parametrize("family", ["llama", "bert", "gpt2", "marian"])
def test_the_control_works_on_multi_head_families(family):
    model = build(family)
    control = planted_control(model, [batch_for(family, seed=i) for i in range(2)], units=["head"],
                              spaces=["value", "residual"], poolings=["token"], threshold=0.85)
    assert all(r["found"] for r in control["rows"]) and len(control["rows"]) == 2


def test_a_control_site_needs_two_units():
    model = gqa()
    with pytest.raises(ValueError, match="no site 'nowhere'"):
        control_site(model, ["group"], "nowhere")
    assert control_site(model, ["group"], sites(model)[2].label) == sites(model)[2]
    narrow = build("llama", layers=1, heads=2, kv_heads=1, initializer_range=0.2)
    with pytest.raises(ValueError, match="no site has two group"):
        control_site(narrow, ["group"])


def test_split_half_reliability_is_a_correlation():
    model = gqa()
    rows = redundancy(model, batches(4), poolings=("token", "mean"), units=("group", "head"), split_half=True,
                      js=True)
    for r in rows:
        assert isinstance(r["split_half_r"], float) and -1.0 <= r["split_half_r"] <= 1.0
    # one batch has no second half
    (row,) = redundancy(model, batches(1), poolings=("token",), split_half=True)
    assert row["split_half_r"] is None
    # by hand: identical halves correlate perfectly, reversed ones negatively; too few pairs give None
    a = {"s": torch.tensor([[1.0, 0.2, 0.5], [0.2, 1.0, 0.8], [0.5, 0.8, 1.0]])}
    b = {"s": torch.tensor([[1.0, 0.8, 0.5], [0.8, 1.0, 0.2], [0.5, 0.2, 1.0]])}
    assert split_half_r(a, a) == pytest.approx(1.0) and split_half_r(a, b) == pytest.approx(-1.0)
    assert split_half_r({"s": torch.eye(2)}, {"s": torch.eye(2)}) is None


def test_js_row_is_the_share_of_query_heads_with_a_same_pattern_partner():
    """Constructed: in a one-layer model with 4 query heads in 2 groups, query heads 0 and 1 (one group) get the
    same query rows, so they attend alike; heads 2 and 3 are left far apart by large random weights: 2 of 4."""
    model = build("llama", layers=1, heads=4, kv_heads=2, initializer_range=0.5)
    site = sites(model)[0]
    plant_duplicate(model, site, "head", 0, 1)
    data = batches(2)
    js = js_matrices(model, data)[site.name]
    assert js[0, 1].item() == pytest.approx(0.0, abs=1e-6) and js[2, 3] > 0.3 and js[:2, 2:].min() > 0.3
    expected = 0.5
    row = redundancy(model, data, poolings=("token",), js=True)[-1]
    assert (row["definition"], row["space"], row["unit"], row["threshold"]) == ("js", "attention", "head", 0.05)
    assert row["redundancy_ratio"] == pytest.approx(expected) and row["max_similarity"] is None
    assert row["min_js"] == pytest.approx(0.0, abs=1e-6) and row["sites"][site.name]["redundant"] >= 2


def test_attach_puts_each_control_beside_its_row():
    rows = [{"unit": "group", "pooling": "mean", "space": "value"}, {"unit": "head", "pooling": "token",
                                                                     "space": "attention"}]
    control = {"rows": [{"unit": "group", "pooling": "mean", "space": "value", "found": True, "similarity": 1.0},
                        {"unit": "head", "pooling": "token", "space": "attention", "found": False, "js": 0.2}]}
    out = attach(rows, control)
    assert out[0]["control_found"] is True and out[0]["control_similarity"] == 1.0
    assert out[1]["control_found"] is False and out[1]["control_js"] == 0.2 and "control_similarity" not in out[1]


@pytest.fixture
def cli(monkeypatch):
    """``heads.cli.main`` with the analysis commands registered (as tests/test_analysis.py does)."""
    original = cli_module.build_parser

    def build_parser():
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "redundancy" not in sub.choices:
            analysis.register(sub)
        return parser

    monkeypatch.setattr(cli_module, "build_parser", build_parser)
    return cli_module.main


def test_the_command_keeps_its_old_rows_and_adds_units_spaces_js_split_half_and_control(cli, tmp_path,
                                                                                        data_root):
    folder = tmp_path / "gqa"
    save(models.llama(vocab=300, d=48, layers=3, heads=6, kv_heads=3, max_len=64, initializer_range=0.2), folder)
    base = ["redundancy", str(folder), "--task", "lm", "--preset", "smoke", f"data.root={data_root}",
            "--batches", "2"]
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert cli([*base, "--space", "residual", "--out", str(old)]) == 0
    result = json.loads(old.read_text())
    assert "control" not in result
    assert [(r["unit"], r["space"], r["pooling"]) for r in result["rows"]] == [("group", "residual", "token"),
                                                                                ("group", "residual", "mean")]
    assert all(set(r) == {"pooling", "space", "threshold", "unit", "redundancy_ratio", "max_similarity", "sites"}
               for r in result["rows"])
    assert cli([*base, "--units", "head", "group", "--spaces", "value", "residual", "--pooling", "mean", "--js",
                "--split-half", "--control", "--out", str(new)]) == 0
    result = json.loads(new.read_text())
    rows = result["rows"]
    assert [(r["unit"], r["space"]) for r in rows] == [("head", "value"), ("head", "residual"), ("group", "value"),
                                                       ("group", "residual"), ("head", "attention")]
    assert all(r["control_found"] is True and -1 <= r["split_half_r"] <= 1 for r in rows)
    control = result["control"]
    assert control["site"] == "model.layers.1.self_attn" and control["planted"] == [0, 1]
    assert len(control["rows"]) == 5 and all(r["found"] for r in control["rows"])
    with pytest.raises(SystemExit):  # a divergence in bits is in (0, 1]
        cli([*base, "--js", "--js-threshold", "0"])
    with pytest.raises(SystemExit):  # one way to name the space
        cli([*base, "--space", "value", "--spaces", "residual"])
    with pytest.raises(SystemExit, match="2"):  # a site the control cannot use, before any measurement
        cli([*base, "--control", "nowhere", "--out", str(tmp_path / "none.json")])
    assert not (tmp_path / "none.json").exists()


def test_a_claim_selects_a_row_by_unit_and_reads_the_new_measures():
    from heads.report.estimators import definition
    from heads.report.kinds import KINDS

    rows = [{"unit": "group", "pooling": "mean", "space": "value", "redundancy_ratio": 0.1, "split_half_r": 0.8},
            {"unit": "head", "pooling": "mean", "space": "value", "redundancy_ratio": 0.6, "control_similarity": 1.0},
            {"unit": "head", "pooling": "token", "space": "attention", "redundancy_ratio": 0.3, "min_js": 0.02}]
    assert definition(rows, {"measure": "redundancy_ratio"}) == 0.1  # no unit named: the first row, as before
    assert definition(rows, {"measure": "redundancy_ratio", "unit": "head"}) == 0.6
    assert definition(rows, {"measure": "split_half_r", "unit": "group"}) == 0.8
    assert definition(rows, {"measure": "control_similarity", "unit": "head"}) == 1.0
    assert definition(rows, {"measure": "min_js", "space": "attention"}) == 0.02  # its one pooling
    assert definition(rows, {"measure": "redundancy_ratio", "unit": "group", "space": "residual"}) is None
    kind = KINDS["redundancy"]
    assert "unit" in kind.keys and {"min_js", "split_half_r", "control_similarity", "control_js"} <= set(kind.measures)


def test_an_mpnet_duplicate_takes_its_sources_column_of_the_shared_position_bias():
    """MPNet adds a relative-position bias shared by every layer, one column per head: a planted copy of a head's
    projections that kept its own column would attend elsewhere, and a true duplicate would read as unlike
    (all-mpnet-base-v2's control measured 0.79). The copy reads its source's column at the planted site only."""
    model = build("mpnet")
    with torch.no_grad():  # a bias large enough to steer attention, as a trained model's is
        bias = model.mpnet.encoder.relative_attention_bias.weight
        bias.copy_(torch.randn(bias.shape, generator=torch.Generator().manual_seed(0)) * 2.0)
    control = planted_control(model, [batch_for("mpnet", seed=i) for i in range(2)], units=["head"],
                              spaces=["value", "residual"], poolings=["token", "mean"], threshold=0.85, js=True)
    for r in control["rows"]:
        if r["space"] == "attention":
            assert r["js"] == pytest.approx(0.0, abs=1e-6), r
        else:
            assert r["similarity"] == pytest.approx(1.0, abs=1e-5), r
    # the model's own sites read their own columns: the duplicate lives in a copy
    assert all(getattr(model.get_submodule(s.name), "heads_kept", None) is None for s in sites(model))
