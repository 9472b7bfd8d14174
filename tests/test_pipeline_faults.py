"""Faults at the workflow level, at smoke scale (slow: minutes).

A DAG killed mid-run (one replication's part of the smoke DAG) completes with ``--unlock`` then
``--rerun-incomplete`` without redoing a finished job, and its results equal those of the uninterrupted whole run
(so two smoke runs with the same seeds agree, every number but the clock's); a run that diverges is shown as
failed in the report, not dropped.
"""

import csv
import json
import os
import signal
import subprocess
import time

import pytest
from smoke_dag import ROOT, SNAKEMAKE, copy_repo, incomplete_outputs, snakemake, snakemake_args, untimed_results

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed (pip install -e '.[test]')"),
]
OUTPUTS = ("summary.json",)  # what the train rule writes last (training runs and post-hoc prunes alike)


def _training_in_flight(repo) -> bool:
    """A training run has written a checkpoint and not yet its summary: a kill now leaves a job to resume."""
    runs = repo / "results/smoke/runs"
    return any(not (c.parent.parent / "summary.json").exists() for c in runs.rglob("checkpoint/state.json"))


def _finished(repo):
    """Run outputs on disk (training summaries, post-hoc evaluations, analyses), by path: mtime."""
    runs = repo / "results/smoke/runs"
    files = [p for name in OUTPUTS for p in runs.rglob(name)] + list((runs).glob("*/analysis/**/*.json"))
    return {p.resolve(): p.stat().st_mtime_ns for p in files}


# One replication's ledger and what it reads (37 of the smoke DAG's jobs, training runs that checkpoint among
# them): a kill and resume of the whole DAG would double the slow suite's longest part and test nothing more
TARGET = "results/smoke/training_time/claims.csv"


def test_a_killed_dag_completes_with_rerun_incomplete_and_matches_an_uninterrupted_run(smoke_run, tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("killed"))
    dag = subprocess.Popen(
        snakemake_args("--cores", "2", TARGET), cwd=repo, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 1800
    try:  # pull the plug on Snakemake and its jobs once a dozen outputs exist and a training run is part-way
        while len(_finished(repo)) < 12 or not _training_in_flight(repo):
            assert dag.poll() is None, "the DAG ended before it could be interrupted"
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.2)
    finally:
        os.killpg(dag.pid, signal.SIGKILL)
        dag.wait()
    done = {p: t for p, t in _finished(repo).items() if p not in incomplete_outputs(repo)}
    assert len(done) >= 10

    # A kill leaves Snakemake's lock behind (it cannot tell a dead run from a live one): release it, then resume.
    assert snakemake(repo, "--unlock").returncode == 0
    run = snakemake(repo, "--cores", "2", "--rerun-incomplete", TARGET)
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    redone = [str(p) for p, t in done.items() if p.stat().st_mtime_ns != t]
    assert not redone, f"finished jobs ran again: {redone}"
    assert "Nothing to be done" in snakemake(repo, "-n", TARGET).stdout

    # at least one job went on from its checkpoint (its record says so), and still matches the uninterrupted run
    resumed = [p for p in (repo / "results/smoke/runs").rglob("summary.json")
               if json.loads(p.read_text()).get("resumed") is True]
    assert resumed, "no job resumed from a checkpoint: the kill landed where no training was part-way"

    # every output of the resumed run is the uninterrupted whole DAG's, byte for byte but the clock's
    killed, whole = untimed_results(repo / "results/smoke"), untimed_results(smoke_run / "results/smoke")
    assert TARGET.removeprefix("results/smoke/") in killed and set(killed) <= set(whole), set(killed) - set(whole)
    differ = [name for name in killed if killed[name] != whole[name]]
    assert not differ, f"results differ from the uninterrupted run: {differ[:10]}"


def test_a_diverged_variant_is_reported_failed_not_dropped(tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("diverged"))
    (repo / "poisoned.yaml").write_text(
        "dag:\n  smoke:\n    custom:\n"
        "      - {label: poisoned, task: lm, strategy: nan_at_step, params: {at_step: 12}}\n"
    )
    env = {
        **os.environ,
        "HEADS_PLUGINS": "nan_at_step",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests/plugins"), os.environ.get("PYTHONPATH")])),
    }
    table = "results/smoke/training_time/runs.csv"
    run = snakemake(repo, "--configfile", "poisoned.yaml", "--cores", "2", table, env=env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]  # one broken variant does not stop the DAG

    with (repo / table).open() as f:
        rows = {r["arm"]: r for r in csv.DictReader(f)}
    assert rows["poisoned"]["n_failed"] == "2" and rows["poisoned"]["n_ok"] == "0"
    assert rows["curriculum"]["n_failed"] == "0"
    assert "poisoned" in (repo / table).with_suffix(".md").read_text()
    for seed in (0, 1):
        folder = repo / f"results/smoke/runs/lm/during/poisoned/0.0/seed{seed}"
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["status"] == "diverged" and "step 13" in summary["message"]
        assert json.loads((folder / "checkpoint/state.json").read_text())["step"] == 10  # the last good one
