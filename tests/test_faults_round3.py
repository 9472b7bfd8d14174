"""Round three of the fault probes (docs/FAULTS_ROUND3.md): inputs of the same kinds as issue 57's, on other
commands, files and values. One test per finding fixed, each failing on the code before its fix."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch
from conftest import build, smoke
from test_faults_cli import refused
from test_readers import _lm_tree
from test_report import _write

from heads.config import ConfigError
from heads.examples import ExampleValues
from heads.params import ParamWarning
from heads.report import RunTree
from heads.report.collect import RunTreeError
from heads.scoring.select import select
from heads.strategies import build_strategy
from heads.tasks import get_task


# -- the report's inputs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field,value,message",
    [
        # a ratio or seed edited apart from the label: read as another ratio's or seed's run, exit 0
        ("ratio", 0.5, r"run.label 'lm/baseline/none/0.0/seed1' contradicts .* spell 'lm/baseline/none/0.5/seed1'"),
        ("seed", 7, r"run.label .* spell 'lm/baseline/none/0.0/seed7'"),
        ("variant", "posthoc", r"run.label .* spell 'lm/posthoc/none/0.0/seed1'"),
        # of the wrong type: a traceback, or a seed truncated
        ("ratio", "abc", r"run.ratio 'abc' is not a number in \[0, 1\]"),
        ("ratio", math.nan, r"run.ratio nan is not a number"),
        ("seed", "1", r"run.seed '1' is not a whole number >= 0"),
        ("seed", 1.5, r"run.seed 1.5 is not a whole number"),
    ],
)
def test_a_run_identity_field_that_contradicts_its_label_is_refused(tmp_path, field, value, message):
    runs = _lm_tree(tmp_path)
    path = runs / "lm" / "baseline" / "none" / "0.0" / "seed1" / "summary.json"
    summary = json.loads(path.read_text())
    summary["run"][field] = value
    _write(path, summary)
    with pytest.raises(RunTreeError, match=r"^lm/baseline/none/0.0/seed1/summary.json: " + message):
        RunTree(runs)


def test_an_analysis_whose_seed_is_not_its_labels_is_refused(tmp_path):
    runs = _lm_tree(tmp_path)
    ident = {"label": "lm/analysis/trivial/seed0", "kind": "trivial", "task": "lm", "seed": 0}
    _write(runs / "lm" / "analysis" / "trivial" / "seed0.json", {"task": "lm", "baselines": {}, "run": ident})
    assert len(RunTree(runs).runs) == 2
    _write(runs / "lm" / "analysis" / "trivial" / "seed0.json",
           {"task": "lm", "baselines": {}, "run": {**ident, "seed": 3}})
    with pytest.raises(RunTreeError, match=r"seed0.json: run.label 'lm/analysis/trivial/seed0' contradicts its "
                                           r"run.seed 3"):
        RunTree(runs)


# -- parameters that leave a strategy idle ---------------------------------------------------------------------
def _curve(**params) -> list[dict]:
    model = build("llama", layers=2, heads=4)  # 8 heads
    levels = iter(range(100))
    return build_strategy("iterative", {"scorer": "magnitude", **params}).curve(model, [], lambda m: {
        "x": float(next(levels))})


def test_a_curve_step_of_less_than_one_head_still_reaches_max_ratio():
    # 0.05 of 8 heads rounds to 0 at level 1: the curve used to end there, at the unpruned model alone (exit 0)
    points = _curve(step=0.05, max_ratio=0.5)
    assert [p["pruned"] for p in points] == [0, 1, 2, 3, 4]
    # a step of whole heads is as before: one level per step
    assert [(p["level"], p["pruned"]) for p in _curve(step=0.25, max_ratio=0.5)] == [(0, 0), (1, 2), (2, 4)]


@pytest.mark.parametrize("params,message", [
    ({}, r"strategy.params.max_ratio: 0.0 of the 8 heads rounds to no head"),  # the default: no curve at all
    ({"max_ratio": 0.05}, r"strategy.params.max_ratio: 0.05 of the 8 heads rounds to no head"),
    ({"max_ratio": 0.5, "floor": 4}, r"strategy.params.floor: 4 keeps every head of every site"),
])
def test_a_curve_that_would_hold_the_unpruned_model_alone_is_refused_before_evaluating(params, message):
    with pytest.raises(ConfigError, match=message):
        _curve(**params)


@pytest.mark.parametrize("scope,least", [("global", "0.0625"), ("per_site", "0.125")])
def test_a_ratio_that_rounds_to_no_head_is_said(scope, least):
    # oneshot ratio=0.05 on 8 heads trained, and posthoc ratio=0.05 pruned, nothing: exit 0 without a word
    scores = {"a": [0.1, 0.2, 0.3, 0.4], "b": [0.5, 0.6, 0.7, 0.8]}
    with pytest.warns(ParamWarning, match=rf"ratio 0.05 of 8 heads \({scope}\) rounds to no head: nothing is pruned; "
                                          rf"a ratio of at least {least} removes one"):
        assert select(scores, 0.05, scope=scope) == {"a": [], "b": []}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParamWarning)  # a ratio that prunes, or none asked for, is not warned about
        assert select(scores, 0.0, scope=scope) == {"a": [], "b": []}
        assert sum(map(len, select(scores, 0.25, scope=scope).values())) == 2


# -- the model a command is given ------------------------------------------------------------------------------
def test_an_unfinished_run_given_as_a_model_is_named_not_read_as_one(tmp_path, capsys):
    # a killed run: its config.json is the run's, not a model's; prune read it as one (a transformers traceback),
    # score and evaluate said --task was missing although the folder holds a config.json
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "lm", "model": {"d": 32}}))
    (run / "metrics.jsonl").write_text("")
    for argv in (["evaluate", str(run)], ["prune", str(run), "--keep", "1", "--out", str(tmp_path / "p")],
                 ["inspect", str(run)]):
        refused(argv, capsys, f"{run}: a run folder without its model/ (the run has not finished)")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("config,why", [
    ({"architectures": ["LlamaForCausalLM"]}, "no model_type"),
    ({"model_type": "bogus"}, "model_type 'bogus' is not one transformers knows"),
    ([1, 2], "a list"),
])
def test_a_model_config_transformers_cannot_read_is_named(tmp_path, capsys, config, why):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    refused(["inspect", str(tmp_path / "m")], capsys, f"{tmp_path / 'm' / 'config.json'}: not a model configuration "
                                                      f"({why})")


# -- values that fail only after the work ----------------------------------------------------------------------
def test_a_diverged_language_models_perplexity_is_infinite_not_a_traceback(data_root):
    # train.lr=0x10 (16) took the validation loss to 2476: math.exp overflowed after the whole run, no summary
    cfg = smoke("lm", data_root)
    task = get_task("lm")
    tokenizer = task.tokenizer(cfg)
    model = task.build_model(cfg, tokenizer)
    with torch.no_grad():
        model.lm_head.weight.mul_(1e4)  # logits so large that the loss passes what exp() can hold
    result = task.evaluate(model, cfg, tokenizer, "validation")
    assert result["loss"] > 710 and result["perplexity"] == math.inf
    # the report's resampling of the same per-example columns agrees
    values = ExampleValues({k: np.asarray(v, dtype=np.float64) for k, v in result["per_example"].items()}, 2)
    assert values.metric("perplexity") == math.inf


# -- where outputs land ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("below", ["", "data"])
def test_data_is_never_prepared_into_a_run_folder(tmp_path, below):
    # `heads data prepare --root RUN` (or `heads train data.root=RUN`) wrote a corpus into another run's folder
    from heads.data.hub import DataError
    from heads.data.prepare import prepare

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("")
    with pytest.raises(DataError, match=rf"data.root {run / below if below else run} lies inside the run folder "
                                        rf"{run}, which only its run writes"):
        prepare("lm", "offline", root=run / below, limit=10)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint", "metrics.jsonl"]


# -- messages that said the wrong thing ----------------------------------------------------------------------------
def test_a_refusal_names_its_command_once(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    line = refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "out"),
                    f"data.root={tmp_path / 'data'}"], capsys, "notes.txt, which heads train did not write")
    assert line.count("heads train:") == 1, line  # was "heads train: heads train: ..."


def test_prune_names_an_unknown_site_without_quoting_the_message(tmp_path, capsys):
    model = tmp_path / "m"
    from heads.surgery import save

    save(build("llama"), model)
    line = refused(["prune", str(model), "--remove", "bogus:1", "--out", str(tmp_path / "p")], capsys,
                   "heads: prune: unknown site 'bogus'; sites: ['model.layers.0.self_attn'")
    assert '"' not in line, line  # a KeyError's str() wrapped the message in quotes
    assert not (tmp_path / "p").exists()


def test_a_folder_where_a_file_belongs_is_not_called_missing(tmp_path, capsys):
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "run"), "--config", str(tmp_path)],
            capsys,
            f"--config {tmp_path}: a folder, not a file")


def test_report_away_from_the_repository_says_where_replications_are_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "unknown replication 'michel2019'; known: " with nothing after it
    refused(["report", "--runs", str(tmp_path), "--replication", "michel2019", "--out", str(tmp_path / "o")], capsys,
            "report: --replications replications: holds no replication", "run from the repository root")


def test_an_output_never_replaces_what_the_command_reads(tmp_path, capsys):
    # `evaluate M --config c.yaml --out c.yaml` replaced the config it read with its result (exit 0)
    from heads.surgery import save

    save(build("llama"), tmp_path / "m")
    config = tmp_path / "c.yaml"
    config.write_text("eval: {split: validation}\n")
    table = tmp_path / "mine.csv"
    table.write_text("text\nhello\n")
    for out, given in ((config, f"--config {config}"), (table, f"data.hub_path={table}")):
        refused(["evaluate", str(tmp_path / "m"), "--task", "lm", "--config", str(config), f"data.hub_path={table}",
                 "--out", str(out)], capsys, f"--out {out} is a file this command reads ({given})")
    assert config.read_text() == "eval: {split: validation}\n" and table.read_text() == "text\nhello\n"


def test_rows_never_replaces_a_record_of_the_tree_it_reads(tmp_path, capsys):
    # an analysis is a file in no run folder: `rows --runs T --out T/.../seed0.json` replaced it with CSV
    from heads.cli import main

    runs = _lm_tree(tmp_path)
    record = runs / "lm" / "analysis" / "trivial" / "seed0.json"
    _write(record, {"task": "lm", "baselines": {}, "run": {"label": "lm/analysis/trivial/seed0", "kind": "trivial",
                                                           "task": "lm", "seed": 0}})
    before = record.read_bytes()
    refused(["rows", "--runs", str(runs), "--out", str(record)], capsys,
            f"--out {record} is a record of the run tree this command reads (--runs {runs})")
    assert record.read_bytes() == before
    # a table written beside the records, or over an earlier one, loses nothing
    assert main(["rows", "--runs", str(runs), "--out", str(runs / "rows.csv")]) == 0
    assert main(["rows", "--runs", str(runs), "--out", str(runs / "rows.csv")]) == 0


def test_memory_limit_zero_is_a_value_not_the_default(tmp_path, capsys):
    # `--limit 0` was read as "no --limit" (4 x --cap-batch) and measured batches up to 128, exit 0
    refused(["memory", str(tmp_path), "--task", "lm", "--reference", str(tmp_path), "--limit", "0"], capsys,
            "memory: --limit 0 is below --cap-batch 32")


def test_a_single_file_without_the_train_split_asked_for_gets_a_hint_that_works(tmp_path):
    # --split train=nope on one file said "e.g. data.splits.train=train[90%:] (and data.splits.train=train[:80%])"
    from heads.data.hub import DataError
    from heads.data.prepare import prepare

    table = tmp_path / "mine.csv"
    table.write_text("text\nhello world\n")
    with pytest.raises(DataError) as exc:
        prepare("lm", "hub", root=tmp_path / "data", hub_path=table, splits={"train": "nope"})
    assert str(exc.value).endswith("slice it instead, e.g. data.splits.train=train[:80%]"), exc.value
