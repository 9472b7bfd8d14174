"""The battery on an MPNet sentence encoder: its task comes from the model (``retrieval``), every battery command
runs on that task, its claims are read on it, and `model=mpnet` plans under its own results folder."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from battery_plan import plan_shipped
from test_workflow import needs_snakemake

from heads.battery import BATTERY, CAUSAL, TASK_OF_TYPE, check_task, for_model, task_of
from heads.sheet import SheetError, build, command_line, preset_settings

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"


def mpnet_folder(where: Path) -> Path:
    """A tiny MPNet saved as a user's checkpoint would be (its config names the family)."""
    from heads.embedding import mpnet

    mpnet(vocab=64, d=32, layers=2, heads=4).save_pretrained(where)
    return where


# -- the task comes from the model ----------------------------------------------------------------------------
def test_the_battery_reads_each_model_on_the_task_its_family_does(tmp_path):
    from heads.tasks import get_task

    assert task_of("mpnet") == "retrieval" and task_of("smollm2") == "lm" == task_of("gemma3")
    assert task_of(str(mpnet_folder(tmp_path / "enc"))) == "retrieval"
    assert task_of("someone/some-llama") == CAUSAL  # a hub id's config is not read at parse time
    for family, task in TASK_OF_TYPE.items():  # the battery never picks a task its model's family cannot do
        assert family in get_task(task).families


def test_for_model_writes_the_task_into_the_battery_and_labels_every_run_by_it(tmp_path):
    folder = mpnet_folder(tmp_path / "my-mpnet")
    dag, slug = for_model(preset_settings(REPLICATIONS, "pretrained"), str(folder), REPLICATIONS)
    assert slug == "my-mpnet" and dag[BATTERY]["task"] == "retrieval"
    assert dag["tasks"]["retrieval"]["model"]["source"] == str(folder) and "lm" not in dag["tasks"]
    sheet = build(REPLICATIONS, dag)
    assert {e.task for e in sheet.runs.values()} == {"retrieval"}
    assert all(e.label.startswith("retrieval/") for e in sheet.runs.values())
    commands = {e.command for e in sheet.runs.values()}
    # no shift corpus of verse pairs: D7's job is absent on this task; every other command runs
    assert commands == {"train", "prune", "ablate", "curve", "speed", "redundancy", "roles", "mask"}
    masks = [e for e in sheet.runs.values() if e.command == "mask"]
    assert all(e.options["units"] == ["head"] for e in masks)  # MHA: a key/value group is one head
    # the preset's own model is still read on its own task, unchanged
    own = build(REPLICATIONS, preset_settings(REPLICATIONS, "pretrained"))
    assert {own[label].task for label in own.of[BATTERY]} == {"lm"}


def test_a_model_its_task_cannot_read_is_refused_in_one_line_and_an_mpnet_is_not(tmp_path):
    from conftest import build as build_model

    from heads.resolve import resolve

    encoder = tmp_path / "bert"
    build_model("bert").save_pretrained(encoder)
    assert task_of(str(encoder)) == "lm"
    with pytest.raises(SheetError, match="the battery reads a causal LM.*cannot do task 'lm'"):
        check_task(resolve("lm", "pretrained", None, [f"model.source={encoder}"]))
    check_task(resolve("retrieval", "pretrained", None, [f"model.source={mpnet_folder(tmp_path / 'enc')}"]))
    with pytest.raises(SheetError, match="the battery reads a sentence encoder.*cannot do task 'retrieval'"):
        check_task(resolve("retrieval", "pretrained", None, [f"model.source={encoder}"]))


def test_a_task_setting_that_is_no_setting_is_refused():
    dag = preset_settings(REPLICATIONS, "pretrained", {"pretrained": {"task": "retrieval",
                                                              "by_task": {"retrieval": {"no_such": 1}}}})
    with pytest.raises(SheetError, match=r"by_task.retrieval sets \['no_such'\]"):
        build(REPLICATIONS, dag)


