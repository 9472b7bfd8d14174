"""The GPU visit's script (benchmarks/gpu_evidence.py): its sheet, its parts and records, and its CPU miniature
end to end (slow), so the script cannot rot while no GPU is lent."""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_evidence as ge  # noqa: E402

from heads.sheet import build, preset_settings  # noqa: E402


def test_the_visit_runs_translation_only_and_every_entry_has_a_part():
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", ge.PRESET))
    assert sorted(sheet.of) == ["michel2019", "voita2019"]
    assert {e.task for e in sheet.runs.values()} == {"mt"}
    parts = {ge.part_of(e) for e in sheet.runs.values()}
    assert parts == set(ge.PARTS)
    # every dependency runs in the same part or an earlier one, so no part waits on a later one
    order = {p: i for i, p in enumerate(ge.PARTS)}
    for e in sheet.runs.values():
        for after in e.after:
            assert order[ge.part_of(sheet[after])] <= order[ge.part_of(e)], (e.label, after)
    # the largest penalty's layout is trained from scratch, the other's not (scratch_lams)
    scratch = sorted({e.arm for e in sheet.runs.values() if e.variant == "scratch"})
    assert scratch == ["l0lam0.05"]


def test_the_steps_reach_every_run_that_trains_from_the_baselines_length(tmp_path):
    visit = ge.Visit(_args(tmp_path))
    sheet = visit.sheet(1200)
    base = sheet["mt/baseline/none/0.0/seed0"]
    assert base.config["train"]["steps"] == 1200 and base.config["train"]["device"] == "cpu"
    scratch = sheet["mt/scratch/l0lam0.05/0.0/seed0"]
    # C3 compares a layout trained as long as the L0 model trained in all: the baseline's steps plus its L0's
    l0 = sheet["mt/l0/lam0.05/0.0/seed0"].config["train"]["steps"]
    assert l0 == ge.MINI["voita2019"]["steps"] and scratch.config["train"]["steps"] == 1200 + l0
    line = shlex.split(visit.command(base))
    overrides = json.loads(Path(line[line.index("--overrides-file") + 1]).read_text())
    assert overrides["train"]["steps"] == 1200


def test_the_archive_keeps_records_and_leaves_weights_out(tmp_path):
    runs, logs = tmp_path / "runs", tmp_path / "logs"
    (runs / "mt/baseline/none/0.0/seed0/model").mkdir(parents=True)
    (runs / "mt/baseline/none/0.0/seed0/summary.json").write_text("{}")
    (runs / "mt/baseline/none/0.0/seed0/model/model.safetensors").write_bytes(b"\0" * 64)
    logs.mkdir()
    (logs / "a.log").write_text("line\n")
    record = tmp_path / "visit.json"
    record.write_text("{}")
    dest = tmp_path / "out" / "records.tar.gz"
    ge.archive(runs, logs, record, dest)
    with tarfile.open(dest) as tar:
        names = set(tar.getnames())
    assert names == {"runs/mt/baseline/none/0.0/seed0/summary.json", "logs/a.log", "visit.json"}
    assert not dest.with_name(dest.name + ".tmp").exists()


STOPPED = {"stopped": {"by": "train.time_limit", "time_limit": 270.0, "of_steps": 1200}}


def _finished(visit, job, steps: int, stopped: bool) -> None:
    """A training job's run as the executor leaves it: its summary, and its record ok."""
    run = Path(visit.runs) / job.entry.label
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"steps": steps, "train_seconds": 270.0,
                                                  **(STOPPED if stopped else {})}))
    job.record = {"status": "ok", "seconds": 290.0}
    visit.record["jobs"][job.entry.label] = {"part": ge.part_of(job.entry), **job.record}


def test_a_baseline_stopped_by_its_time_limit_is_recorded_and_holds_back_scratch(tmp_path):
    """A part's training runs end at train.time_limit rather than be killed at its cap; one that did says how
    many steps it trained, and C3's from-scratch run (sized to the baselines' steps plus L0's) then does not
    start, saying why."""
    visit = ge.Visit(_args(tmp_path))
    sheet = visit.sheet(1200)
    jobs = [visit.job(e) for e in sheet.runs.values() if ge.part_of(e) == "train"]
    visit.record["parts"]["train"] = {"time_limit_s": 270.0}
    for i, j in enumerate(jobs):
        _finished(visit, j, 1100 if i == 0 else 1200, stopped=i == 0)
    visit.count_stopped("train", jobs)
    visit.pace(jobs)
    train = visit.record["parts"]["train"]
    assert train["stopped_early"] == 1 and train["time_limit_s"] == 270.0 and train["overhead_s"] == 20.0
    assert visit.record["jobs"][jobs[0].entry.label]["steps"] == 1100
    scratch = [visit.job(e) for e in sheet.runs.values() if ge.part_of(e) == "scratch"]
    part, reason = visit.not_scratch(scratch, 1000.0, sheet)
    assert reason == "a run it matches stopped early"
    assert part["reason"].startswith(f"{jobs[0].entry.label} stopped at their time limit")


