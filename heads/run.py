"""One training run end to end: resolved config in, model + metrics + summary out (used by ``heads train``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from heads.config import RunConfig
from heads.env import environment, with_environment
from heads.flops import count_params
from heads.io import read_jsonl, write_json
from heads.surgery import head_layout, save
from heads.tasks import get_task
from heads.train.loop import Hook, NonFiniteLoss, Trainer
from heads.train.metrics import steps_to_target, time_to_target


class RunConflict(RuntimeError):
    """The output folder holds a run made with a different configuration."""


def hooks_for(cfg: RunConfig) -> list[Hook]:
    """The strategy as training hooks (``none``: no hooks)."""
    if cfg.strategy.name == "none":
        return []
    from heads.strategies import build_strategy

    return build_strategy(cfg.strategy.name, cfg.strategy.params).hooks(cfg)


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [f"{prefix.rstrip('.')}: {a!r} -> {b!r}"]


def train_run(cfg: RunConfig, out: Path) -> dict[str, Any]:
    """Train (or resume, or skip when finished) the run ``cfg`` in ``out``; returns the summary."""
    out = Path(out)
    config_file, summary_file = out / "config.json", out / "summary.json"
    wanted = json.loads(json.dumps(cfg.to_dict()))  # tuples -> lists, as on disk
    if config_file.exists():
        before = json.loads(config_file.read_text())
        if before != wanted:
            changes = "; ".join(_diff(before, wanted)[:8])
            raise RunConflict(f"{out} holds a run with another config ({changes}); use a new --out or delete it")
        if summary_file.exists():
            summary = json.loads(summary_file.read_text())
            if summary.get("status") == "ok":
                return summary
    out.mkdir(parents=True, exist_ok=True)
    write_json(config_file, wanted)
    task = get_task(cfg.task)
    trainer = Trainer(cfg, task, out, hooks=hooks_for(cfg))
    try:
        stats = trainer.train()
    except NonFiniteLoss as exc:
        summary = {"status": "diverged", "message": str(exc), "task": cfg.task, "step": trainer.step}
        write_json(summary_file, with_environment(summary, trainer.model))
        raise
    model_dir = save(trainer.model, out / "model")
    trainer.tokenizer.save_pretrained(model_dir)
    result = task.evaluate(trainer.model, cfg, trainer.tokenizer, cfg.eval.split)
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
        "environment": environment(trainer.model),
    }
    if cfg.train.target is not None:
        summary["target"] = cfg.train.target
        summary["time_to_target"] = time_to_target(records, "val_loss", cfg.train.target)
        summary["steps_to_target"] = steps_to_target(records, "val_loss", cfg.train.target)
    write_json(summary_file, summary)
    return summary
