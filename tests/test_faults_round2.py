"""The fault suite, round two (issue 37): outputs onto records, foreign folders, readers that skip in silence,
values YAML retypes, file-system errors and interruptions. Each test is one class of failure, with the example
that was found; every refusal is one line, exit status 2, and changes nothing on disk."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from test_faults_cli import SHORT, refused, tree

from heads.cli import main
from heads.config import parse_overrides
from heads.sheet import SheetError, custom, preset_settings

ROOT = Path(__file__).resolve().parents[1]


# -- 1. no command writes onto a run's records, nor replaces a folder it did not write ------------------------
@pytest.mark.parametrize("out", ["checkpoint/state.json", "checkpoint/optimizer.safetensors", "summary.json",
                                 "model/notes.json"])
def test_a_result_file_is_never_written_onto_a_runs_records(run, capsys, out):
    before = tree(run)
    refused(["score", str(run), "--scorer", "importance", "--out", str(run / out)], capsys, str(run))
    assert tree(run) == before


@pytest.mark.parametrize("out", ["checkpoint/model", "model/pruned", "snapshots/x"])
def test_prune_never_writes_into_a_runs_own_parts_even_when_told(run, capsys, out):
    before = tree(run)
    refused(["prune", str(run), "--keep", "2", "--out", str(run / out), "--overwrite"], capsys, "only the run writes")
    assert tree(run) == before


def test_prune_keeps_a_model_folder_it_did_not_write(run, tmp_path, capsys):
    mine = tmp_path / "my-model"
    shutil.copytree(run / "model", mine)  # a model of the user's own: config.json, weights, tokenizer
    before = tree(mine)
    refused(["prune", str(run), "--keep", "2", "--out", str(mine)], capsys, "no pruning.json", "--overwrite")
    assert tree(mine) == before
    assert main(["prune", str(run), "--keep", "2", "--out", str(mine), "--overwrite"]) == 0
    assert json.loads((mine / "pruning.json").read_text())["keep"] == 2


def test_prune_replaces_its_own_evaluated_output(run, tmp_path):
    out = tmp_path / "pruned"
    argv = ["prune", str(run), "--strategy", "posthoc", "--param", "ratio=0.5", "--evaluate", "--out", str(out)]
    assert main(argv) == 0
    assert (out / "summary.json").is_file() and (out / "pruning.json").is_file()
    assert main(argv) == 0  # the same command again replaces what it wrote itself


# -- 3. a run folder's own config wins ----------------------------------------------------------------------------
def test_a_run_folders_config_is_never_silently_replaced(run, capsys):
    refused(["evaluate", str(run), "--task", "mt"], capsys, "--task mt", "its own config.json", "task 'lm'")
    refused(["evaluate", str(run), "--preset", "tiny"], capsys, "--preset tiny", "preset 'smoke'")
    assert main(["evaluate", str(run), "--task", "lm", "--preset", "smoke"]) == 0  # what the run has: no change


# -- 4. readers of run trees say what they skipped ------------------------------------------------------------
def test_rows_warn_of_a_torn_line_and_an_unreadable_summary(run, tmp_path, capsys):
    runs = tmp_path / "tree"
    (runs / "lm" / "baseline" / "none" / "0.0").mkdir(parents=True)
    seed0, seed1 = (runs / "lm" / "baseline" / "none" / "0.0" / f"seed{s}" for s in (0, 1))
    for seed in (seed0, seed1):
        shutil.copytree(run, seed)
        for name in ("config.json", "summary.json"):
            data = json.loads((seed / name).read_text())
            data["run"] = {"label": f"lm/baseline/none/0.0/{seed.name}", "kind": "run", "task": "lm",
                           "seed": int(seed.name[4:]), "variant": "baseline", "arm": "none", "ratio": 0.0}
            (seed / name).write_text(json.dumps(data))
    lines = (seed0 / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][:15] + "\n"
    (seed0 / "metrics.jsonl").write_text("".join(lines))
    (seed1 / "summary.json").write_text('{"status": "ok", "val')
    capsys.readouterr()
    assert main(["rows", "--runs", str(runs)]) == 0
    out, err = capsys.readouterr()
    assert "metrics.jsonl line 2: not a JSON object; skipped" in err
    assert "seed1/summary.json" in err and "unreadable" in err
    assert len([x for x in out.splitlines()[1:] if x]) == 2  # the run with the torn summary is kept, marked
    refused(["rows", "--runs", str(tmp_path / "nowhere")], capsys, "no such folder")


# -- 5. typed values stay what the user wrote -----------------------------------------------------------------
def test_label_names_are_strings_whatever_yaml_11_would_make_of_them(tmp_path):
    assert parse_overrides(["data.labels=[no,yes]"]) == {"data": {"labels": ["no", "yes"]}}
    assert parse_overrides(["train.compile=true"]) == {"train": {"compile": True}}
    from heads.resolve import resolve

    (tmp_path / "c.yaml").write_text("data:\n  source: hub\n  labels: [off, on]\n")
    assert resolve("cls", "smoke", tmp_path / "c.yaml", []).data.labels == ["off", "on"]


def test_custom_labels_are_one_per_entry_whatever_their_ratios():
    entries = [{"label": "mine", "task": "lm", "strategy": "oneshot", "ratio": 0.5},
               {"label": "mine", "task": "lm", "strategy": "curriculum"}]
    dag = preset_settings(ROOT / "replications", "smoke")
    with pytest.raises(SheetError, match=r"labels \['mine'\] name more than one entry"):
        custom(ROOT / "replications", dag, entries)
    with pytest.raises(SheetError, match="ratio must be a number"):
        custom(ROOT / "replications", dag, [{"label": "x", "task": "lm", "strategy": "oneshot", "ratio": "half"}])


def test_a_nested_dag_override_of_the_wrong_type_names_its_key():
    with pytest.raises(SheetError, match=r"dag\.smoke\.tasks\.lm: train\.steps: expected int, got 'abc'"):
        preset_settings(ROOT / "replications", "smoke", {"tasks": {"lm": {"train": {"steps": "abc"}}}})


# -- 6. file-system errors, memory and interruptions: one line --------------------------------------------------
def test_an_output_below_a_file_is_one_line(run, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    refused(["prune", str(run), "--keep", "2", "--out", str(tmp_path / "afile" / "sub")], capsys,
            "afile is a file, not a folder")
    refused(["score", str(run), "--scorer", "importance", "--out", str(tmp_path / "afile" / "s.json")], capsys,
            "afile is a file, not a folder")


def test_a_data_root_that_is_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    refused(["data", "prepare", "--task", "lm", "--root", str(tmp_path / "afile")], capsys,
            "afile: a file is where a folder is needed")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_one_line(run, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        refused(["prune", str(run), "--keep", "2", "--out", str(locked / "p")], capsys, "permission denied")
    finally:
        locked.chmod(stat.S_IRWXU)


def test_a_model_too_large_for_memory_is_refused_before_allocating(base, tmp_path, capsys):
    out = tmp_path / "huge"
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(out), base["data"], *SHORT,
             "model.d=65536", "model.heads=4"], capsys, "needs at least", "GiB of memory is available")


@pytest.mark.parametrize(("error", "words"), [
    (PermissionError(13, "Permission denied", "/data/out"), "heads plan: /data/out: permission denied"),
    (OSError(28, "No space left on device", "/data/out/model.safetensors"),
     "heads plan: /data/out/model.safetensors: no space left on the device"),
])
def test_a_file_system_error_is_one_line_naming_the_path(monkeypatch, capsys, error, words):
    import heads.cli.plan as plan_cli

    def failing(args):
        raise error

    monkeypatch.setattr(plan_cli, "cmd_plan", failing)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["plan"])
    assert exc.value.code == 2 and capsys.readouterr().err.strip() == words


def test_an_interrupted_command_says_how_to_resume_and_exits_130(monkeypatch, capsys):
    import heads.cli.plan as plan_cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_cli, "cmd_plan", interrupted)
    capsys.readouterr()
    assert main(["plan"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "heads plan: interrupted; run the same command again to resume"


# -- 2. identity checked where weights are read ----------------------------------------------------------------
def test_a_checkpoint_model_swapped_for_another_shape_is_refused(run, base, tmp_path, capsys):
    """A finished run re-evaluated (its summary.json deleted) from a checkpoint whose model was swapped for a
    wider one: the state still names the run's shape, the weights on disk are another's."""
    wider = tmp_path / "wider"
    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(wider), base["data"], *SHORT,
                 "model.d=96"]) == 0
    (run / "summary.json").unlink()
    shutil.rmtree(run / "checkpoint" / "model")
    shutil.copytree(wider / "checkpoint" / "model", run / "checkpoint" / "model")
    before = tree(run)
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), base["data"], *SHORT], capsys,
            "checkpoint/model/config.json", "hidden_size 96")
    assert tree(run) == before


def test_a_swapped_tokenizer_is_refused_where_the_run_is_evaluated(run, capsys):
    """RUN/model/tokenizer.json replaced by another of the same size: the evaluation would score other token ids
    as this run's; the run's recorded tokenizer checksum refuses it."""
    path = run / "model" / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(t for t in vocab if t.isalpha() and len(t) > 1)[:2]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swapped: the same vocabulary, other token ids
    path.write_text(json.dumps(data))
    before = tree(run)
    refused(["evaluate", str(run)], capsys, "tokenizer checksum", "not the one this run trained")
    assert tree(run) == before


def test_an_unknown_strategy_says_how_a_strategy_of_ones_own_is_found(monkeypatch):
    from heads.registry import UnknownName
    from heads.strategies.registry import get_strategy

    monkeypatch.delenv("HEADS_PLUGINS", raising=False)
    with pytest.raises(UnknownName, match=r"unknown strategy 'magic'; known strategies: .*name that module in "
                                          r"HEADS_PLUGINS"):
        get_strategy("magic")
    monkeypatch.setenv("HEADS_PLUGINS", "json")  # a module that registers nothing
    with pytest.raises(UnknownName, match="HEADS_PLUGINS='json' was imported and does not register it"):
        get_strategy("magic")
