"""The fault suite, command line side: every bad input gets one line naming the file, key or value, exit
status 2, and changes nothing on disk (each folder is hashed before and after). One test per failure class:
corrupt records, bad config files and values, wrong or misplaced models, output folders that are not the
command's own. Resume and data faults are in test_faults_resume.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import refused
from datasets import disable_progress_bars

from heads.cli import main

# The command line turns these bars off before datasets is imported; in a test session an earlier test may
# have imported it first, and its bars on stderr are not the one line under test.
disable_progress_bars()

SHORT = ["train.steps=4", "train.log_every=2", "train.eval_every=2", "train.checkpoint_every=2", "train.progress=false"]


def tree(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` by relative name: two equal trees hold the same bytes."""
    path = Path(path)
    if not path.exists():
        return {}
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        f.relative_to(path).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }



def train_argv(out: Path, base: dict, *overrides: str) -> list[str]:
    return ["train", "--task", "lm", "--preset", "smoke", "--out", str(out), base["data"], *SHORT, *overrides]


# -- corrupt records ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,command,fragment",
    [
        ("config.json", "evaluate", "config.json, line 1: not a run configuration"),
        ("config.json", "train", "config.json, line 1: not a run configuration"),
        ("summary.json", "train", "summary.json, line 1: not a run summary"),
    ],
)
def test_a_corrupt_record_is_named_and_nothing_changes(run, base, capsys, name, command, fragment):
    (run / name).write_text('{"task": "lm", "mod')  # cut mid-write by hand
    before = tree(run)
    argv = ["evaluate", str(run)] if command == "evaluate" else train_argv(run, base)
    refused(argv, capsys, fragment)
    assert tree(run) == before


def test_a_torn_metrics_line_in_the_middle_is_named(run, base, capsys):
    (run / "summary.json").unlink()  # an unfinished run: train resumes it and reads its metrics
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][:20] + "\n"
    (run / "metrics.jsonl").write_text("".join(lines))
    before = tree(run)
    refused(train_argv(run, base), capsys, "metrics.jsonl, line 2: not a JSON object")
    assert tree(run) == before


def test_a_torn_last_metrics_line_is_a_kill_mid_write_and_resumes(run, base):
    (run / "summary.json").unlink()
    metrics = run / "metrics.jsonl"
    whole = metrics.read_text()
    metrics.write_text(whole + '{"step": 5, "train_lo')  # written after the last checkpoint, then killed
    assert main(train_argv(run, base)) == 0
    assert metrics.read_text() == whole


def test_a_kill_mid_checkpoint_save_leaves_nothing_after_the_resume(run, base):
    # the killed DAG in CI once kept a half-written .checkpoint.XXXX beside the run's checkpoint for good
    files = sorted(p.relative_to(run) for p in run.rglob("*") if p.is_file())
    (run / "summary.json").unlink()
    half = run / ".checkpoint.329jx3rt"
    shutil.copytree(run / "checkpoint" / "model", half / "model")
    (run / ".checkpoint.old").mkdir()  # the old copy, renamed aside as the new one moved in
    assert main(train_argv(run, base)) == 0
    assert not half.exists() and not (run / ".checkpoint.old").exists()
    assert sorted(p.relative_to(run) for p in run.rglob("*") if p.is_file()) == files