def test_a_users_key_wins_over_the_tasks_own_and_the_tasks_own_over_the_default(tmp_path):
    """replication defaults < by_task[task] < the workflow config's keys: a user who sets random_orders on MPNet
    gets theirs, not by_task.retrieval's 1; where they are silent (mask_test_windows) by_task's 32 still wins over
    the default's 128."""
    def plan(mine: dict) -> dict:
        dag, _ = for_model(preset_settings(REPLICATIONS, "pretrained", {"pretrained": mine} if mine else None),
                           str(mpnet_folder(tmp_path / "enc")), REPLICATIONS)
        sheet = build(REPLICATIONS, dag)
        runs = [sheet[label] for label in sheet.of[BATTERY]]
        curve = next(e for e in runs if e.command == "curve" and e.arm == "random")
        mask = next(e for e in runs if e.command == "mask")
        return {"orders": curve.params.get("orders", 1), "test_windows": mask.options["test_windows"]}

    assert plan({}) == {"orders": 1, "test_windows": 32}  # by_task.retrieval over the defaults (5, 128)
    assert plan({"random_orders": 2}) == {"orders": 2, "test_windows": 32}
    assert plan({"random_orders": 2, "mask_test_windows": 128}) == {"orders": 2, "test_windows": 128}
    # a by_task the user gives stands as given
    assert plan({"random_orders": 2, "by_task": {"retrieval": {"random_orders": 4}}})["orders"] == 4


def test_the_ablation_runs_on_the_first_shards_its_settings_name_and_on_every_shard_by_default(tmp_path):
    """``ablation_shards`` (MPNet's by_task: 1, an ablation costing half an hour of a core there) keeps the ablation
    to the first shards; unset (SmolLM2's), every shard ablates."""
    def ablated(dag: dict) -> list[int]:
        sheet = build(REPLICATIONS, dag)
        return sorted(sheet[label].seed for label in sheet.of[BATTERY] if sheet[label].command == "ablate")

    mpnet_dag, _ = for_model(preset_settings(REPLICATIONS, "pretrained"), str(mpnet_folder(tmp_path / "enc")),
                             REPLICATIONS)
    assert ablated(mpnet_dag) == [0]
    assert ablated(preset_settings(REPLICATIONS, "pretrained")) == [0, 1, 2, 3]
    two, _ = for_model(preset_settings(REPLICATIONS, "pretrained", {"pretrained": {"ablation_shards": 2}}),
                       str(mpnet_folder(tmp_path / "enc2")), REPLICATIONS)
    assert ablated(two) == [0, 1]  # the user's key wins over the task's


def test_the_plan_sizes_mpnet_from_its_layout():
    """12 x 12 heads x 64 (all-mpnet-base-v2's config): parameters, heads per site and a job's memory."""
    from heads.plan import _SHAPES, job_memory_mb, shape
    from heads.resolve import resolve

    cfg = resolve("retrieval", "pretrained", None, ["model.source=config", "model.layers=12", "model.heads=12",
                                                    "model.d=768", "model.ff=3072", "model.vocab=30527",
                                                    "train.steps=1"])
    s = shape(cfg)
    assert s.heads == (12,) * 12 and 105e6 < s.params < 112e6
    assert 16 * s.params / 2**20 < job_memory_mb(cfg) < 16 * s.params / 2**20 + 8000
    _SHAPES.clear()


# -- every battery command on the retrieval task ---------------------------------------------------------------
SMALL = {"seeds": [0], "pretrained": {
    "task": "retrieval", "ratios": [0.5], "score_batches": 1, "finetune": [0.5], "finetune_steps": 1,
    "ablation_layers": 6, "ablation_batches": 2, "curve_step": 0.25, "curve_max": 0.5, "curve_examples": 16,
    "random_orders": 2, "speed_ratios": [0.0, 0.5], "speed_batches": [1, 2], "speed_examples": 2,
    "redundancy_batches": 2, "roles_batches": 1, "mask_replicates": 2, "mask_ratios": [0.25, 0.5],
    "mask_score_windows": 2, "mask_test_windows": 4, "oracle_replicates": 1, "oracle_score_windows": 1,
    "oracle_step": 0.25,
    "by_task": {"retrieval": {"shift_datasets": [], "mask_units": ["head"], "oracle_units": ["head"]}}}}