def test_only_a_stopped_run_scratch_builds_on_holds_it_back(tmp_path):
    """Scratch trains the larger penalty's layout: an L0 run of the other penalty that stopped early is not one
    it matches, one of its own is (found from the summaries, so a later call on the same runs sees it too)."""
    visit = ge.Visit(_args(tmp_path))
    sheet = visit.sheet(1200)
    for e in sheet.runs.values():
        if e.variant in ("baseline", "l0"):
            _finished(visit, visit.job(e), 1200, stopped=e.label == "mt/l0/lam0.01/0.0/seed1")
    scratch = [visit.job(e) for e in sheet.runs.values() if ge.part_of(e) == "scratch"]
    assert {a for j in scratch for a in j.entry.after} == {f"mt/l0/lam0.05/0.0/seed{s}" for s in range(3)}
    assert ge.Visit(_args(tmp_path)).not_scratch(scratch, 1000.0, sheet) is None
    (Path(visit.runs) / "mt/l0/lam0.05/0.0/seed2/summary.json").write_text(json.dumps({"steps": 300, **STOPPED}))
    part, _ = ge.Visit(_args(tmp_path)).not_scratch(scratch, 1000.0, sheet)
    assert part["reason"].startswith("mt/l0/lam0.05/0.0/seed2 stopped")


def _args(tmp_path: Path):
    import argparse

    return argparse.Namespace(device="cpu", scale="mini", runs=str(tmp_path / "runs"),
                              out=str(tmp_path / "visit.json"), archive=None, data_root="resources/data",
                              budget=60.0, reserve=5.0, max_steps=None, parallel=2, threads=1,
                              steps=None, parts=",".join(ge.PARTS), calibrate=False)


@pytest.mark.slow
def test_the_cpu_miniature_runs_every_part_and_renders_a_ledger(tmp_path):
    """``DEVICE=cpu SCALE=mini bash benchmarks/gpu_evidence.sh``: every part runs, the records come back in the
    archive without weights, and the ledger renders from them, each translation claim saying why it is not
    tested (a miniature Marian does not translate)."""
    env = {**os.environ, "DEVICE": "cpu", "SCALE": "mini", "PARALLEL": "2", "RUNS": str(tmp_path / "runs"),
           "RECORD": str(tmp_path / "visit.json"), "ARCHIVE": str(tmp_path / "records.tar.gz"), "BUDGET": "1500"}
    run = subprocess.run(["bash", "benchmarks/gpu_evidence.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    record = json.loads((tmp_path / "visit.json").read_text())
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:], record.get("jobs"))
    assert set(record["parts"]) == {"calibrate", *ge.PARTS}
    assert all(part["ok_all"] for part in record["parts"].values()), record["parts"]
    assert record["steps"] == ge.MINI_STEPS and record["parts"]["calibrate"]["seconds_per_step"] > 0
    with tarfile.open(tmp_path / "records.tar.gz") as tar:
        names = tar.getnames()
    assert "runs/mt/baseline/none/0.0/seed0/summary.json" in names and "visit.json" in names
    assert not [n for n in names if n.endswith(ge.WEIGHTS)]
    config = json.loads((tmp_path / "runs/mt/baseline/none/0.0/seed0/config.json").read_text())
    assert config["train"]["steps"] == ge.MINI_STEPS and config["train"]["device"] == "cpu"
    # the baselines and the L0 runs carry their part's time limit (too long to stop the miniature's few steps)
    assert config["train"]["time_limit"] == record["parts"]["train"]["time_limit_s"] > 0
    l0 = json.loads((tmp_path / "runs/mt/l0/lam0.05/0.0/seed0/config.json").read_text())
    assert l0["train"]["time_limit"] == record["parts"]["analyses"]["time_limit_s"] > 0
    assert record["parts"]["train"]["stopped_early"] == record["parts"]["analyses"]["stopped_early"] == 0

    results = tmp_path / "results"
    assert ge.main(["--render", "--runs", str(tmp_path / "runs"), "--results", str(results)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader(open(results / "claims.csv"))}
    for claim in ("B1-mt", "B2-mt", "B4-mt", "C1-mt-heads", "C3-mt"):
        assert rows[claim]["verdict"] == "not tested at this scale", rows[claim]
        assert "BLEU" in rows[claim]["precondition"], rows[claim]
    assert rows["B1-cls"]["verdict"] == "not run at this preset"  # the visit trains translation only
    assert "runs no 'cls' models" in rows["B1-cls"]["note"]
    assert (results / "michel2019" / "ablation.csv").is_file() and (results / "voita2019" / "l0.csv").is_file()
