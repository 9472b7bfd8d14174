"""CPU minutes per replication (tools.cpu_cost, ``python -m tools.plan --cpu-from``), calibrated on the jobs a
machine ran: seconds = start + FLOPs / rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heads.plan import PlanError, analysis_job, run_config, train_job
from heads.sheet import build, preset_settings
from tools import cpu_cost
from tools.plan import main

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"


@pytest.fixture(scope="module")
def sheet():
    return build(REPLICATIONS, preset_settings(REPLICATIONS, "smoke"))


def _benchmark(logs: Path, preset: str, label: str, seconds: float) -> None:
    path = logs / preset / "benchmarks" / "runs" / f"{label}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:{int(seconds):02d}\t100.0\n")


def test_cpu_minutes_are_calibrated_on_measured_jobs_and_summed_per_replication(sheet, tmp_path, capsys):
    """seconds = start + FLOPs / rate, the rate a median over measured jobs of the same task and command, the
    start the fastest job; a replication counts every job it needs (shared baselines included)."""
    logs = tmp_path / "logs"
    with pytest.raises(PlanError, match="no finished job of preset 'smoke'"):
        cpu_cost.calibrate("smoke", logs, REPLICATIONS)
    trains = [e for e in sheet.runs.values() if e.command == "train" and e.task == "lm"][:3]
    flops = {e.label: (lambda j: j.train_flops + j.eval_flops)(train_job(e, run_config(e, "smoke"))) for e in trains}
    for e in trains:  # 2 s to start, then 1 GFLOP/s
        _benchmark(logs, "smoke", e.label, 2.0 + flops[e.label] / 1e9)
    trivial = next(e for e in sheet.runs.values() if e.command == "trivial")
    _benchmark(logs, "smoke", trivial.label, 2.0)  # the fastest job: the start
    (logs / "smoke" / "benchmarks" / "runs" / "torn.tsv").write_text("s\n")  # a job that never finished
    cal = cpu_cost.calibrate("smoke", logs, REPLICATIONS)
    assert cal.start_s == 2.0 and cal.jobs == 4
    assert cal.rates[("lm", "train")] == pytest.approx(1e9)
    ablate = next(e for e in sheet.runs.values() if e.command == "ablate" and e.task == "cls")
    job = analysis_job(ablate, run_config(ablate, "smoke"))
    assert cal.seconds(job) == pytest.approx(2.0 + job.eval_flops / 1e9)  # never measured: the slowest rate
    costs = {c.name: c for c in cpu_cost.cost("smoke", cal, REPLICATIONS)}
    assert set(costs) == set(sheet.of) and costs["training_time"].jobs == len(sheet.of["training_time"])
    assert costs["training_time"].core_s == pytest.approx(sum(cal.seconds(
        train_job(e, run_config(e, "smoke")) if e.command == "train" else analysis_job(e, run_config(e, "smoke")))
        for e in (sheet.runs[label] for label in sheet.of["training_time"])))
    assert costs["training_time"].minutes(2) >= costs["training_time"].longest[1] / 60
    assert main(["--preset", "smoke", "--cpu-from", "smoke", "--logs", str(logs), "--cores", "2",
                 "--replications", str(REPLICATIONS)]) == 0
    out = capsys.readouterr().out
    assert "CPU cost of the smoke preset, calibrated on 4 measured smoke jobs" in out and "| training_time |" in out
    # jobs that ran with another config than the preset's now (here: half the steps) are costed as they ran
    runs = tmp_path / "runs"
    for e in trains:
        cfg = run_config(e, "smoke")
        cfg.train.steps //= 2
        _benchmark(logs, "smoke", e.label, 2.0 + (lambda j: j.train_flops + j.eval_flops)(train_job(e, cfg)) / 1e9)
        (runs / e.label).mkdir(parents=True)
        (runs / e.label / "config.json").write_text(json.dumps(cfg.to_dict()))
    assert cpu_cost.calibrate("smoke", logs, REPLICATIONS).rates[("lm", "train")] > 1.5e9  # misread as faster
    assert cpu_cost.calibrate("smoke", logs, REPLICATIONS, runs).rates[("lm", "train")] == pytest.approx(1e9)


def refused(argv: list[str], capsys, *fragments: str) -> str:
    """``python -m tools.plan argv`` in-process: exit status 2 and one stderr line holding every fragment."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exc.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize("options,named", [(["--logs", "nowhere"], "--logs is"),
                                           (["--runs", "x", "--logs", "y"], "--logs and --runs are")])
def test_calibration_inputs_without_cpu_from_are_refused(capsys, options, named):
    # they were ignored without a word: the plan printed the preset's estimates as if it had read them
    refused(["--preset", "smoke", *options], capsys,
            f"tools.plan: {named} read only to calibrate the CPU minutes on a preset's measured jobs: add --cpu-from")


def test_cores_0_is_refused(capsys):
    refused(["--preset", "smoke", "--cores", "0"], capsys, "tools.plan: --cores must be >= 1")


def test_a_preset_never_run_here_is_refused_in_one_line(tmp_path, capsys):
    refused(["--preset", "smoke", "--cpu-from", "smoke", "--logs", str(tmp_path), "--replications",
             str(REPLICATIONS)], capsys, "tools.plan: no finished job of preset 'smoke'", "run its DAG first")


def test_the_tool_prints_heads_plan_first_unchanged(capsys):
    """The library's plan is the same with or without the logistics around it."""
    from heads.cli import main as heads_main

    argv = ["--preset", "smoke", "--gpu", "H200", "--replications", str(REPLICATIONS)]
    assert heads_main(["plan", *argv]) == 0
    library = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == library
    assert heads_main(["plan", *argv, "--format", "json"]) == 0
    library = json.loads(capsys.readouterr().out)
    assert main([*argv, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == library


@pytest.mark.parametrize("option", [["--cpu-from", "smoke"], ["--visits"], ["--cores", "2"], ["--logs", "logs"]])
def test_heads_plan_has_no_logistics_options(capsys, option):
    """The CPU calibration and the GPU visit live in tools/ (python -m tools.plan), not in the library's CLI."""
    from heads.cli import main as heads_main

    with pytest.raises(SystemExit) as exc:
        heads_main(["plan", "--preset", "smoke", *option])
    assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