TINY = {"retrieval": {"model": {"source": "config", "family": "mpnet", "layers": 2, "d": 32, "heads": 4,
                                "vocab": 300},
                      "data": {"limit": 400, "seq_len": 24, "batch_size": 2},
                      "train": {"steps": 1, "eval_every": 1, "checkpoint_every": 1, "eval_batches": 1},
                      "eval": {"max_examples": 24}}}


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_battery_command_runs_on_a_tiny_mpnet_and_writes_what_the_claims_read(tmp_path, data_root):
    from heads.cli import main
    from heads.freshness import write_overrides
    from heads.report.spec import load_claims

    dag = preset_settings(REPLICATIONS, "pretrained", {**SMALL, "tasks": TINY})
    sheet = build(REPLICATIONS, dag)
    runs = tmp_path / "runs"
    # baselines, then pruned models, then their fine-tunes and the analyses: the battery's, not the translation's
    entries = sorted((sheet[label] for label in sheet.of[BATTERY]),
                     key=lambda e: e.variant != "baseline" and (1 if e.command == "prune" else 2))
    files = write_overrides(sheet, str(runs), str(data_root), str(tmp_path / "settings"))
    for e in entries:
        line = command_line(e, str(runs), "pretrained", str(data_root), threads=1, overrides=files.get(e.label))
        assert main(shlex.split(line)[1:]) == 0, line
    assert {e.command for e in entries} >= {"train", "prune", "ablate", "curve", "speed", "redundancy", "roles",
                                            "mask"}
    base = _read(runs / "retrieval/baseline/none/0.0/seed0/summary.json")
    assert base["metric"] == "accuracy" and 0 <= base["value"] <= 1
    ft = _read(runs / "retrieval/posthoc_ft/importance/0.5/seed0/summary.json")
    assert "loss" in ft["eval"] and ft["heads"] == 4  # the pruned model fine-tuned, its loss evaluated (A1-ft)
    analysis = runs / "retrieval/analysis"
    ablation = _read(analysis / "ablation/seed0.json")  # B1: every head of the sampled layers, with its power
    assert ablation["test"] == "loss" and ablation["layers"] == [0, 1] and len(ablation["heads"]) == 8
    assert all(h["detectable"] > 0 and "p_value" in h for h in ablation["heads"])
    assert ablation["all_but_one_held_out"]  # B2: each layer's best head chosen on one half, scored on the other
    for scorer in ("importance", "random", "similarity"):  # B3: acc@1 per level
        curve = _read(analysis / f"curve/{scorer}/seed0.json")
        assert curve["metric"] == "accuracy" and [p["ratio"] for p in curve["points"]] == [0.0, 0.25, 0.5]
    red = _read(analysis / "redundancy/base/seed0.json")["rows"]  # D5: units and spaces, controls, split halves
    assert {(r["unit"], r["space"]) for r in red if r["space"] != "attention"} == \
        {(u, s) for u in ("head", "group") for s in ("value", "residual")}
    assert all(r["control_found"] and r["split_half_r"] is not None for r in red)
    roles = _read(analysis / "roles/importance0.5/seed0.json")  # C2: an encoder's self-attention roles
    assert {h["kind"] for h in roles["heads"]} == {"self"} and roles["summary"]["kept"]["heads"] == 4
    assert all(h["rare"] is not None and h["positional"] is not None for h in roles["heads"])
    speed = _read(analysis / "speed/seed0.json")["rows"]  # B5
    assert {(r["ratio"], r["batch"]) for r in speed} == {(x, b) for x in (0.0, 0.5) for b in (1, 2)}
    for arm, orders in (("importance", {"importance"}), ("oracle", {"importance", "oracle"})):  # A1, B3-oracle
        mask = _read(analysis / f"mask/{arm}/seed0.json")
        assert {r["order"] for r in mask["rows"]} == orders and {r["unit"] for r in mask["rows"]} == {"head"}
        assert all(r["loss"] > 0 and r["heads_closed"] in (2, 4) for r in mask["rows"])
    # the claims read on the task: every selector names it, and what the task cannot give says why
    claims = load_claims(REPLICATIONS / "pretrained" / "claims.yaml", task="retrieval")
    assert {c.task for c in claims} == {"retrieval"}
    assert all(c.a.get("task") == "retrieval" for c in claims if not c.not_tested)
    assert "site_kind" not in json.dumps([c.a for c in claims]).replace('"site_kind": "self"', "")


