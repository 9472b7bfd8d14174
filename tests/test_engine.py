"""The training engine at smoke scale: learns, is deterministic, resumes exactly after kill -9."""

import json
import shutil

import pytest
import torch
from conftest import heads_train_killed, smoke, untimed

from heads.config import ConfigError
from heads.io import read_jsonl
from heads.run import RunConflict, train_run
from heads.surgery import CheckpointError, head_layout, sites
from heads.tasks import get_task
from heads.train.checkpoint import load_checkpoint
from heads.train.loop import Hook, NonFiniteLoss, Trainer

TASKS = ["lm", "mt", "cls"]


@pytest.mark.parametrize("task", TASKS)
def test_training_lowers_loss_and_reports_the_metric(task, data_root, tmp_path):
    summary = train_run(smoke(task, data_root), tmp_path)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    val = [r["val_loss"] for r in records if "val_loss" in r]
    assert val[-1] < val[0]
    assert summary["status"] == "ok" and summary["metric"] == get_task(task).metric
    assert summary["value"] == summary["eval"][summary["metric"]]
    if task == "mt":
        assert summary["eval"]["bleu_signature"].startswith("nrefs:1|case:mixed")
        assert "chrf" in summary["eval"]
    if task == "lm":
        assert summary["eval"]["bits_per_token"] > 0
    for key in ("step", "tokens", "train_loss", "tokens_per_s", "peak_mem_mb", "flops", "train_seconds"):
        assert key in records[-1]
    for part in ("config.json", "model/model.safetensors", "model/tokenizer.json", "checkpoint/state.json"):
        assert (tmp_path / part).exists(), part


def test_same_seed_same_numbers(data_root, tmp_path):
    a = train_run(smoke("lm", data_root), tmp_path / "a")
    b = train_run(smoke("lm", data_root), tmp_path / "b")
    assert a["eval"] == b["eval"]
    assert untimed(read_jsonl(tmp_path / "a/metrics.jsonl")) == untimed(read_jsonl(tmp_path / "b/metrics.jsonl"))
    c = train_run(smoke("lm", data_root, "train.seed=1"), tmp_path / "c")
    assert c["eval"] != a["eval"]


@pytest.mark.parametrize("task", TASKS)
def test_kill_9_then_resume_equals_uninterrupted(task, data_root, tmp_path):
    # dropout on, so RNG state must be restored too
    overrides = ["train.dropout=0.1", "train.attention_dropout=0.1"]
    whole = train_run(smoke(task, data_root, *overrides), tmp_path / "whole")
    cut = tmp_path / "cut"
    heads_train_killed(task, cut, data_root, overrides, at_step=15)
    assert json.loads((cut / "checkpoint/state.json").read_text())["step"] == 10
    resumed = train_run(smoke(task, data_root, *overrides), cut)
    assert resumed["resumed"] and not whole["resumed"]
    assert resumed["eval"] == whole["eval"]
    assert untimed(read_jsonl(cut / "metrics.jsonl")) == untimed(read_jsonl(tmp_path / "whole/metrics.jsonl"))
    # a resume adds no file an uninterrupted run lacks (an empty events.jsonl once broke the killed-DAG test)
    assert _files(cut) == _files(tmp_path / "whole")
    for name in ("config.json", "model/config.json", "checkpoint/model/config.json"):
        assert json.loads((cut / name).read_text()) == json.loads((tmp_path / "whole" / name).read_text()), name


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


