"""The training engine: AdamW, schedule, clipping, seeded determinism, checkpoints, exact resume, hooks.

Strategies act between steps through :class:`Hook` (``on_start``,
``on_step_end``, ``on_end``; ``on_resume`` after a checkpoint is restored) and may prune heads physically mid-run with
:meth:`Trainer.prune`, which slices the optimizer state with the weights.
"""

from __future__ import annotations

import math
import os
import random
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from heads.config import RunConfig
from heads.env import fix_threads
from heads.flops import flops_per_token
from heads.surgery import head_layout, num_heads, prune_heads
from heads.tasks.base import Task
from heads.tasks.batching import Batcher, eval_batches
from heads.train.checkpoint import (
    check_identity,
    load_checkpoint,
    restore_optimizer,
    run_identity,
    save_checkpoint,
)
from heads.train.dropout import get_dropout, set_dropout
from heads.train.metrics import MetricsLog, peak_memory_mb
from heads.train.schedule import lr_at


class NonFiniteLoss(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class Hook:
    """Where strategies act: override what you need. State must be JSON-serialisable."""

    def on_start(self, trainer: Trainer) -> None: ...

    def before_step(self, trainer: Trainer) -> None:
        """Right before the forward pass (e.g. sample stochastic gates)."""

    def penalty(self, trainer: Trainer):
        """A term added to this step's loss (e.g. an L0 penalty), or None."""
        return None

    def on_step_end(self, trainer: Trainer) -> None: ...

    def on_resume(self, trainer: Trainer) -> None:
        """After a resume has restored this hook's state, the model and the optimizer, before the first step:
        re-attach what the checkpointed model and optimizer do not carry (e.g. extra parameter groups)."""

    def on_end(self, trainer: Trainer) -> None: ...

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None: ...


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Trains ``task`` per ``cfg`` into ``out``: metrics.jsonl, events.jsonl, checkpoint/, model/."""

    def __init__(self, cfg: RunConfig, task: Task, out: Path, hooks: Iterable[Hook] = ()):
        self.cfg, self.task, self.out = cfg, task, Path(out)
        self.hooks = list(hooks)
        t = cfg.train
        fix_threads(t.threads)
        seed_everything(t.seed)
        self.tokenizer = task.tokenizer(cfg)
        self.model: nn.Module = task.build_model(cfg, self.tokenizer)
        self.train_examples = task.examples(cfg, self.tokenizer, "train")
        self.val_examples = task.examples(cfg, self.tokenizer, "validation")
        # What a checkpoint of this run must match (recorded in it, checked on resume).
        self.identity = run_identity(self.model, self.tokenizer, task.data_checksum(cfg))
        if not self.val_examples:
            raise ValueError(f"task {task.name}: the validation split is empty")
        self.batcher = Batcher(self.train_examples, cfg.data.batch_size, task.collate, seed=t.seed)
        self.step = 0
        self.tokens = 0
        self.flops = 0.0
        self.train_seconds = 0.0
        self.optimizer = self._optimizer()
        set_dropout(self.model, attention=t.attention_dropout, residual=t.dropout)
        self.metrics = MetricsLog(self.out / "metrics.jsonl")
        self.events = MetricsLog(self.out / "events.jsonl")
        self._update_cost()

    # -- setup -------------------------------------------------------------------------------------
    def _optimizer(self) -> torch.optim.Optimizer:
        t = self.cfg.train
        params = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=t.lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)

    def _update_cost(self) -> None:
        """FLOPs per token for the current layout (changes when heads are pruned)."""
        self.flops_per_token = flops_per_token(
            self.model.config, head_layout(self.model), self.cfg.data.seq_len, architecture=type(self.model).__name__
        ).total

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint"

    def resume(self) -> bool:
        """Continue from ``out/checkpoint`` if there is one; True when resumed."""
        if not (self.checkpoint_path / "state.json").exists():
            return False
        check_identity(self.checkpoint_path, self.identity)
        model, opt_tensors, state = load_checkpoint(self.checkpoint_path)
        self.model = model.train()
        self.optimizer = self._optimizer()
        restore_optimizer(self.model, self.optimizer, opt_tensors)
        self.step, self.tokens = state["step"], state["tokens"]
        self.flops, self.train_seconds = state["flops"], state["train_seconds"]
        self.batcher.load_state_dict(state["batcher"])
        set_dropout(self.model, **state["dropout"])
        for hook, hook_state in zip(self.hooks, state["hooks"], strict=True):
            hook.load_state_dict(hook_state)
        self.metrics.truncate_after(self.step)
        self.events.truncate_after(self.step)
        self._update_cost()
        for hook in self.hooks:
            hook.on_resume(self)
        return True

    def save_checkpoint(self) -> None:
        state = {
            "step": self.step,
            "tokens": self.tokens,
            "flops": self.flops,
            "train_seconds": self.train_seconds,
            "batcher": self.batcher.state_dict(),
            "dropout": get_dropout(self.model),
            "hooks": [h.state_dict() for h in self.hooks],
            "identity": self.identity,
        }
        save_checkpoint(self.checkpoint_path, self.model, self.optimizer, state)

    # -- actions for strategies ----------------------------------------------------------------------
    def prune(self, remove: Mapping[str, Iterable[int]], reason: str = "") -> dict[str, list[int]]:
        """Remove heads physically now; the optimizer state is sliced alongside; logged to events.jsonl."""
        remove = {k: sorted(int(h) for h in v) for k, v in remove.items() if len(list(v))}
        if not remove:
            return head_layout(self.model)
        layout = prune_heads(self.model, remove, optimizer=self.optimizer)
        self._update_cost()
        self.events.write(
            {"step": self.step, "event": "prune", "removed": remove, "reason": reason, "heads": num_heads(layout)}
        )
        return layout

    def set_dropout(self, attention: float | None = None, residual: float | None = None) -> None:
        set_dropout(self.model, attention=attention, residual=residual)
        self.events.write({"step": self.step, "event": "dropout", **get_dropout(self.model)})

    def probe_batches(self, n: int, seed_offset: int = 1) -> list[dict]:
        """``n`` training batches from a separate stream: probing never shifts the training order."""
        probe = Batcher(
            self.train_examples,
            self.cfg.data.batch_size,
            self.task.collate,
            seed=self.cfg.train.seed + 7919 * seed_offset,
        )
        return [next(probe) for _ in range(n)]

    def validation_loss(self, batches: int | None = None) -> float:
        from heads.tasks.base import mean_loss

        n = (batches or self.cfg.train.eval_batches) * self.cfg.data.batch_size
        loss, _ = mean_loss(
            self.model,
            eval_batches(self.val_examples, self.cfg.data.batch_size, self.task.collate, n),
            lambda m, b: self.task.loss(m, b, self.cfg),
            self.task.tokens,
        )
        return loss

    # -- the loop ----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        cfg, t = self.cfg, self.cfg.train
        resumed = self.resume()
        if not resumed:
            self.out.mkdir(parents=True, exist_ok=True)
            for hook in self.hooks:
                hook.on_start(self)
            self.metrics.write(self._record(loss=None, val=self.validation_loss(), window=(0, 0.0)))
            self.save_checkpoint()
        self.model.train()
        progress = _progress(t.steps, self.step, enabled=t.progress)
        window_loss, window_n, window_tokens, window_time = 0.0, 0, 0, 0.0
        while self.step < t.steps:
            started = time.perf_counter()
            for group in self.optimizer.param_groups:
                # a group may carry its own base rate (e.g. L0 gate parameters); the schedule shapes all alike
                group["lr"] = lr_at(self.step, group.get("base_lr", t.lr), t.warmup, t.steps, t.schedule)
            batch = next(self.batcher)
            for hook in self.hooks:
                hook.before_step(self)
            loss = self.task.loss(self.model, batch, cfg)
            for hook in self.hooks:
                extra = hook.penalty(self)
                if extra is not None:
                    loss = loss + extra
            if not torch.isfinite(loss):
                raise NonFiniteLoss(
                    f"step {self.step + 1}: the training loss is {loss.item()}; the run stopped. "
                    f"The last good checkpoint is kept at {self.checkpoint_path} "
                    "(lower train.lr or raise train.warmup)"
                )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if t.clip:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip)
            self.optimizer.step()
            tokens = self.task.tokens(batch)
            self.step += 1
            self.tokens += tokens
            self.flops += self.flops_per_token * tokens
            elapsed = time.perf_counter() - started
            self.train_seconds += elapsed
            window_loss += loss.item()
            window_n += 1
            window_tokens += tokens
            window_time += elapsed
            for hook in self.hooks:
                hook.on_step_end(self)
            _fault_injection(self.step)
            progress.update(1)
            evaluate = self.step % t.eval_every == 0 or self.step == t.steps
            if self.step % t.log_every == 0 or evaluate:
                val = self.validation_loss() if evaluate else None
                self.metrics.write(self._record(window_loss / window_n, val, (window_tokens, window_time)))
                progress.set_postfix(loss=f"{window_loss / window_n:.3f}")
                window_loss, window_n, window_tokens, window_time = 0.0, 0, 0, 0.0
            if self.step in t.snapshots:
                from heads.surgery import save

                save(self.model, self.out / "snapshots" / f"step-{self.step}")
            if self.step % t.checkpoint_every == 0 or self.step == t.steps:
                self.save_checkpoint()
        progress.close()
        for hook in self.hooks:
            hook.on_end(self)
        return {
            "steps": self.step,
            "tokens": self.tokens,
            "train_seconds": self.train_seconds,
            "flops": self.flops,
            "heads": num_heads(head_layout(self.model)),
            "resumed": resumed,
        }

    def _record(self, loss: float | None, val: float | None, window: tuple[int, float]) -> dict:
        tokens, seconds = window
        record = {
            "step": self.step,
            "train_seconds": round(self.train_seconds, 4),
            "wall": time.time(),
            "tokens": self.tokens,
            "train_loss": loss,
            "tokens_per_s": tokens / seconds if seconds else None,
            "lr": self.optimizer.param_groups[0]["lr"],
            "peak_mem_mb": round(peak_memory_mb(), 1),
            "flops": self.flops,
            "heads": num_heads(head_layout(self.model)),
        }
        if val is not None:
            record["val_loss"] = val
            if not math.isfinite(val):
                record["val_loss"] = None
        return record


def _fault_injection(step: int) -> None:
    """``HEADS_FAULT_KILL_AT_STEP=N`` SIGKILLs this process after step N: the reliability tests'
    way to pull the plug at a known point (no cleanup handler can run, exactly like ``kill -9``)."""
    at = os.environ.get("HEADS_FAULT_KILL_AT_STEP")
    if at is not None and step == int(at):
        os.kill(os.getpid(), signal.SIGKILL)


class _NoBar:
    def update(self, n: int) -> None: ...

    def set_postfix(self, **kw) -> None: ...

    def close(self) -> None: ...


def _progress(total: int, initial: int, enabled: bool):
    import sys

    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True)