# -- the claims follow the battery's task ----------------------------------------------------------------------
def test_the_claims_are_read_on_the_battery_task_and_say_why_where_the_task_cannot_give_them():
    from heads.report.spec import ClaimSpecError, load_all, load_claims

    path = REPLICATIONS / "pretrained" / "claims.yaml"
    lm = {c.id: c for c in load_claims(path)}
    enc = {c.id: c for c in load_claims(path, task="retrieval")}
    assert set(lm) == set(enc) and {c.task for c in lm.values()} == {"lm"}
    untested = {i for i, c in enc.items() if c.not_tested}
    assert untested == {"A1-pt-30-groups", "A1-pt-50-groups", "E1-pt-30", "E1-pt-50", "A3-pt", "D5-pt",
                        "D7-pt-shift"}
    assert "multi-head" in enc["E1-pt-30"].not_tested and "verse pairs" in enc["D7-pt-shift"].not_tested
    # directions unchanged (both losses are lower-better), the LM's own claims untouched
    assert all(enc[i].direction == lm[i].direction for i in set(lm) - untested)
    models_text = next(p for p in enc["A1-pt-30"].requires if p.name == "pt-models-text")
    assert models_text.at_least == 0.5 and models_text.at_most is None and models_text.a["task"] == "retrieval"
    assert {p.a["task"] for c in lm.values() for p in c.requires} == {"lm"}
    with pytest.raises(ClaimSpecError, match="says nothing of task 'mt'"):
        load_claims(path, task="mt")
    # other replications' claims ignore the task asked for (theirs name their own)
    assert {c.id for c in load_all(REPLICATIONS, tasks={"michel2019": "retrieval"})} == \
        {c.id for c in load_all(REPLICATIONS)}


def test_a_task_entry_that_names_an_unknown_claim_is_refused_whatever_task_is_read(tmp_path):
    from heads.report.spec import ClaimSpecError, load_claims

    (tmp_path / "rep").mkdir()
    spec = tmp_path / "rep" / "claims.yaml"
    spec.write_text(
        "task: lm\nclaims:\n  - {id: X1, text: t, kind: value, a: {variant: baseline, field: value},"
        " direction: less}\ntasks:\n  retrieval:\n    claims:\n      X2: {not_tested: because}\n")
    with pytest.raises(ClaimSpecError, match=r"names \['X2'\]"):
        load_claims(spec)


# -- the dry run ------------------------------------------------------------------------------------------------
@needs_snakemake
def test_the_battery_on_mpnet_plans_under_its_own_folder_and_leaves_the_committed_results(tmp_path):
    out, outputs, unchanged = plan_shipped(tmp_path, "mpnet")
    assert outputs and all(p.startswith("results/pretrained/mpnet/")
                           or p == "resources/data/.ready-retrieval-pretrained-mpnet" for p in outputs), outputs
    assert "results/pretrained/mpnet/pretrained/claims.md" in outputs
    assert any(p.startswith("results/pretrained/mpnet/runs/retrieval/analysis/mask/") for p in outputs)
    assert "analysis/shift" not in " ".join(outputs)  # no shift job (its table renders empty)
    assert unchanged  # the committed SmolLM2 results, byte for byte
    assert "heads mask " in out and "--task retrieval" in out


def test_report_yaml_reads_its_titles_and_captions_on_the_battery_task(tmp_path):
    """report.yaml's ``tasks:`` lays a task's titles and captions over the tables' own on that task only; SmolLM2's
    (the default) are unchanged, and an overlay naming no declared table fails whichever task is read."""
    from heads.report.render import _declared
    from heads.report.table_spec import TableSpecError

    lm, _ = _declared("pretrained", "replications", "lm")
    plain, _ = _declared("pretrained", "replications")
    encoder, _ = _declared("pretrained", "replications", "retrieval")
    assert {t: (s.title, s.caption) for t, s in lm.items() if s} == {t: (s.title, s.caption)
                                                                    for t, s in plain.items() if s}
    assert "270" in lm["masking"].caption and "270" not in encoder["masking"].caption
    assert encoder["pruned"].title.startswith("The sentence encoder") and lm["pruned"].title.startswith("SmolLM2")
    assert encoder["pruned"].columns == lm["pruned"].columns  # only the words change

    rep = tmp_path / "mine"
    rep.mkdir()
    spec = "tables:\n  pruned:\n    rows: runs\n    by: [task]\n    columns: [task]\n    title: T\n    caption: C\n"
    overlay = "figures: []\ntasks:\n  retrieval:\n    tables:\n      {}: {{title: R}}\n"
    (rep / "report.yaml").write_text(spec + overlay.format("pruned"))
    assert _declared("mine", tmp_path, "retrieval")[0]["pruned"].title == "R"
    assert _declared("mine", tmp_path, "lm")[0]["pruned"].title == "T"
    (rep / "report.yaml").write_text(spec + overlay.format("nope"))
    with pytest.raises(TableSpecError, match="tasks.retrieval.tables.nope"):
        _declared("mine", tmp_path, "lm")