class PruneAt(Hook):
    """Removes head 0 of every site at one step: pruning in the middle of training."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer):
        if trainer.step == self.step:
            trainer.prune({s.name: [0] for s in sites(trainer.model)}, reason="test")


class Crash(Hook, Exception):
    def __init__(self, step=0):
        self.step = step

    def on_step_end(self, trainer):
        if trainer.step == self.step:
            raise Crash()


def test_physical_pruning_mid_run_then_resume(data_root, tmp_path):
    cfg = smoke("lm", data_root)
    task = get_task("lm")
    whole = Trainer(cfg, task, tmp_path / "whole", hooks=[PruneAt(5)])
    stats = whole.train()
    assert stats["heads"] == 2 * 3
    events = read_jsonl(tmp_path / "whole/events.jsonl")
    assert events[0]["event"] == "prune" and events[0]["step"] == 5
    assert stats["warmup_end"] == 5  # the run says where its strategy first acted; the report reads it
    # a run that crashes at step 15 and resumes from the step-10 checkpoint (pruned already) ends identical
    cut = tmp_path / "cut"
    with pytest.raises(Crash):
        Trainer(cfg, task, cut, hooks=[PruneAt(5), Crash(15)]).train()
    second = Trainer(cfg, task, cut, hooks=[PruneAt(5), Hook()])
    second.train()
    assert head_layout(second.model) == head_layout(whole.model)
    for a, b in zip(second.model.parameters(), whole.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert untimed(read_jsonl(cut / "metrics.jsonl")) == untimed(read_jsonl(tmp_path / "whole/metrics.jsonl"))


class Poison(Hook):
    def on_step_end(self, trainer):
        if trainer.step == 12:
            with torch.no_grad():
                next(trainer.model.parameters()).fill_(float("nan"))


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(data_root, tmp_path):
    trainer = Trainer(smoke("lm", data_root), get_task("lm"), tmp_path, hooks=[Poison()])
    with pytest.raises(NonFiniteLoss, match="step 13.*last good checkpoint"):
        trainer.train()
    model, _, state = load_checkpoint(tmp_path / "checkpoint")
    assert state["step"] == 10
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_corrupt_checkpoint_is_named(data_root, tmp_path):
    train_run(smoke("lm", data_root, "train.steps=10"), tmp_path)
    opt = tmp_path / "checkpoint/optimizer.safetensors"
    opt.write_bytes(opt.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="optimizer.safetensors|unreadable"):
        load_checkpoint(tmp_path / "checkpoint")


def test_finished_run_is_not_redone_and_a_changed_config_is_refused(data_root, tmp_path):
    first = train_run(smoke("lm", data_root, "train.steps=10"), tmp_path)
    before = (tmp_path / "metrics.jsonl").read_text()
    assert train_run(smoke("lm", data_root, "train.steps=10"), tmp_path) == first
    assert (tmp_path / "metrics.jsonl").read_text() == before
    with pytest.raises(RunConflict, match="train.lr"):
        train_run(smoke("lm", data_root, "train.steps=10", "train.lr=0.5"), tmp_path)


def test_a_time_limit_ends_the_run_as_if_its_steps_were_done(data_root, tmp_path):
    """train.time_limit: the run stops after the step that uses it up, validated, checkpointed and evaluated
    like a run of that many steps (the same run, under a schedule that does not read the total), and says so;
    a resume after its time is used up trains no further."""
    same = ["train.schedule=inverse_sqrt"]
    stopped = train_run(smoke("lm", data_root, *same, "train.time_limit=1e-9"), tmp_path / "stopped")
    one = train_run(smoke("lm", data_root, *same, "train.steps=1"), tmp_path / "one")
    assert stopped["steps"] == 1 and stopped["stopped"] == {"by": "train.time_limit", "time_limit": 1e-9,
                                                             "of_steps": 30}
    assert "stopped" not in one
    assert stopped["eval"] == one["eval"] and stopped["final_val_loss"] == one["final_val_loss"] is not None
    metrics = [untimed(read_jsonl(tmp_path / run / "metrics.jsonl")) for run in ("stopped", "one")]
    assert metrics[0] == metrics[1]
    assert json.loads((tmp_path / "stopped/checkpoint/state.json").read_text())["step"] == 1
    # killed between its last checkpoint and its summary: the rerun resumes, finds the time used, trains nothing
    for name in ("summary.json", "examples.json"):
        (tmp_path / "stopped" / name).unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "stopped/model")
    again = train_run(smoke("lm", data_root, *same, "train.time_limit=1e-9"), tmp_path / "stopped")
    assert again["resumed"] and again["steps"] == 1 and again["eval"] == stopped["eval"]
    # the limit is one call's budget, not the run: a later call with another finds the run finished
    assert train_run(smoke("lm", data_root, *same), tmp_path / "stopped") == again
    with pytest.raises(ConfigError, match="train.time_limit: must be > 0"):
        smoke("lm", data_root, "train.time_limit=0")


def test_a_time_limit_mid_run_stops_between_logs_and_checkpoints(data_root, tmp_path, monkeypatch):
    """On a clock where every step takes one second, a limit of 12.5 s ends the run after step 13 (neither a
    log, an evaluation nor a checkpoint step): it is logged, validated and checkpointed there, and equals a run
    of 13 steps; a limit the steps use up exactly at their end is no stop."""
    import types

    from heads.train import loop

    ticks = iter(range(10**6))
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks)),
                                                             process_time=loop.time.process_time,
                                                             time=loop.time.time))
    same = ["train.schedule=inverse_sqrt"]
    stopped = train_run(smoke("lm", data_root, *same, "train.time_limit=12.5"), tmp_path / "stopped")
    thirteen = train_run(smoke("lm", data_root, *same, "train.steps=13"), tmp_path / "thirteen")
    assert stopped["steps"] == 13 and stopped["stopped"]["of_steps"] == 30
    assert stopped["eval"] == thirteen["eval"]
    metrics = [untimed(read_jsonl(tmp_path / run / "metrics.jsonl")) for run in ("stopped", "thirteen")]
    assert metrics[0] == metrics[1] and metrics[0][-1]["step"] == 13 and metrics[0][-1]["val_loss"] is not None
    assert json.loads((tmp_path / "stopped/checkpoint/state.json").read_text())["step"] == 13
    whole = train_run(smoke("lm", data_root, *same, "train.time_limit=30"), tmp_path / "whole")
    assert whole["steps"] == 30 and "stopped" not in whole


def test_cls_from_config_trains_with_its_own_tokenizer(data_root, tmp_path):
    cfg = smoke(
        "cls",
        data_root,
        "model.source=config",
        "model.d=32",
        "model.heads=4",
        "model.layers=2",
        "train.steps=5",
        "train.lr=0.003",
    )
    summary = train_run(cfg, tmp_path)
    assert summary["status"] == "ok" and 0.0 <= summary["value"] <= 1.0
    assert len(sites(get_task("cls").build_model(cfg, get_task("cls").tokenizer(cfg)))) == 2


def test_cpu_seconds_accumulate_and_a_checkpoint_without_them_gives_none(data_root, tmp_path):
    """train_cpu_seconds grows with the steps and survives a resume; resuming a checkpoint written before it was
    kept leaves it unknown (None), never a count that silently misses the steps before the resume."""
    cut = tmp_path / "cut"
    heads_train_killed("lm", cut, data_root, [], at_step=15)
    state = json.loads((cut / "checkpoint/state.json").read_text())
    assert state["train_cpu_seconds"] > 0
    old = tmp_path / "old"
    shutil.copytree(cut, old)
    del state["train_cpu_seconds"]
    (old / "checkpoint/state.json").write_text(json.dumps(state))
    resumed = train_run(smoke("lm", data_root), cut)
    cpu = [r["train_cpu_seconds"] for r in read_jsonl(cut / "metrics.jsonl")]
    assert resumed["train_cpu_seconds"] > 0 and cpu == sorted(cpu)
    unknown = train_run(smoke("lm", data_root), old)
    after = [r for r in read_jsonl(old / "metrics.jsonl") if r["step"] > 10]
    assert unknown["train_cpu_seconds"] is None and after and all(r["train_cpu_seconds"] is None for r in after)
