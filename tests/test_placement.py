"""Devices, precision, gradient accumulation and collation workers in the training engine (issue 14): a split
batch is the same batch, bf16 and fp16 train and resume exactly, and a finished run can drop its checkpoint's
weights."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from conftest import heads_train_killed, smoke, untimed

from heads.cli import main
from heads.config import ConfigError
from heads.io import read_jsonl
from heads.placement import Placement, resolve_device
from heads.run import train_run
from heads.surgery.persist import CheckpointError


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "model/model.safetensors"))


def losses(run: Path) -> list[float]:
    return [r["train_loss"] for r in read_jsonl(run / "metrics.jsonl") if r["train_loss"] is not None]


@pytest.mark.parametrize("task", ["lm", "mt"])
def test_accumulated_micro_batches_are_the_whole_batch(task, data_root, tmp_path):
    """accumulate=2 splits each step's batch in two and weights each half by its loss items (mt's halves hold
    different numbers of target tokens): the same losses and weights as one pass, to float rounding."""
    common = ["train.steps=8", "train.log_every=1", "train.dropout=0.0"]
    one = train_run(smoke(task, data_root, *common), tmp_path / "one")
    two = train_run(smoke(task, data_root, *common, "train.accumulate=2"), tmp_path / "two")
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
    assert one["tokens"] == two["tokens"]


def test_bf16_with_accumulation_trains_and_a_kill_9_resumes_exactly(data_root, tmp_path):
    overrides = ["train.steps=20", "train.checkpoint_every=5", "train.precision=bf16", "train.accumulate=2",
                 "train.dropout=0.1"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    uninterrupted = train_run(smoke("lm", data_root, *overrides), whole)
    heads_train_killed("lm", cut, data_root, overrides, at_step=13, fresh_interpreter=False)
    resumed = train_run(smoke("lm", data_root, *overrides), cut)
    assert resumed["resumed"]
    assert sha256(cut / "model/model.safetensors") == sha256(whole / "model/model.safetensors")
    assert untimed(read_jsonl(cut / "metrics.jsonl")) == untimed(read_jsonl(whole / "metrics.jsonl"))
    assert uninterrupted["environment"]["precision"] == "bfloat16"
    # bf16 really ran: its losses are not fp32's
    fp32 = tmp_path / "fp32"
    train_run(smoke("lm", data_root, *[o for o in overrides if "precision" not in o]), fp32)
    assert losses(fp32) != losses(whole)


def test_fp16_scales_the_loss_and_resumes_its_scaler(data_root, tmp_path):
    overrides = ["train.steps=20", "train.checkpoint_every=5", "train.precision=fp16"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train_run(smoke("lm", data_root, *overrides), whole)
    scaler = json.loads((whole / "checkpoint/state.json").read_text())["scaler"]
    assert scaler["scale"] > 0
    heads_train_killed("lm", cut, data_root, overrides, at_step=13, fresh_interpreter=False)
    train_run(smoke("lm", data_root, *overrides), cut)
    assert sha256(cut / "model/model.safetensors") == sha256(whole / "model/model.safetensors")


def test_collation_workers_change_nothing_and_resume_exactly(data_root, tmp_path):
    """Threads collate batches ahead of the step; the checkpoint records only batches the step consumed."""
    base = ["train.steps=20", "train.checkpoint_every=5", "train.accumulate=2"]
    train_run(smoke("mt", data_root, *base), tmp_path / "plain")
    heads_train_killed("mt", tmp_path / "cut", data_root, [*base, "train.workers=2"], at_step=13,
                       fresh_interpreter=False)
    train_run(smoke("mt", data_root, *base, "train.workers=2"), tmp_path / "cut")
    assert sha256(tmp_path / "cut/model/model.safetensors") == sha256(tmp_path / "plain/model/model.safetensors")


def test_a_run_may_resume_on_another_device_setting(data_root, tmp_path):
    """Where a run runs is not what it is: a checkpoint written under device=auto resumes under device=cpu."""
    overrides = ["train.steps=20", "train.checkpoint_every=5"]
    heads_train_killed("lm", tmp_path / "run", data_root, overrides, at_step=7, fresh_interpreter=False)
    summary = train_run(smoke("lm", data_root, *overrides, "train.device=cpu"), tmp_path / "run")
    assert summary["resumed"] and summary["environment"]["device"] == "cpu"


def test_metrics_record_memory_that_pruning_frees(data_root, tmp_path):
    run = tmp_path / "run"
    train_run(smoke("lm", data_root, "train.steps=10", "train.log_every=1", "strategy.name=early",
                    "strategy.params.at_step=5", "strategy.params.ratio=0.5"), run)
    records = read_jsonl(run / "metrics.jsonl")
    before, after = records[4], records[-1]  # step 4 (all heads), step 10 (half of them pruned at step 5)
    assert after["heads"] < before["heads"]
    assert after["param_mb"] < before["param_mb"] and 0 < after["optimizer_mb"] < before["optimizer_mb"]
    # AdamW keeps two fp32 moments per parameter
    assert after["optimizer_mb"] == pytest.approx(2 * after["param_mb"], rel=0.01)
    assert all(r["peak_mem_mb"] > 0 for r in records)


def test_a_finished_run_can_drop_its_checkpoint_weights(data_root, tmp_path, capsys):
    run = tmp_path / "run"
    cfg = smoke("lm", data_root, "train.steps=10", "train.keep_checkpoint=false")
    train_run(cfg, run)
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["state.json"]
    # the trained model is still the run's and is still checked against the checkpoint's identity
    assert main(["evaluate", str(run)]) == 0
    (run / "summary.json").unlink()
    with pytest.raises(CheckpointError, match="keep_checkpoint=false"):
        train_run(cfg, run)


def test_devices_and_precisions_are_checked_before_anything_runs(data_root):
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda:0")
    for bad, match in [("train.device=tpu", "train.device"), ("train.precision=fp8", "train.precision"),
                       ("train.accumulate=0", "train.accumulate"), ("train.accumulate=9", "data.batch_size=8"),
                       ("train.workers=-1", "train.workers")]:
        with pytest.raises(ConfigError, match=match):
            smoke("lm", data_root, bad)
    placement = Placement.of(smoke("lm", data_root, "train.precision=bf16").train)
    with placement.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    assert placement.scaler() is None and Placement.of(smoke("lm", data_root, "train.precision=fp16").train).scaler()


@pytest.mark.slow
def test_compiled_training_recompiles_after_pruning_and_matches_eager(data_root, tmp_path):
    """train.compile wraps the step's model in torch.compile (about a minute of compiling on CPU); physical
    pruning mid-run changes every shape and the model is compiled again."""
    overrides = ["train.steps=12", "strategy.name=oneshot", "strategy.params.ratio=0.5",
                 "strategy.params.proxy_steps=5"]
    eager = train_run(smoke("lm", data_root, *overrides), tmp_path / "eager")
    compiled = train_run(smoke("lm", data_root, *overrides, "train.compile=true"), tmp_path / "compiled")
    assert compiled["head_layout"] == eager["head_layout"]
    assert compiled["value"] == pytest.approx(eager["value"], rel=1e-4)


def test_a_diverged_run_records_its_environment_and_precision(data_root, tmp_path, monkeypatch):
    """A loss that becomes NaN ends the run with a diverged summary naming the environment it ran in."""
    from heads.train.loop import NonFiniteLoss

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    monkeypatch.setenv("HEADS_PLUGINS", "nan_at_step")
    cfg = smoke("lm", data_root, "train.steps=8", "train.precision=bf16", "strategy.name=nan_at_step",
                "strategy.params.at_step=3")
    with pytest.raises(NonFiniteLoss, match="step 4"):
        train_run(cfg, tmp_path / "run")
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["status"] == "diverged" and summary["environment"]["precision"] == "bfloat16"
