"""kill -9 after a strategy has acted, then run again: every strategy that acts during training ends bit for bit
where an uninterrupted run ends (the same weights by sha256, the same metrics and events)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import heads_train_killed, smoke, untimed

from heads.io import read_jsonl
from heads.run import train_run
from heads.strategies import STRATEGIES, Strategy

STEPS, CHECKPOINT_EVERY, KILL_AT = 20, 5, 13  # the resume starts from the step-10 checkpoint
# Parameters that make each training-time strategy act at smoke scale before step 10 (curriculum: once before
# the kill and once after it, so its second wave runs on restored state). A new training-time strategy gets
# its line here; test_every_training_time_strategy_is_covered says so.
ACTING: dict[str, dict] = {
    "oneshot": {"ratio": 0.5, "proxy_steps": 5},
    "curriculum": {"max_ratio": 0.5, "waves": [[0.25, 0.3], [0.75, -1.0]]},
    "dropout_regime": {"high": 0.25, "low": 0.1, "warmup_fraction": 0.25, "threshold": -1.0},
    "early": {"at_step": 5, "ratio": 0.25},
    "l0": {"lam": 0.005, "lr": 0.05},
    "scratch": {"keep": 2},
}
# A strategy acts during training when it gives hooks (post-hoc ones only select on a trained model).
TRAINING_TIME = sorted(name for name, cls in STRATEGIES.items() if cls.hooks is not Strategy.hooks)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def acted_before_checkpoint(run: Path) -> bool:
    """The killed run's checkpoint already holds the strategy's work: heads removed by then, or L0's gate
    parameters moved from their start (L0 removes heads only at the end)."""
    step = json.loads((run / "checkpoint/state.json").read_text())["step"]
    pruned = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "prune" and e["step"] <= step]
    hooks = json.loads((run / "checkpoint/state.json").read_text())["hooks"]
    moved = any(
        value != ACTING["l0"].get("init", 3.0)
        for hook in hooks
        for values in hook.get("log_alpha", {}).values()
        for value in values
    )
    return bool(pruned) or moved


def test_every_training_time_strategy_is_covered():
    assert TRAINING_TIME == sorted(ACTING), "give a new training-time strategy its acting parameters in ACTING"


@pytest.mark.parametrize("name", TRAINING_TIME)
def test_kill_9_after_the_strategy_acted_then_resume_equals_uninterrupted(name, data_root, tmp_path):
    overrides = [
        f"train.steps={STEPS}",
        f"train.checkpoint_every={CHECKPOINT_EVERY}",
        "train.dropout=0.1",  # random masks every step: the random state must come back too
        f"strategy.name={name}",
        *(f"strategy.params.{key}={json.dumps(value)}" for key, value in ACTING[name].items()),
    ]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    uninterrupted = train_run(smoke("lm", data_root, *overrides), whole)
    heads_train_killed("lm", cut, data_root, overrides, at_step=KILL_AT, fresh_interpreter=False)
    assert json.loads((cut / "checkpoint/state.json").read_text())["step"] == 10
    assert acted_before_checkpoint(cut), f"{name} had not acted by the checkpoint: the resume tests nothing"

    resumed = train_run(smoke("lm", data_root, *overrides), cut)
    assert resumed["resumed"] and not uninterrupted["resumed"]
    assert sha256(cut / "model/model.safetensors") == sha256(whole / "model/model.safetensors")
    assert untimed(read_jsonl(cut / "metrics.jsonl")) == untimed(read_jsonl(whole / "metrics.jsonl"))
    assert read_jsonl(cut / "events.jsonl") == read_jsonl(whole / "events.jsonl")
    assert resumed["eval"] == uninterrupted["eval"] and resumed["head_layout"] == uninterrupted["head_layout"]
    assert resumed["warmup_end"] == uninterrupted["warmup_end"]  # read back from the kept events
    if name == "curriculum":  # both waves removed heads, the second one after the resume
        assert [e["step"] for e in read_jsonl(whole / "events.jsonl") if e["event"] == "prune"] == [5, 15]


def test_a_run_killed_after_its_end_events_writes_them_once(data_root, tmp_path):
    """A kill after the last checkpoint and the end's events (L0's gates, its removals) but before the summary:
    the rerun resumes at the last step and runs the end again; its events appear once, as in a whole run (the
    checkpoint counts the events before it: the end's share its step, so a truncation by step kept them)."""
    overrides = [f"train.steps={STEPS}", f"train.checkpoint_every={CHECKPOINT_EVERY}", "strategy.name=l0",
                 *(f"strategy.params.{key}={json.dumps(value)}" for key, value in ACTING["l0"].items())]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train_run(smoke("lm", data_root, *overrides), whole)
    train_run(smoke("lm", data_root, *overrides), cut)
    (cut / "summary.json").unlink()  # as if killed between the end's events and the summary
    ends = [e for e in read_jsonl(whole / "events.jsonl") if e["step"] == STEPS]
    assert ends, "the end wrote no events at its step: the test tests nothing"
    resumed = train_run(smoke("lm", data_root, *overrides), cut)
    assert resumed["resumed"]
    assert read_jsonl(cut / "events.jsonl") == read_jsonl(whole / "events.jsonl")
    assert sha256(cut / "model/model.safetensors") == sha256(whole / "model/model.safetensors")
