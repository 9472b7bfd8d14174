"""The training engine: AdamW, schedule, clipping, seeded determinism, checkpoints, exact resume, hooks.

Strategies act between steps through :class:`Hook` (``on_start``,
``on_step_end``, ``on_end``; ``on_resume`` after a checkpoint is restored) and may prune heads physically mid-run with
:meth:`Trainer.prune`, which slices the optimizer state with the weights.
"""

from __future__ import annotations

import contextlib
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
from heads.events import Dropout, Prune, first_action
from heads.flops import flops_per_token
from heads.io import clear_stale_temps, read_jsonl
from heads.placement import Placement, optimizer_state_mb, tensor_megabytes
from heads.surgery import head_layout, num_heads, prune_heads
from heads.tasks.base import Task
from heads.tasks.batching import Batcher, Loader, eval_batches
from heads.train import distributed as dist
from heads.train.checkpoint import (
    check_history,
    check_identity,
    load_checkpoint,
    restore_optimizer,
    run_identity,
    save_checkpoint,
)
from heads.train.dropout import get_dropout, set_dropout
from heads.train.metrics_log import MetricsLog
from heads.train.schedule import lr_at


class NonFiniteLoss(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class Hook:
    """Where strategies act: override what you need. State must be JSON-serialisable."""

    def on_start(self, trainer: Trainer) -> None: ...

    def before_step(self, trainer: Trainer) -> None:
        """Right before each forward pass (e.g. sample stochastic gates): once per micro-batch."""

    def penalty(self, trainer: Trainer):
        """A term added to this step's loss (e.g. an L0 penalty), or None: asked with every micro-batch and
        counted once per step (each micro-batch carries its share)."""
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
        self.placement = Placement.of(t, dist.local_rank())
        fix_threads(t.threads, t.deterministic, self.placement.device)
        self.world = dist.join(self.placement.device)
        seed_everything(t.seed)
        # Rank 0 prepares the data and trains the tokenizer first: ranks racing to write one cache would collide.
        for turn in (True, False):
            if self.world.main == turn:
                self.tokenizer = task.tokenizer(cfg)
                self.train_examples = task.examples(cfg, self.tokenizer, "train")
                self.val_examples = task.examples(cfg, self.tokenizer, "validation")
            dist.barrier(self.world)
        self.model: nn.Module = task.build_model(cfg, self.tokenizer).to(self.placement.device)
        # What a checkpoint of this run must match (recorded in it, checked on resume).
        self.identity = run_identity(self.model, self.tokenizer, task.data_checksum(cfg))
        if not self.val_examples:
            raise ValueError(f"task {task.name}: the validation split is empty")
        self.batcher = Batcher(self.train_examples, cfg.data.batch_size, task.collate, seed=t.seed)
        parts = self.world.size * t.accumulate
        if self.batcher.batch_size < parts:
            raise ValueError(
                f"data.batch_size={self.batcher.batch_size} cannot be split into {self.world.size} processes x "
                f"train.accumulate={t.accumulate} micro-batches of at least one example"
            )
        self.loader = Loader(self.batcher, parts, workers=t.workers, pin=self.placement.device.type == "cuda")
        self.step = 0
        self.tokens = 0
        self.flops = 0.0
        self.train_seconds = 0.0
        self.train_cpu_seconds = 0.0  # CPU time of the same steps (all threads): less moved by jobs beside it
        self.optimizer = self._optimizer()
        self.scaler = self.placement.scaler()
        set_dropout(self.model, attention=t.attention_dropout, residual=t.dropout)
        self.metrics = MetricsLog(self.out / "metrics.jsonl", active=self.world.main)
        self.events = MetricsLog(self.out / "events.jsonl", active=self.world.main)
        self._forward: nn.Module | None = None  # the model as the step runs it (DDP, compiled); rebuilt when stale
        self._ddp = None
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
        if self.world.main:  # a kill mid-save leaves its half-written copy beside the checkpoint
            clear_stale_temps(self.checkpoint_path)
        if not (self.checkpoint_path / "state.json").exists():
            return False
        check_identity(self.checkpoint_path, self.identity)
        check_history(self.checkpoint_path, self.out)  # a log deleted or cut below the checkpoint: refused
        model, opt_tensors, state = load_checkpoint(self.checkpoint_path)
        self.model = model.to(self.placement.device).train()
        self.optimizer = self._optimizer()
        restore_optimizer(self.model, self.optimizer, opt_tensors)
        self.step, self.tokens = state["step"], state["tokens"]
        self.flops, self.train_seconds = state["flops"], state["train_seconds"]
        # a checkpoint written before CPU time was kept: the steps before it are uncounted, so no CPU total at all
        cpu = state.get("train_cpu_seconds")
        self.train_cpu_seconds = math.nan if cpu is None else float(cpu)
        self.loader.load_state_dict(state["batcher"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self._forward = None
        set_dropout(self.model, **state["dropout"])
        for hook, hook_state in zip(self.hooks, state["hooks"], strict=True):
            hook.load_state_dict(hook_state)
        self.metrics.truncate_after(self.step)
        if state.get("event_records") is None:  # a checkpoint from before the count was kept: by step
            self.events.truncate_after(self.step)
        else:  # the events its step had when it was written: the run's end, after it, writes its own again
            self.events.truncate_to(int(state["event_records"]))
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
            "train_cpu_seconds": self.train_cpu_seconds if math.isfinite(self.train_cpu_seconds) else None,
            "batcher": self.loader.state_dict(),
            "dropout": get_dropout(self.model),
            "hooks": [h.state_dict() for h in self.hooks],
            "identity": self.identity,
            "event_records": self.events.records(),  # rank 0's count; the others write no events
            "metric_records": self.metrics.records(),  # what a resume must find: a cut history is refused
        }
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        if self.world.main:  # one writer; every rank holds the same weights and moments
            save_checkpoint(self.checkpoint_path, self.model, self.optimizer, state)

    # -- actions for strategies ----------------------------------------------------------------------
    def prune(self, remove: Mapping[str, Iterable[int]], reason: str = "") -> dict[str, list[int]]:
        """Remove heads physically now; the optimizer state is sliced alongside; logged to events.jsonl."""
        remove = {k: sorted(int(h) for h in v) for k, v in remove.items() if len(list(v))}
        # Rank 0 decides: scores computed on each rank may differ in the last bit on a GPU, and the ranks'
        # models must stay one model.
        remove = dist.broadcast(self.world, remove)
        if not remove:
            return head_layout(self.model)
        # the bytes a prune frees, in the event itself (a metrics record either side of it may not exist)
        before = self._memory_mb()
        layout = prune_heads(self.model, remove, optimizer=self.optimizer)
        self._forward = None  # DDP holds the old parameters; rebuilt (and synced from rank 0) before the next step
        self._update_cost()
        after = self._memory_mb()
        self.events.write(Prune(
            step=self.step, removed=remove, reason=reason, heads=num_heads(layout),
            param_mb_before=before["param_mb"], optimizer_mb_before=before["optimizer_mb"],
            param_mb_after=after["param_mb"], optimizer_mb_after=after["optimizer_mb"]).record())
        return layout

    def _memory_mb(self) -> dict[str, float]:
        """Parameter and optimizer-state megabytes now (the optimizer's are 0 before its first step)."""
        return {"param_mb": round(tensor_megabytes(self.model.parameters()), 3),
                "optimizer_mb": round(optimizer_state_mb(self.optimizer), 3)}

    def set_dropout(self, attention: float | None = None, residual: float | None = None) -> None:
        attention, residual = dist.broadcast(self.world, (attention, residual))
        set_dropout(self.model, attention=attention, residual=residual)
        self.events.write(Dropout(step=self.step, **get_dropout(self.model)).record())

    def probe_batches(self, n: int, seed_offset: int = 1) -> list[dict]:
        """``n`` training batches from a separate stream: probing never shifts the training order."""
        probe = Batcher(
            self.train_examples,
            self.cfg.data.batch_size,
            self.task.collate,
            seed=self.cfg.train.seed + 7919 * seed_offset,
        )
        return [self.placement.to(next(probe)) for _ in range(n)]

    def validation_loss(self, batches: int | None = None) -> float:
        from heads.tasks.base import mean_loss

        n = (batches or self.cfg.train.eval_batches) * self.cfg.data.batch_size
        every = eval_batches(self.val_examples, self.cfg.data.batch_size, self.task.collate, n)
        mine = list(every)[self.world.rank :: self.world.size]  # each rank its share; sums joined below
        with self.placement.autocast():
            loss, count = mean_loss(
                self.model, mine, lambda m, b: self.task.loss(m, b, self.cfg), self.task.tokens
            )
        if not self.world.distributed:
            return loss
        total, count = dist.sum_all(self.world, [loss * count if count else 0.0, count], self.placement.device)
        return total / count if count else math.nan

    # -- the loop ----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        t = self.cfg.train
        resumed = self.resume()
        dist.barrier(self.world)  # every rank has decided to resume before rank 0 writes a first checkpoint
        if not resumed:
            self.out.mkdir(parents=True, exist_ok=True)
            if self.world.main:  # a start killed before its first checkpoint left logs a fresh start must not extend
                self.metrics.path.unlink(missing_ok=True)
                self.events.path.unlink(missing_ok=True)
            for hook in self.hooks:
                hook.on_start(self)
            self.metrics.write(self._record(loss=None, val=self.validation_loss(), window=(0, 0.0)))
            self.save_checkpoint()
        self.model.train()
        progress = _progress(t.steps, self.step, enabled=t.progress and self.world.main)
        window_loss, window_n, window_tokens, window_time = 0.0, 0, 0, 0.0
        out_of_time = self._out_of_time()  # a resumed run that had used its time trains no further
        while self.step < t.steps and not out_of_time:
            started, started_cpu = time.perf_counter(), time.process_time()
            loss, tokens = self._step()
            self.step += 1
            self.tokens += tokens
            self.flops += self.flops_per_token * tokens
            self.placement.synchronize()
            elapsed = time.perf_counter() - started
            self.train_seconds += elapsed
            self.train_cpu_seconds += time.process_time() - started_cpu
            window_loss += loss
            window_n += 1
            window_tokens += tokens
            window_time += elapsed
            for hook in self.hooks:
                hook.on_step_end(self)
            _fault_injection(self.step)
            progress.update(1)
            out_of_time = self._out_of_time()
            last = self.step == t.steps or out_of_time  # validated and checkpointed like the last step
            evaluate = self.step % t.eval_every == 0 or last
            if self.step % t.log_every == 0 or evaluate:
                val = self.validation_loss() if evaluate else None
                self.metrics.write(self._record(window_loss / window_n, val, (window_tokens, window_time)))
                progress.set_postfix(loss=f"{window_loss / window_n:.3f}")
                window_loss, window_n, window_tokens, window_time = 0.0, 0, 0, 0.0
            if self.step in t.snapshots and self.world.main:
                from heads.surgery import save

                save(self.model, self.out / "snapshots" / f"step-{self.step}")
            if self.step % t.checkpoint_every == 0 or last:
                self.save_checkpoint()
        progress.close()
        self.loader.close()
        # DDP goes with the training: its reducer holds the process group and hooks on every parameter, and
        # nothing may hold the group when it is torn down at the run's end (rank 0's evaluation needs no DDP)
        self._forward = self._ddp = None
        for hook in self.hooks:
            hook.on_end(self)
        stopped = {}
        if self.step < t.steps:  # by train.time_limit (now or before a resume)
            stopped = {"stopped": {"by": "train.time_limit", "time_limit": t.time_limit, "of_steps": t.steps}}
        return {
            "steps": self.step,
            **stopped,
            "tokens": self.tokens,
            "train_seconds": self.train_seconds,
            "train_cpu_seconds": self.train_cpu_seconds if math.isfinite(self.train_cpu_seconds) else None,
            "flops": self.flops,
            "heads": num_heads(head_layout(self.model)),
            "resumed": resumed,
            "world_size": self.world.size,
            # the steps before the strategy first acted (pruned, probed, changed dropout): what the report calls
            # the run's early throughput, said by the run rather than inferred by its reader
            "warmup_end": first_action(read_jsonl(self.events.path, torn_tail_ok=True))
            if self.world.main and self.events.path.is_file() else None,
        }

    def _out_of_time(self) -> bool:
        """Whether ``train.time_limit`` is used up; rank 0's clock decides for every rank (their steps must
        agree, or the next collective hangs)."""
        limit = self.cfg.train.time_limit
        return limit is not None and bool(dist.broadcast(self.world, self.train_seconds >= limit))

    def _forward_model(self) -> nn.Module:
        """The model as a step runs it: under DDP in a distributed run, compiled when asked. Built again after
        physical pruning (DDP holds the parameters it was built with; building it syncs rank 0's weights,
        which also carries a re-initialisation a strategy made on rank 0's random stream)."""
        if self._forward is None:
            headless = any(not kept for kept in head_layout(self.model).values())
            model = dist.wrap(self.model, self.world, self.placement.device, unused=headless)
            self._ddp = model if self.world.distributed else None
            self._forward = torch.compile(model) if self.cfg.train.compile else model
        return self._forward

    def _step(self) -> tuple[float, int]:
        """One optimizer step over this step's batch, split into micro-batches across ranks and accumulation;
        returns the batch's loss (penalties included) and its tokens."""
        t, world = self.cfg.train, self.world
        for group in self.optimizer.param_groups:
            # a group may carry its own base rate (e.g. L0 gate parameters); the schedule shapes all alike
            group["lr"] = lr_at(self.step, group.get("base_lr", t.lr), t.warmup, t.steps, t.schedule)
        micro = next(self.loader)
        if world.distributed:
            # Each rank its own dropout stream, a function of (seed, step, rank): exact on resume at any step.
            torch.manual_seed((t.seed * 1_000_003 + self.step) * 4099 + world.rank)
        forward = self._forward_model()
        # Each micro-batch's loss weighted by its share of the batch's loss items: any split gives the batch's
        # loss, and its gradient (DDP averages over ranks, hence the world-size factor).
        weights = [self.task.loss_items(b) for b in micro]
        total_items = max(1, sum(weights))
        tokens = sum(self.task.tokens(b) for b in micro)
        share = slice(world.rank * t.accumulate, (world.rank + 1) * t.accumulate)
        mine = list(zip(micro[share], weights[share], strict=True))
        self.optimizer.zero_grad(set_to_none=True)
        data_loss = penalty_loss = None
        for i, (batch, items) in enumerate(mine):
            for hook in self.hooks:
                hook.before_step(self)
            last = i == len(mine) - 1
            sync = contextlib.nullcontext() if last or self._ddp is None else self._ddp.no_sync()
            with sync:
                with self.placement.autocast():
                    loss = self.task.loss(forward, self.placement.to(batch), self.cfg)
                part = loss if items == total_items else loss * (items / total_items)
                data_loss = part.detach() if data_loss is None else data_loss + part.detach()
                for hook in self.hooks:
                    extra = hook.penalty(self)
                    if extra is not None:
                        extra = extra if len(mine) == 1 else extra / len(mine)
                        part = part + extra
                        penalty_loss = extra.detach() if penalty_loss is None else penalty_loss + extra.detach()
                if world.distributed:
                    part = part * world.size
                (part if self.scaler is None else self.scaler.scale(part)).backward()
        value = self._step_loss(data_loss, penalty_loss)
        if not math.isfinite(value):
            raise NonFiniteLoss(
                f"step {self.step + 1}: the training loss is {value}; the run stopped. "
                f"The last good checkpoint is kept at {self.checkpoint_path} "
                "(lower train.lr or raise train.warmup)"
            )
        if world.distributed:
            own = {id(p) for p in self.model.parameters()}
            dist.average_gradients(
                world, [p for g in self.optimizer.param_groups for p in g["params"] if id(p) not in own]
            )
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if t.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip)
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)  # skipped when fp16 overflowed; the scale is lowered instead
            self.scaler.update()
        return value, tokens

    def _step_loss(self, data_loss: torch.Tensor, penalty: torch.Tensor | None) -> float:
        """The step's loss as one process over the whole batch would report it (penalties counted once)."""
        if not self.world.distributed:
            return float(data_loss if penalty is None else data_loss + penalty)
        pen = 0.0 if penalty is None else float(penalty)
        data, pen = dist.sum_all(self.world, [float(data_loss), pen], self.placement.device)
        return data + pen / self.world.size

    def _record(self, loss: float | None, val: float | None, window: tuple[int, float]) -> dict:
        tokens, seconds = window
        record = {
            "step": self.step,
            "train_seconds": round(self.train_seconds, 4),
            "train_cpu_seconds": round(self.train_cpu_seconds, 4) if math.isfinite(self.train_cpu_seconds) else None,
            "wall": time.time(),
            "tokens": self.tokens,
            "train_loss": loss,
            "tokens_per_s": tokens / seconds if seconds else None,
            "lr": self.optimizer.param_groups[0]["lr"],
            # on CUDA the peak since the last record (this window's); on CPU the process's peak so far
            "peak_mem_mb": round(self.placement.peak_memory_mb(reset=True), 1),
            **self._memory_mb(),
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

