"""One training run end to end: resolved config in, model + metrics + summary out (used by ``heads train``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from heads import examples
from heads.config import RunConfig
from heads.env import environment, with_environment
from heads.flops import count_params
from heads.freshness import config_changes
from heads.io import (
    RUN_ENTRIES,
    BadFileError,
    InputError,
    OutputConflict,
    check_output_folder,
    clear_stale_temps,
    read_json,
    read_jsonl,
    write_json,
)
from heads.outpath import RUN, claim, target
from heads.surgery import head_layout, save
from heads.tasks import get_task
from heads.train.checkpoint import check_history, check_identity, drop_weights
from heads.train.distributed import leave
from heads.train.loop import Hook, NonFiniteLoss, Trainer
from heads.train.metrics_log import steps_to_target, time_to_target


class RunConflict(InputError, RuntimeError):
    """The output folder holds a run made with a different configuration."""


def hooks_for(cfg: RunConfig) -> list[Hook]:
    """The strategy as training hooks (``none``: no hooks)."""
    if cfg.strategy.name == "none":
        return []
    from heads.strategies import build_strategy

    return build_strategy(cfg.strategy.name, cfg.strategy.params).hooks(cfg)


def _finished(out: Path, wanted: dict) -> dict | None:
    """The summary of a finished run of this config in ``out``; None when there is work to do.
    Refuses a folder that is not a run folder, or one that holds a run of another config."""
    config_file, summary_file = out / "config.json", out / "summary.json"
    check_output_folder(out, RUN_ENTRIES, "heads train", "give --out a new or empty folder")
    if (out / "model").exists() and not config_file.exists() and not (out / "checkpoint" / "state.json").exists():
        raise OutputConflict(
            f"heads train: {out / 'model'} was not written by a run in {out} (no config.json or checkpoint beside "
            "it) and would be replaced; give --out a new folder, or move the model away"
        )
    if not config_file.exists():
        return None
    try:
        before = read_json(config_file, "a run configuration")
    except BadFileError as exc:
        raise BadFileError(f"{exc}; it is the run's record: restore it, or delete {out} to start over") from None
    if not isinstance(before, dict) or not {"task", "model", "train"} <= set(before):
        raise OutputConflict(f"heads train: {config_file} is not a run configuration; give --out a new folder")
    changed = config_changes(before, wanted)
    if changed and _abandoned(out):
        # a start killed before its first checkpoint: nothing of it to keep, so it does not bind the folder
        print(f"heads train: {out} holds a start that never reached its first checkpoint; starting afresh",
              file=sys.stderr)
        return None
    if changed:
        changes = "; ".join(changed[:8])
        raise RunConflict(f"{out} holds a run with another config ({changes}); use a new --out or delete it")
    if summary_file.exists():
        try:
            summary = read_json(summary_file, "a run summary")
        except BadFileError as exc:
            raise BadFileError(f"{exc}; delete it and train again to re-evaluate (the checkpoint is kept)") from None
        if isinstance(summary, dict) and summary.get("status") == "ok":
            return summary
    return None


def _abandoned(out: Path) -> bool:
    """Whether ``out`` holds only what a start writes before its first checkpoint (its config, its first
    metrics): no checkpoint state, no model, no summary."""
    return not any((out / p).exists() for p in ("checkpoint/state.json", "model", "summary.json"))


def train_run(cfg: RunConfig, out: Path) -> dict[str, Any]:
    """Train (or resume, or skip when finished) the run ``cfg`` in ``out``; returns the summary.

    Everything that can be checked is checked before anything is written: the folder, the config, the data,
    the tokenizer, the model and, on resume, the checkpoint's identity; a refused start leaves no trace."""
    out = target(out, "", RUN)  # not inside another run, not a file or device; a symlink followed
    if os.environ.get("RANK", "0") != "0":  # a distributed run's other ranks: rank 0 holds the lock and writes
        return _train_run(cfg, out)
    with claim(out, ""):  # one writer per run folder: a second `heads train` on it is refused
        return _train_run(cfg, out)


