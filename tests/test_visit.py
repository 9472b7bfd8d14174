"""The GPU visit's part-by-part estimate (tools.visit, ``python -m tools.plan --visits``): only what a visit measured at
this sheet's batch is used, jobs are scheduled as the visit's executor runs them, and a part with an unmeasured
job says so instead of guessing."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from heads.plan import run_config
from heads.sheet import build, preset_settings
from tools.plan import main
from tools.visit import (
    ALLOWANCE_S,
    CAPS,
    PRESET,
    TASK,
    JobEstimate,
    estimate,
    kind,
    part_of,
    read_visit,
    schedule,
    time_limit,
)

REPLICATIONS = Path(__file__).resolve().parent.parent / "replications"
# what each kind took in the synthetic visit below, seconds
TOOK = {"baseline": 150.0, "l0": 80.0, "roles": 20.0, "ablation": 100.0, "curve/importance": 50.0,
        "curve/random": 60.0}


@pytest.fixture(scope="module")
def entries():
    sheet = build(REPLICATIONS, preset_settings(REPLICATIONS, PRESET, None))
    return [e for e in sheet.runs.values() if e.task == TASK]


def write_visit(path: Path, entries, batch: int, took: dict, status: dict | None = None, steps=None) -> Path:
    """A visit's archive as gpu_evidence.py writes it: the record at the top, each training run's config."""
    status = status or {}
    jobs = {e.label: {"part": part_of(e), "status": status.get(kind(e), "ok"), "seconds": took[kind(e)]}
            for e in entries if kind(e) in took}
    parts = {"train": {"seconds": 160.0, "jobs": 3, "ok": 3, "ok_all": True, "seconds_per_step": 0.1,
                       "overhead_s": 20.0}}
    record = {"preset": PRESET, "elapsed_s": 172.5, "parts": parts, "jobs": jobs,
              "environment": {"git_commit": "0123456789abcdef"}}
    with tarfile.open(path, "w:gz") as tar:
        def add(name: str, data: dict) -> None:
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))

        add("gpu_evidence.json", record)
        for e in entries:
            if e.command == "train" and kind(e) in took:
                cfg = run_config(e, PRESET)
                add(f"runs/{e.label}/config.json", {"train": {"steps": (steps or {}).get(kind(e), cfg.train.steps)},
                                                    "data": {"batch_size": batch}})
    return path


def by_name(parts):
    return {p.name: p for p in parts}


def test_schedule_runs_jobs_parallel_at_a_time_each_after_what_it_needs():
    a, b, c = (JobEstimate(x, x, s, "") for x, s in (("a", 10.0), ("b", 10.0), ("c", 5.0)))
    jobs = [(a, ()), (b, ()), (c, ("a", "elsewhere"))]  # a run outside the part is done already
    assert schedule(jobs, parallel=2) == 15.0  # a and b together, c once a has ended
    assert schedule(jobs, parallel=1) == 25.0  # one at a time, in order
    assert schedule(jobs, parallel=9) == 15.0


def test_every_part_is_estimated_from_a_visit_at_this_sheets_batch(entries, tmp_path):
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    visit = read_visit(write_visit(tmp_path / "v.tar.gz", entries, batch, TOOK))
    parts, start = estimate(entries, [visit])
    p = by_name(parts)
    steps = {kind(e): run_config(e, PRESET).train.steps for e in entries if e.command == "train"}
    # the baselines and scratch run at the pace the baselines measured, at their own steps
    assert p["train"].seconds == pytest.approx(20.0 + 0.1 * steps["baseline"])
    assert p["scratch"].seconds == pytest.approx(20.0 + 0.1 * steps["scratch"])
    # analyses: three ablations beside six l0 runs (nine slots), each seed's roles after its l0 run
    assert any(e.after for e in entries if kind(e) == "roles")
    assert p["analyses"].seconds == pytest.approx(max(TOOK["ablation"], TOOK["l0"] + TOOK["roles"]))
    assert p["curves"].seconds == pytest.approx(TOOK["curve/random"])
    assert start == pytest.approx(172.5 - 160.0)
    assert all(not part.unknown for part in parts)


def test_a_visit_at_another_batch_is_quoted_not_used(entries, tmp_path):
    visit = read_visit(write_visit(tmp_path / "v.tar.gz", entries, 7, TOOK))
    parts, _ = estimate(entries, [visit])
    for part in parts:
        assert part.seconds is None
        assert all("not measured at this sheet's batch; at batch 7" in j.basis for j in part.jobs if j.kind in TOOK)


def test_a_kind_that_timed_out_leaves_its_part_unknown_and_says_where(entries, tmp_path):
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    visit = read_visit(write_visit(tmp_path / "v.tar.gz", entries, batch, TOOK, status={"ablation": "timed_out"}))
    p = by_name(estimate(entries, [visit])[0])
    assert p["analyses"].seconds is None and p["analyses"].unknown == ["ablation"]
    ablation = next(j for j in p["analyses"].jobs if j.kind == "ablation")
    assert ablation.basis == "timed out at 100 s (v, commit 0123456789ab)"
    assert p["curves"].seconds is not None, "the other parts keep their estimates"


def test_a_later_visit_wins_and_an_l0_run_is_rescaled_to_this_sheets_steps(entries, tmp_path):
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    steps = run_config(next(e for e in entries if kind(e) == "l0"), PRESET).train.steps
    old = read_visit(write_visit(tmp_path / "old.tar.gz", entries, batch, {**TOOK, "l0": 999.0}))
    new = read_visit(write_visit(tmp_path / "new.tar.gz", entries, batch, TOOK, steps={"l0": steps - 100}))
    p = by_name(estimate(entries, [old, new])[0])
    l0 = next(j for j in p["analyses"].jobs if j.kind == "l0")
    assert l0.seconds == pytest.approx(TOOK["l0"] + 0.1 * 100)  # the 100 steps more, at the baselines' pace


def test_baselines_slower_than_their_time_limit_are_estimated_at_it(entries, tmp_path):
    """A pace that would not finish the steps in train's cap is estimated as the visit runs it: the baselines
    end at train.time_limit, after the steps it holds, and the basis says so."""
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    archive = write_visit(tmp_path / "v.tar.gz", entries, batch, TOOK)
    record_pace(archive, seconds_per_step=1.0)
    p = by_name(estimate(entries, [read_visit(archive)])[0])
    limit = time_limit("train", CAPS["train"])
    assert limit == CAPS["train"] - ALLOWANCE_S["train"]
    assert p["train"].seconds == pytest.approx(20.0 + limit) and p["train"].seconds <= CAPS["train"]
    assert f"stopped by train.time_limit={limit:g} after ~{int(limit)} steps" in p["train"].jobs[0].basis
    scratch = p["scratch"]
    assert scratch.skipped and "3 run(s) it matches are estimated to stop" in scratch.skipped
    assert time_limit("train", 30.0) is None  # no room for one: the runs go uncapped (and the part's cap kills)
    assert time_limit("scratch", 300.0) is None  # C3 compares scratch at its sized steps: it gets none
    assert time_limit("analyses", CAPS["analyses"]) == CAPS["analyses"] - ALLOWANCE_S["analyses"]


def test_a_pace_near_its_time_limit_is_said_to_be(entries, tmp_path):
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    steps = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).train.steps
    archive = write_visit(tmp_path / "v.tar.gz", entries, batch, TOOK)
    record_pace(archive, seconds_per_step=time_limit("train", CAPS["train"]) * 0.98 / steps)
    p = by_name(estimate(entries, [read_visit(archive)])[0])
    assert "within 5% of train.time_limit" in p["train"].jobs[0].basis and not p["train"].jobs[0].stops
    assert p["scratch"].skipped is None


def test_a_run_its_limit_stopped_is_rescaled_from_the_steps_it_trained(entries, tmp_path):
    """An L0 run that a visit's time limit stopped took its seconds for the steps it trained (its job record),
    not its config's."""
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    steps = run_config(next(e for e in entries if kind(e) == "l0"), PRESET).train.steps
    archive = write_visit(tmp_path / "v.tar.gz", entries, batch, TOOK)
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    record = json.loads(members["gpu_evidence.json"])
    for label, job in record["jobs"].items():
        if "/l0/" in label:
            job["steps"] = steps - 100
    members["gpu_evidence.json"] = json.dumps(record).encode()
    rewrite(archive, members)
    l0 = next(j for j in by_name(estimate(entries, [read_visit(archive)])[0])["analyses"].jobs if j.kind == "l0")
    assert l0.seconds == pytest.approx(TOOK["l0"] + 0.1 * 100)


