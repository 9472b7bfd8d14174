"""Michel's masked pruning on a grouped-query model (heads.analysis.masking): single query heads and whole groups
at an equal share, importance with a tied group gate, an oracle by measurement, masks evaluated exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from heads import models
from heads.analysis.masking import (
    evaluate_masks,
    importances,
    masking,
    oracle_masks,
    units_of,
)
from heads.scoring.select import group_sizes
from heads.surgery import install, prune_heads
from heads.surgery.gates import gates
from tests.conftest import batch_for, refused


def _gqa(seed: int = 0):
    # 2 layers x 6 query heads in 2 key/value groups of 3, as SmolLM2's 9 in 3
    return models.llama(vocab=256, d=48, layers=2, heads=6, kv_heads=2, seed=seed).eval()


def _batches(n: int = 2, seed: int = 0) -> list[dict]:
    out = []
    for k in range(n):
        b = batch_for("llama", batch=4, seq=12, seed=seed + k)
        b["attention_mask"] = torch.ones_like(b["input_ids"])  # whole windows, as the LM task's
        out.append(b)
    return out


def test_units_are_query_heads_or_their_key_value_groups():
    model = _gqa()
    heads, groups = units_of(model, "head"), units_of(model, "group")
    assert len(heads) == 12 and len(groups) == 4
    assert [u.positions for u in groups[:2]] == [(0, 1, 2), (3, 4, 5)]


def test_group_importance_is_a_tied_gate_not_the_mean_of_its_heads():
    model, batches = _gqa(), _batches()
    found = importances(model, batches, group_sizes(model))
    site = next(iter(found.group))
    install(model)
    # the tied gate's gradient, taken directly: one scalar gate per group shared by its three heads
    grads = []
    for g in range(2):
        total = 0.0
        for batch in batches:
            for row in range(batch["labels"].shape[0]):
                one = {k: v[row:row + 1] for k, v in batch.items()}
                xi = torch.ones(1, requires_grad=True)
                closed = torch.ones(6)
                gate = torch.cat([closed[: 3 * g], xi.expand(3), closed[3 * g + 3:]])
                with gates(model, {site: gate}):
                    out = model(**one)
                # the per-example loss is the window's mean token loss, as the scorer's
                (grad,) = torch.autograd.grad(out.loss, xi)
                total += float(grad.abs())
        grads.append(total)
    raw = torch.tensor(grads, dtype=torch.float64)
    assert torch.allclose(found.group[site], raw / raw.norm(), atol=1e-4)
    # and it is not the mean of the heads' own scores (|sum| <= sum of |.|)
    heads = found.head[site].view(2, 3).mean(-1)
    assert not torch.allclose(heads / heads.norm(), found.group[site], atol=1e-6)


def test_masking_closes_the_asked_share_in_either_unit():
    model, batches = _gqa(), _batches()
    result = masking(model, batches[:1], batches[1:], units=("head", "group"), orders=("importance", "random"),
                     ratios=(0.25, 0.5), seed=3)
    rows = {(r["unit"], r["order"], r["ratio"]): r for r in result["rows"]}
    # 12 query heads: a quarter is 3 heads or 1 group of 3; half is 6 heads or 2 groups
    assert rows[("head", "importance", 0.25)]["heads_closed"] == 3
    assert rows[("group", "importance", 0.25)]["units_closed"] == 1
    assert rows[("head", "random", 0.5)]["heads_closed"] == 6
    assert rows[("group", "random", 0.5)]["heads_closed"] == 6
    for r in result["rows"]:  # every site keeps a unit open (floor 1)
        for closed in r["closed"].values():
            assert len(closed) < 6
        assert math.isclose(r["delta_loss"], r["loss"] - result["baseline"]["loss"], abs_tol=1e-12)
    cols = result["columns"]
    assert len(cols["masked"]) == len(result["rows"]) and len(cols["masked"][0]) == len(cols["base"]) == 4


def test_a_closed_group_evaluates_as_the_group_pruned():
    model, batches = _gqa(), _batches()
    result = masking(model, batches[:1], batches[1:], units=("group",), orders=("importance",), ratios=(0.5,))
    row = result["rows"][0]
    pruned = _gqa()
    prune_heads(pruned, row["closed"])
    with torch.no_grad():
        out = pruned(**batches[1])
    assert math.isclose(row["loss"], float(out.loss), rel_tol=1e-5)


def test_the_oracle_closes_the_cheapest_unit_it_measures():
    model, batches = _gqa(), _batches()
    units = units_of(model, "head")
    masks, levels = oracle_masks(model, batches[:1], units, "head", [1 / 12], 12, step=0.5)
    assert len(masks) == 1 and len(masks[0].closed) == 1
    # close each head alone and measure: the oracle's choice is the cheapest
    costs = []
    for u in units:
        _, stats = evaluate_masks(model, batches[:1], [type(masks[0])("head", "x", 0.1, (u,))])
        costs.append(float(stats.corpus_loss()[0]))
    assert units[costs.index(min(costs))] == masks[0].closed[0]
    assert levels[0]["measured"] == 12


def test_the_oracle_is_no_worse_than_random_on_its_own_windows():
    model, batches = _gqa(seed=1), _batches()
    result = masking(model, batches, batches, units=("head",), orders=("oracle", "random"), ratios=(0.5,),
                     oracle_step=0.25)
    loss = {r["order"]: r["loss"] for r in result["rows"]}
    assert loss["oracle"] <= loss["random"] + 1e-6


def test_bad_units_orders_and_ratios_are_refused():
    model, batches = _gqa(), _batches(1)
    with pytest.raises(ValueError, match="unknown units or orders"):
        masking(model, batches, batches, units=("layer",))
    with pytest.raises(ValueError, match="ratios must lie"):
        masking(model, batches, batches, ratios=(1.0,))


@pytest.fixture(scope="module")
def mask_tree(tmp_path_factory, data_root):
    """A smoke LM run and two replicates of ``heads mask`` on it, laid out as a run tree."""
    from heads.cli import main

    root = tmp_path_factory.mktemp("mask")
    run = root / "runs" / "lm" / "baseline" / "none" / "0.0" / "seed0"
    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), f"data.root={data_root}",
                 "train.progress=false"]) == 0
    for r in (0, 1):
        label = f"lm/analysis/mask/importance/seed{r}"
        identity = {"arm": "importance", "from_run": "lm/baseline/none/0.0/seed0", "kind": "mask", "knob": None,
                    "label": label, "ratio": 0.0, "seed": r, "task": "lm", "variant": "mask"}
        assert main(["mask", str(run), "--ratios", "0.25", "0.5", "--seed", str(r), "--score-windows", "2",
                     "--test-windows", "6", "--run", json.dumps(identity),
                     "--out", str(root / "runs" / f"{label}.json"), f"data.root={data_root}"]) == 0
    return root / "runs"


def test_mask_writes_rows_and_per_window_losses_by_text(mask_tree):
    result = json.loads((mask_tree / "lm/analysis/mask/importance/seed0.json").read_text())
    kept = json.loads((mask_tree / "lm/analysis/mask/importance/seed0.examples.json").read_text())
    assert [(r["unit"], r["ratio"]) for r in result["rows"]] == [("head", 0.25), ("head", 0.5), ("group", 0.25),
                                                                   ("group", 0.5)]
    assert result["test"]["windows"] == kept["units"] == 6 and len(kept["columns"]["cluster"]) == 6
    tokens = np.asarray(kept["columns"]["tokens"], dtype=float)
    for row, losses in zip(result["rows"], kept["columns"]["masked"], strict=True):
        assert row["loss"] == pytest.approx(float(np.sum(losses) / tokens.sum()), rel=1e-6)
    # replicates score on disjoint slices of the validation windows, on the same test windows
    other = json.loads((mask_tree / "lm/analysis/mask/importance/seed1.json").read_text())
    assert other["baseline"] == result["baseline"] and other["scoring"]["replicate"] == 1


def test_the_report_resamples_texts_for_both_sides_alike(mask_tree):
    from heads.report.collect import RunTree
    from heads.report.measures import measure

    tree = RunTree(mask_tree)
    head = measure(tree, {"from": "mask", "task": "lm", "arm": "importance", "unit": "head", "ratio": 0.5,
                          "measure": "loss"})
    base = measure(tree, {"from": "mask", "task": "lm", "arm": "importance", "unit": "none", "measure": "loss"})
    assert sorted(head.values) == [0, 1] and base.values[0] == base.values[1]
    assert head.units[0] == base.units[0] <= 6  # texts, not windows
    every = np.arange(head.units[0])
    assert head.resample[0](every) == pytest.approx(head.values[0], rel=1e-9)
    assert head.resample[0](None) == pytest.approx(head.values[0], rel=1e-9)
    delta = measure(tree, {"from": "mask", "task": "lm", "arm": "importance", "unit": "group", "ratio": 0.25,
                           "measure": "delta_loss"})
    assert delta.values[0] == pytest.approx(
        measure(tree, {"from": "mask", "task": "lm", "arm": "importance", "unit": "group", "ratio": 0.25,
                       "measure": "loss"}).values[0] - base.values[0], abs=1e-9)


def test_mask_refuses_a_replicate_beyond_the_scoring_split(mask_tree, data_root, tmp_path, capsys):
    run = mask_tree / "lm/baseline/none/0.0/seed0"
    refused(["mask", str(run), "--seed", "100000", "--out", str(tmp_path / "m.json"), f"data.root={data_root}"],
            capsys, "replicate 100000", "disjoint slices")
    refused(["mask", str(run), "--orders", "best", "--out", str(tmp_path / "m.json")], capsys, "unknown ['best']")
    assert not (tmp_path / "m.json").exists()


def test_all_but_one_held_out_chooses_on_one_half_and_scores_on_the_other():
    from heads.scoring.ablation import all_but_one
    from heads.scoring.evaluate import evaluate_closures
    from heads.scoring.session import scoring_mode

    model = _gqa(seed=2)
    batch = _batches(1)[0]
    both = all_but_one(model, [batch])
    held = all_but_one(model, [batch], held_out=True)
    site = next(iter(held))
    first, second = ({k: v[:2] for k, v in batch.items()}, {k: v[2:] for k, v in batch.items()})
    with scoring_mode(model):
        closures = [{site: [q for q in range(6) if q != p]} for p in range(6)]
        base1, alone1 = evaluate_closures(model, [first], closures)
        base2, alone2 = evaluate_closures(model, [second], closures)
    best = int(alone1.corpus_loss().argmin())  # chosen on the first half ...
    assert held[site].best_head == best
    assert held[site].loss == pytest.approx(float(alone2.corpus_loss()[best]), rel=1e-5)  # ... scored on the second
    assert held[site].baseline_loss == pytest.approx(float(base2.corpus_loss()), rel=1e-5)
    assert both[site].baseline_loss != pytest.approx(held[site].baseline_loss)


def test_a_causal_head_s_rare_token_is_the_rarest_of_its_prefix():
    from heads.analysis.roles import _rarest_before, head_roles

    counts = torch.tensor([50.0, 40.0, 3.0, 30.0, 3.0, 1.0])
    ids = torch.tensor([[0, 1, 2, 3, 4, 5, 0]])
    before = _rarest_before({"input_ids": ids}, counts, torch.ones_like(ids, dtype=torch.bool))
    # nothing before position 0; then the running rarest of the prefix, the first on ties (2 before 4), and the
    # query itself left out (position 5, the rarest token of all, is the target only after it)
    assert before.tolist() == [[-1, 0, 1, 2, 2, 2, 5]]
    model = _gqa()
    batch = _batches(1)[0]
    roles = head_roles(model, [batch], counts=torch.ones(256))
    entry = next(iter(roles.values()))
    assert entry["rare"] is not None and entry["rare"].shape == (6,)
    assert float(entry["rare"].min()) >= 0 and float(entry["rare"].max()) <= 1


def test_a_head_matters_when_its_interval_lies_above_the_budget():
    from heads.report.measures import _budget_share

    rng = np.random.default_rng(0)
    base = 3.0 + rng.normal(0, 0.1, 40)
    costly = base + 0.3 + rng.normal(0, 0.01, 40)  # +10 % of the loss, tightly: above a 1 % budget
    harmless = base + rng.normal(0, 0.001, 40)  # within +-1 %
    noisy = base + rng.normal(0, 2.0, 40)  # no verdict either way
    ablated = np.stack([costly, harmless, noisy])
    assert _budget_share(base, ablated, 0.01, "above_budget_share") == pytest.approx(1 / 3)
    assert _budget_share(base, ablated, 0.01, "within_budget_share") == pytest.approx(1 / 3)


def test_a_job_with_several_orders_needs_the_order_named():
    from heads.report.estimators import mask

    rows = [{"unit": "none", "order": "none", "ratio": 0.0, "loss": 3.0},
            {"unit": "group", "order": "importance", "ratio": 0.3, "loss": 3.4},
            {"unit": "group", "order": "oracle", "ratio": 0.3, "loss": 3.2}]
    assert mask(rows, {"unit": "group", "ratio": 0.3, "measure": "loss"}) is None  # ambiguous: nothing picked
    assert mask(rows, {"unit": "group", "order": "oracle", "ratio": 0.3, "measure": "loss"}) == 3.2
    assert mask(rows, {"unit": "none", "order": "oracle", "measure": "loss"}) == 3.0


def test_a_redundancy_share_is_counted_over_units_so_none_redundant_can_decide():
    from heads.report.estimators import Share, definition

    rows = [{"unit": "group", "space": "residual", "pooling": "mean", "redundancy_ratio": 0.0,
             "sites": {"a": {"units": 3, "redundant": 0}, "b": {"units": 3, "redundant": 0}}},
            {"unit": "head", "space": "residual", "pooling": "mean", "redundancy_ratio": 0.25,
             "sites": {"a": {"units": 4, "redundant": 1}, "b": {"units": 4, "redundant": 1}}}]
    sel = {"measure": "redundancy_ratio", "space": "residual", "pooling": "mean"}
    assert definition(rows, {**sel, "unit": "group"}) == Share(0, 6)
    assert definition(rows, {**sel, "unit": "head"}) == Share(2, 8)
    # a row without per-site counts (a stratified view) stays a number
    assert definition([{**rows[0], "sites": None}], {**sel, "unit": "group"}) == 0.0


def test_a_translation_example_is_its_own_text_in_the_shard_it_belongs_to(data_root):
    """The mt task's clusters align with its examples, one per verse pair, cut to the shard alike."""
    from heads.tasks import get_task
    from tests.conftest import smoke

    task = get_task("mt")
    cfg = smoke("mt", data_root)
    tokenizer = task.tokenizer(cfg)
    whole = task.clusters(cfg, tokenizer, "test")
    assert whole == list(range(len(task.examples(cfg, tokenizer, "test"))))
    shard = smoke("mt", data_root, "eval.shards=2", "eval.shard=1")
    assert task.clusters(shard, tokenizer, "test") == whole[len(whole) // 2:2 * (len(whole) // 2)]


def test_michel2019_masks_the_shipped_translation_model_at_the_pretrained_preset():
    """Every replicate reads the first shard's baseline (the model as shipped); one unit, heads (MHA)."""
    from pathlib import Path

    from heads.sheet import build, preset_settings

    root = Path(__file__).resolve().parents[1] / "replications"
    sheet = build(root, preset_settings(root, "pretrained"), names=["michel2019"])
    masks = [e for e in sheet.runs.values() if e.command == "mask"]
    assert {e.arm for e in masks} == {"importance", "oracle"} and len(masks) == 13
    assert all(e.task == "mt" and e.paths["source"] == "mt/baseline/none/0.0/seed0" for e in masks)
    assert all(e.options["units"] == ["head"] for e in masks)
    assert not [e for e in build(root, preset_settings(root, "smoke"), names=["michel2019"]).runs.values()
                if e.command == "mask"]