def _train_run(cfg: RunConfig, out: Path) -> dict[str, Any]:
    wanted = json.loads(json.dumps(cfg.to_dict()))  # tuples -> lists, as on disk
    finished = _finished(out, wanted)
    if finished is not None:
        return finished
    task = get_task(cfg.task)
    if cfg.train.steps > 0:  # training on rows it is judged on would leak; evaluating on them is fine
        from heads.data.prepare import check_trainable

        check_trainable(task.data_path(cfg))
    trainer = Trainer(cfg, task, out, hooks=hooks_for(cfg))
    try:
        summary = _train(trainer, cfg, task, out, wanted)
    except BaseException:
        leave(trainer.world, ok=False)
        raise
    leave(trainer.world)
    return summary


def _undo_start(out: Path, existed: bool) -> None:
    """Remove what a start that failed before its first checkpoint wrote (its config.json, its first metrics and
    events, a checkpoint copy half written), and ``out`` itself when this start made it: a refused or failed
    start leaves no trace, so the corrected command is not refused as another config's run."""
    for name in ("config.json", "metrics.jsonl", "events.jsonl"):
        (out / name).unlink(missing_ok=True)
    clear_stale_temps(out / "checkpoint")
    if not existed:
        try:
            out.rmdir()
        except OSError:
            pass  # something else is there: kept


def _train(trainer: Trainer, cfg: RunConfig, task, out: Path, wanted: dict) -> dict[str, Any]:
    config_file, summary_file = out / "config.json", out / "summary.json"
    main = trainer.world.main  # in a distributed run only rank 0 writes
    precision = str(trainer.placement.dtype).removeprefix("torch.")
    resuming = (trainer.checkpoint_path / "state.json").exists()
    if resuming:  # checked before the first write: a refused resume changes nothing
        check_identity(trainer.checkpoint_path, trainer.identity)
        check_history(trainer.checkpoint_path, out)
    existed = out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        if main:
            write_json(config_file, wanted)
        stats = trainer.train()
    except NonFiniteLoss as exc:  # after the first checkpoint (step 0's): the run is over and says so
        summary = {"status": "diverged", "message": str(exc), "task": cfg.task, "step": trainer.step}
        if main:
            write_json(summary_file, with_environment(summary, trainer.model, precision=precision))
        raise
    except BaseException:
        if main and not resuming and not (trainer.checkpoint_path / "state.json").exists():
            _undo_start(out, existed)
        raise
    if not main:
        return {"status": "ok", "rank": trainer.world.rank, **stats}
    model_dir = save(trainer.model, out / "model")
    trainer.tokenizer.save_pretrained(model_dir)
    with trainer.placement.autocast():  # as `heads evaluate` of this run would evaluate it
        result, columns = examples.split_off(task.evaluate(trainer.model, cfg, trainer.tokenizer, cfg.eval.split))
    if columns is not None:  # before the summary, which marks the run done
        write_json(out / examples.FILE, examples.record(columns, result))
    records = read_jsonl(out / "metrics.jsonl")
    layout = head_layout(trainer.model)
    summary = {
        "status": "ok",
        "task": cfg.task,
        "preset": cfg.preset,
        "seed": cfg.train.seed,
        "strategy": cfg.strategy.name,
        "metric": task.metric,
        "value": result[task.metric],
        "eval": result,
        "final_val_loss": next((r["val_loss"] for r in reversed(records) if r.get("val_loss") is not None), None),
        **stats,
        "params": count_params(trainer.model.config, layout, architecture=type(trainer.model).__name__),
        "head_layout": layout,
        "flops_per_token": trainer.flops_per_token,
        "run": cfg.run,
        "environment": environment(trainer.model, precision=precision),
    }
    if cfg.train.target is not None:
        summary["target"] = cfg.train.target
        summary["time_to_target"] = time_to_target(records, "val_loss", cfg.train.target)
        summary["steps_to_target"] = steps_to_target(records, "val_loss", cfg.train.target)
    write_json(summary_file, summary)
    if not cfg.train.keep_checkpoint:
        drop_weights(trainer.checkpoint_path)
    return summary
