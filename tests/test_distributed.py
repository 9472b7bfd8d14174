"""Multi-process training with DistributedDataParallel, tested on CPU with the gloo backend and two processes
under torchrun (issue 14): the same losses and weights as one process over the same global batch, a pruning
strategy acting mid-run on every rank alike, and kill -9 then resume."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import smoke

from heads.io import read_jsonl
from heads.run import train_run

STRATEGY = ["strategy.name=oneshot", "strategy.params.ratio=0.5", "strategy.params.proxy_steps=5"]
OVERRIDES = ["train.steps=20", "train.checkpoint_every=5", "train.log_every=1", "train.dropout=0.0", *STRATEGY]


def torchrun(out: Path, data_root: Path, overrides: list[str], kill_at: int | None = None):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if kill_at is not None:
        env["HEADS_FAULT_KILL_AT_STEP"] = str(kill_at)
    argv = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "heads", "train", "--task", "lm",
            "--preset", "smoke", "--out", str(out), f"data.root={data_root}", "train.progress=false",
            "train.device=cpu", *overrides]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def weights(run: Path):
    from safetensors.torch import load_file

    return load_file(str(run / "model/model.safetensors"))


def test_two_processes_train_as_one_over_the_same_batch_and_resume_after_kill_9(data_root, tmp_path):
    # One process, the batch in two micro-batches: the same split two ranks make.
    one = train_run(smoke("lm", data_root, *OVERRIDES, "train.accumulate=2"), tmp_path / "one")

    cut = tmp_path / "ddp"
    killed = torchrun(cut, data_root, OVERRIDES, kill_at=13)
    assert killed.returncode != 0 and not (cut / "summary.json").exists(), killed.stderr[-3000:]
    events = read_jsonl(cut / "events.jsonl")
    assert [e["event"] for e in events] == ["prune"] and events[0]["step"] == 5  # pruned under DDP, before the kill
    resumed = torchrun(cut, data_root, OVERRIDES)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a, b = read_jsonl(tmp_path / "one/metrics.jsonl"), read_jsonl(cut / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert (x["heads"], x["tokens"]) == (y["heads"], y["tokens"])
        for key in ("train_loss", "val_loss"):
            assert (x.get(key) is None) == (y.get(key) is None)
            if x.get(key) is not None:
                assert y[key] == pytest.approx(x[key], rel=1e-5), (x["step"], key)
    assert read_jsonl(tmp_path / "one/events.jsonl") == read_jsonl(cut / "events.jsonl")
    wa, wb = weights(tmp_path / "one"), weights(cut)
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-4
    summary = __import__("json").loads((cut / "summary.json").read_text())
    assert summary["resumed"] and summary["world_size"] == 2 and summary["head_layout"] == one["head_layout"]
    assert not list(cut.glob("*.tmp*")), "only rank 0 writes, and nothing is left half-written"


def test_a_distributed_checkpoint_resumes_in_one_process(data_root, tmp_path):
    """Checkpoints hold the global batch position, not a rank's: a run killed under two processes finishes in one."""
    cut = tmp_path / "run"
    killed = torchrun(cut, data_root, OVERRIDES, kill_at=8)
    assert killed.returncode != 0, killed.stderr[-3000:]
    summary = train_run(smoke("lm", data_root, *OVERRIDES, "train.device=cpu"), cut)
    assert summary["resumed"] and summary["steps"] == 20 and summary["world_size"] == 1


def test_a_time_limit_stops_every_rank_at_the_same_step(data_root, tmp_path):
    """Rank 0's clock decides when train.time_limit is used up, so both ranks stop after the same step (a rank
    that stepped on alone would hang in its next collective) and the run ends as a run of that many steps."""
    run = tmp_path / "run"
    done = torchrun(run, data_root, ["train.steps=20", "train.time_limit=1e-9"])
    assert done.returncode == 0, done.stderr[-3000:]
    summary = __import__("json").loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["world_size"] == 2 and summary["stopped"]["of_steps"] == 20
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [0, 1]