# -- config files and values -------------------------------------------------------------------------------------
def test_bad_yaml_and_a_missing_config_file_are_named(base, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  lr: [1e-3\n")
    out = tmp_path / "out"
    argv = ["train", "--task", "lm", "--preset", "smoke", "--out", str(out), "--config"]
    refused([*argv, str(bad)], capsys, f"--config {bad}, line 3: not valid YAML")
    refused([*argv, str(tmp_path / "none.yaml")], capsys, f"--config {tmp_path / 'none.yaml'}: no such file")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    refused([*argv, str(listed)], capsys, "holds a list, not a mapping")
    assert not out.exists()


def test_an_overrides_file_that_is_missing_bad_or_not_a_mapping_is_named(base, tmp_path, capsys):
    """The file a workflow job is handed its config in (--overrides-file): refused in one line naming it, on a
    run folder as on a preset, before anything is written."""
    out = tmp_path / "out"
    bad, listed, typo = tmp_path / "bad.json", tmp_path / "list.json", tmp_path / "typo.json"
    bad.write_text('{"train": {"lr": 1e-3,\n')
    listed.write_text("[1]")
    typo.write_text('{"train": {"stesp": 3}}')
    for argv in (["train", "--task", "lm", "--preset", "smoke", "--out", str(out)],
                 ["evaluate", str(base["run"]), "--out", str(tmp_path / "e.json")]):
        refused([*argv, "--overrides-file", str(bad)], capsys, f"{bad}, line 2: not JSON")
        refused([*argv, "--overrides-file", str(tmp_path / "none.json")], capsys,
                f"--overrides-file {tmp_path / 'none.json'}: no such file")
        refused([*argv, "--overrides-file", str(listed)], capsys, "holds a list, not a mapping of config sections")
        refused([*argv, "--overrides-file", str(typo)], capsys, "unknown config key 'train.stesp'")
    assert not out.exists() and not (tmp_path / "e.json").exists()


def test_an_overrides_file_and_its_key_value_twin_resolve_one_config(base, tmp_path):
    """What a workflow job reads from its file is what the same keys typed as KEY=VALUE give (KEY=VALUE wins)."""
    from heads.cli import build_parser
    from heads.cli.common import run_config

    file = tmp_path / "o.json"
    file.write_text(json.dumps({"train": {"steps": 7, "lr": 0.002, "progress": False},
                                "data": {"root": "somewhere"}, "strategy": {"name": "oneshot",
                                                                            "params": {"ratio": 0.5}}}))
    typed = ["train.steps=7", "train.lr=0.002", "train.progress=false", "data.root=somewhere",
             "strategy.name=oneshot", "strategy.params.ratio=0.5"]
    common = ["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "r")]
    by_file = run_config(build_parser().parse_args([*common, "--overrides-file", str(file), "--threads", "2"]))
    by_words = run_config(build_parser().parse_args([*common, *typed, "train.threads=2"]))
    assert by_file.to_dict() == by_words.to_dict()
    assert by_file.train.threads == 2 and by_file.strategy.params == {"ratio": 0.5}
    wins = run_config(build_parser().parse_args([*common, "train.steps=9", "--overrides-file", str(file)]))
    assert wins.train.steps == 9 and wins.train.lr == 0.002
    # on a run folder the file lies over the run's own config.json, as KEY=VALUE does
    over_run = tmp_path / "e.json"
    over_run.write_text(json.dumps({"eval": {"max_examples": 3}}))
    args = build_parser().parse_args(["evaluate", str(base["run"]), "--overrides-file", str(over_run)])
    cfg = run_config(args, base["run"])
    assert cfg.eval.max_examples == 3 and cfg.train.steps == json.loads(
        (base["run"] / "config.json").read_text())["train"]["steps"]


@pytest.mark.parametrize(
    "override,fragment",
    [
        ("model.d=0", "model.d: 0 is not allowed; it must be >= 1"),
        ("model.layers=0", "model.layers: 0 is not allowed; it must be >= 1"),
        ("train.lr=nan", "train.lr: nan is not allowed; it must be a finite number > 0"),
        ("train.lr=-1", "train.lr: -1.0 is not allowed"),
        ("train.threads=-1", "train.threads: -1 is not allowed; it must be >= 1"),
        ("model.vocab=10", "model.vocab: 10 is not allowed; it must be >= 261"),
        ("data.limit=0", "data.limit: 0 is not allowed"),
        ("eval.split=tset", "eval.split: 'tset' is not allowed; it must be one of ['train', 'validation', 'test']"),
        ("eval.beams=0", "eval.beams: 0 is not allowed; it must be >= 1"),
        ("train.snapshots=[99]", "train.snapshots: [99] is not allowed"),
    ],
)
def test_a_bad_value_is_refused_before_anything_is_written(base, tmp_path, capsys, override, fragment):
    out = tmp_path / "out"
    refused(train_argv(out, base, override), capsys, "bad configuration", fragment)
    assert not out.exists()


def test_a_start_that_fails_after_validation_leaves_no_config(base, tmp_path, capsys):
    out = tmp_path / "out"
    refused(train_argv(out, base, f"model.source={tmp_path / 'nowhere'}"), capsys, "model.source", "nowhere")
    assert not out.exists()


def test_a_display_only_key_is_not_a_config_change(base, capsys):
    before = tree(base["run"])
    assert main(train_argv(base["run"], base, "train.progress=true")) == 0  # finished: returned as is
    assert tree(base["run"]) == before
    refused(train_argv(base["run"], base, "train.lr=1e-3"), capsys, "holds a run with another config", "train.lr")
    assert tree(base["run"]) == before


def test_bad_command_options_are_refused_not_reinterpreted(base, tmp_path, capsys):
    run = str(base["run"])
    refused(["evaluate", run, "--split", "bogus"], capsys, "--split: 'bogus' is not one of")
    refused(["score", run, "--scorer", "importance", "--batches", "0"], capsys, "batches: must be >= 1, got 0")
    out = tmp_path / "pruned"
    refused(["prune", run, "--keep", "99", "--out", str(out)], capsys, "--keep 99 exceeds the 4 heads")
    refused(["prune", run, "--keep", "2", "--evaluate", "--out", str(out)], capsys, "--evaluate needs --strategy")
    refused(["ablate", run, "--chunk", "0", "--out", str(tmp_path / "a.json")], capsys, "--chunk must be >= 1")
    refused(["ablate", run, "--layers", "0", "--spread-layers", "2", "--out", str(tmp_path / "a.json")], capsys,
            "name the sample twice")
    refused(["ablate", run, "--spread-layers", "0", "--out", str(tmp_path / "a.json")], capsys, "count >= 1")
    refused(["evaluate", run, "--out", str(tmp_path)], capsys, "is a folder")
    refused(["evaluate", run, "--out", str(base["run"] / "summary.json")], capsys,
            "is the record summary.json of the run folder")
    assert not out.exists()


# -- models: the wrong family, a run folder as a source ------------------------------------------------------------
def test_a_model_family_that_cannot_do_the_task_is_refused(base, tmp_path, capsys):
    out = tmp_path / "mt"
    argv = ["train", "--task", "mt", "--preset", "smoke", "--out", str(out), base["data"], *SHORT]
    refused([*argv, f"model.source={base['run'] / 'model'}"], capsys, "LlamaForCausalLM", "cannot do task 'mt'",
            "families that can: ['marian', 'bergamot']")
    refused([*argv, "model.family=llama"], capsys, "model.family: 'llama' cannot do task 'mt'")
    bare = tmp_path / "bare"  # a model folder without its run: the --task given is the one that applies
    shutil.copytree(base["run"] / "model", bare)
    refused(["evaluate", str(bare), "--task", "cls", "--preset", "smoke", base["data"]], capsys,
            "cannot do task 'cls'")
    assert not out.exists()


def test_a_run_folder_as_model_source_means_its_model(base, tmp_path):
    out = tmp_path / "ft"
    assert main(train_argv(out, base, f"model.source={base['run']}", "train.steps=2")) == 0
    assert json.loads((out / "summary.json").read_text())["status"] == "ok"


# -- output folders ----------------------------------------------------------------------------------------------
def test_prune_never_replaces_its_source_or_a_folder_holding_it(run, capsys, monkeypatch):
    before = tree(run)
    refused(["prune", str(run), "--keep", "2", "--out", str(run)], capsys, "is or holds the source it reads")
    refused(["prune", str(run), "--keep", "2", "--out", str(run / "model"), "--overwrite"], capsys, "the source")
    monkeypatch.chdir(run.parent)
    refused(["prune", str(run), "--keep", "2", "--out", "."], capsys, "is or holds the source it reads")
    assert tree(run) == before


def test_prune_refuses_a_folder_it_did_not_write_unless_told(run, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    refused(["prune", str(run), "--keep", "2", "--out", str(out)], capsys, "holds notes.txt, which prune did not write")
    assert tree(out) == {"notes.txt": hashlib.sha256(b"my notes").hexdigest()}
    refused(["prune", str(run), "--keep", "2", "--out", str(run / "pruned")], capsys, "inside the run folder")
    assert main(["prune", str(run), "--keep", "2", "--out", str(out), "--overwrite"]) == 0
    assert (out / "model.safetensors").is_file() and not (out / "notes.txt").exists()


def test_prune_replaces_its_own_output_whole(run, tmp_path):
    out = tmp_path / "pruned"
    assert main(["prune", str(run), "--keep", "2", "--out", str(out)]) == 0
    first = tree(out)
    assert main(["prune", str(run), "--keep", "3", "--out", str(out)]) == 0
    assert tree(out) != first and sorted(tree(out)) == sorted(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pruned", "run"]  # no temp folder left beside


def test_train_refuses_a_folder_that_is_not_a_run(base, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    refused(train_argv(out, base), capsys, "holds notes.txt, which heads train did not write")
    shutil.copytree(base["run"] / "model", out / "model")
    (out / "notes.txt").unlink()
    before = tree(out)
    refused(train_argv(out, base), capsys, "model was not written by a run")
    assert tree(out) == before


# -- the real process: exit status 2, one line, a traceback only when asked ---------------------------------------
def test_the_process_exits_2_with_one_line_and_debug_shows_the_traceback(tmp_path):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "config.json").write_text("{}")
    (run / "config.json").write_text("{")
    argv = [sys.executable, "-m", "heads", "evaluate", str(run)]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 2, plain.stderr
    assert plain.stderr.splitlines() == [
        f"heads evaluate: {run / 'config.json'}, line 1: not a run configuration "
        "(Expecting property name enclosed in double quotes)"
    ]
    debug = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "HEADS_DEBUG": "1"})
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "BadFileError" in debug.stderr