def record_pace(archive: Path, seconds_per_step: float) -> None:
    """Rewrite a synthetic visit's measured pace."""
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    record = json.loads(members["gpu_evidence.json"])
    record["parts"]["train"]["seconds_per_step"] = seconds_per_step
    members["gpu_evidence.json"] = json.dumps(record).encode()
    rewrite(archive, members)


def rewrite(archive: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


def test_the_plan_shows_the_visit_part_by_part(entries, tmp_path, capsys):
    batch = run_config(next(e for e in entries if kind(e) == "baseline"), PRESET).data.batch_size
    archive = write_visit(tmp_path / "2026-01-01-1.tar.gz", entries, batch, TOOK)
    assert main(["--preset", PRESET, "--replications", str(REPLICATIONS), "--visits", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "## The GPU visit, part by part (from 2026-01-01-1)" in out
    assert "| analyses | 15 | 100 | 150 | yes |" in out and "In all" in out and "budget" in out
    assert main(["--preset", PRESET, "--replications", str(REPLICATIONS), "--format", "json",
                 "--visits", str(archive)]) == 0
    visit = json.loads(capsys.readouterr().out)["visit"]
    assert [p["name"] for p in visit["parts"]] == ["train", "analyses", "curves", "scratch"]
    assert visit["start_s"] == pytest.approx(12.5)


def test_the_plan_says_what_is_unknown_without_a_visit(tmp_path, capsys):
    assert main(["--preset", PRESET, "--replications", str(REPLICATIONS), "--visits"]) == 0
    out = capsys.readouterr().out
    assert "(from no visit yet)" in out and "In all: unknown" in out and "never" not in out


def test_a_file_that_is_not_a_visit_is_refused(tmp_path, capsys):
    bad = tmp_path / "x.tar.gz"
    with tarfile.open(bad, "w:gz"):
        pass
    with pytest.raises(SystemExit):
        main(["--preset", PRESET, "--replications", str(REPLICATIONS), "--visits", str(bad)])
    assert "no record" in capsys.readouterr().err
    with pytest.raises(ValueError, match="records at the top"):
        read_visit(tmp_path)


@pytest.mark.parametrize("content", [b"hello\n", bytes(range(256)) * 2], ids=["text", "garbage"])
def test_a_file_that_is_not_a_tar_is_refused_in_one_line(tmp_path, capsys, content):
    archive = tmp_path / "visit.tar.gz"
    archive.write_bytes(content)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["--preset", "gpu", "--replications", str(REPLICATIONS), "--visits", str(archive)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exc.value.code == 2 and len(lines) == 1
    assert str(archive) in lines[0] and "not a visit's archive" in lines[0] and lines[0].startswith("tools.plan: ")
