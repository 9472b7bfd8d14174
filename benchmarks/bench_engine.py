"""Training engine (heads.train.loop.Trainer) vs a minimal plain-PyTorch loop: throughput on identical work.

The Trainer trains the task at the preset's size and batch; a hook on it runs,
after every engine step, one step of a plain loop on a deep copy of the same
model (taken before the first step) with the same batch sequence (its own
``Batcher`` with the same seed, so batch i is identical), the same AdamW
settings, the same gradient clipping and the same schedule function
(``heads.train.schedule.lr_at``). Steps of the two alternate one by one, so
machine noise hits both alike, and the two models stay bit-identical (checked
at the end): it is the same computation with and without the engine.

Engine step time = wall time from the end of one plain step to the engine's
next ``on_step_end``: everything the engine does per step (lr, next batch,
loss, finiteness check, zero_grad, backward, clip, AdamW, counters,
``loss.item()``, hooks, progress and logging checks). Evaluation,
checkpoints and logging are moved beyond the step count, so none falls inside
the timed window; the first step (its interval holds the engine's set-up:
initial validation and checkpoint) is never timed. The engine's own
``train_seconds`` (metrics.jsonl; it leaves out the bookkeeping after the
optimizer step) is shown too.

Throughput ratio = plain time / engine time of the same step (same batch,
same tokens); the headline is the median over steps. Target: >= 0.95.

    python benchmarks/bench_engine.py [--tasks lm mt --steps 30 --warmup 3 --data-root resources/data]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from common import Spread, at_least, check_args, environment, finish, load, markdown, paired, parser, setup

from heads.io import read_jsonl
from heads.resolve import resolve
from heads.tasks import get_task
from heads.tasks.batching import Batcher
from heads.train.loop import Hook, Trainer
from heads.train.schedule import lr_at

TARGET = 0.95


def parse_args(argv: list[str] | None = None):
    p = parser(__doc__, steps=30, warmup=3, out="engine.md")
    p.add_argument(
        "--data-root", default="resources/data", help="prepared data, built on first use (default: %(default)s)"
    )
    p.add_argument(
        "--stock",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the plain loop on the model with stock sdpa attention instead of the gated "
        "function the tasks install (default: %(default)s)",
    )
    args = p.parse_args(argv)
    check_args(p, args)
    return args


class PlainLoop:
    """The minimal loop: the same objective, optimizer, clipping and schedule, nothing else."""

    def __init__(self, trainer: Trainer, model: torch.nn.Module):
        cfg, t = trainer.cfg, trainer.cfg.train
        self.cfg, self.model, self.step = cfg, model, 0
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=t.lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay
        )
        task = trainer.task
        self.batcher = Batcher(trainer.train_examples, cfg.data.batch_size, task.collate, seed=t.seed)
        self.smoothing = t.label_smoothing if cfg.task == "mt" else None

    def loss(self, batch: dict) -> torch.Tensor:
        if self.smoothing is None:
            return self.model(**batch).loss
        logits = self.model(**batch).logits  # what the mt task trains on: label-smoothed cross-entropy
        return F.cross_entropy(
            logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100, label_smoothing=self.smoothing
        )

    def __call__(self) -> None:
        t = self.cfg.train
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(self.step, t.lr, t.warmup, t.steps, t.schedule)
        batch = next(self.batcher)
        loss = self.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if t.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip)
        self.optimizer.step()
        self.step += 1


class Alternate(Hook):
    """After each engine step: record its wall time, then run and time one step of each plain loop."""

    def __init__(self, stock: bool):
        self.stock = stock
        self.loops: dict[str, PlainLoop] = {}
        self.times: dict[str, list[float]] = {"engine": [], "engine train_seconds": []}
        self.resume = 0.0
        self.train_seconds = 0.0

    def on_start(self, trainer: Trainer) -> None:
        self.loops["plain"] = PlainLoop(trainer, copy.deepcopy(trainer.model))
        if self.stock:
            stock = copy.deepcopy(trainer.model)
            stock.set_attn_implementation("sdpa")
            self.loops["plain, stock sdpa"] = PlainLoop(trainer, stock)
        for name in self.loops:
            self.times[name] = []

    def on_step_end(self, trainer: Trainer) -> None:
        end = time.perf_counter()
        self.times["engine"].append(end - self.resume)
        self.times["engine train_seconds"].append(trainer.train_seconds - self.train_seconds)
        self.train_seconds = trainer.train_seconds
        for name, loop in self.loops.items():
            start = time.perf_counter()
            loop()
            self.times[name].append(time.perf_counter() - start)
        self.resume = time.perf_counter()


@torch.no_grad()
def max_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def run_task(task_name: str, args) -> tuple[list[str], dict, list[str]]:
    skip = 1 + args.warmup  # step 1 holds the engine's set-up; then the warm-up steps
    total = skip + args.steps
    beyond = total + 1
    cfg = resolve(
        task_name,
        args.preset,
        None,
        [
            f"data.root={args.data_root}",
            "train.progress=false",
            f"train.steps={total}",
            f"train.log_every={beyond}",
            f"train.eval_every={beyond}",
            f"train.checkpoint_every={beyond}",
            "train.eval_batches=1",
            f"train.threads={args.threads}",
            f"train.seed={args.seed}",
        ],
    )
    hook = Alternate(args.stock)
    with tempfile.TemporaryDirectory(prefix="bench_engine_") as out:
        built = time.perf_counter()
        trainer = Trainer(cfg, get_task(task_name), Path(out), hooks=[hook])
        setup_s = time.perf_counter() - built
        hook.resume = time.perf_counter()
        trainer.train()
        records = read_jsonl(Path(out) / "metrics.jsonl")
    times = {name: values[skip:] for name, values in hook.times.items()}
    drift = max_difference(trainer.model, hook.loops["plain"].model)
    engine = Spread.of(times["engine"])
    ratio = paired(times["plain"], times["engine"])
    own = paired(times["plain"], times["engine train_seconds"])
    totals = sum(times["plain"]) / sum(times["engine"])
    rows = []
    for name in ["engine", "engine train_seconds", *hook.loops]:
        s = Spread.of([x * 1e3 for x in times[name]])
        vs = paired(times["plain"], times[name])
        rows.append(
            f"| {task_name} | {name} | {s.median:.2f} ({s.iqr('.2f')}) | {vs.median:.3f} ({vs.iqr()}) "
            f"| {sum(times['plain']) / sum(times[name]):.3f} |"
        )
    entries = {
        f"engine.{task_name}.throughput_ratio": at_least(
            ratio.median,
            TARGET,
            "engine tokens/s / plain tokens/s",
            iqr=[round(ratio.q1, 4), round(ratio.q3, 4)],
            ratio_of_totals=round(totals, 4),
            ratio_by_train_seconds=round(own.median, 4),
        )
    }
    notes = [
        f"{task_name}: model {type(trainer.model).__name__}, batch {cfg.data.batch_size} x seq_len "
        f"{cfg.data.seq_len}, {args.steps} timed steps after "
        f"{args.warmup} warm-up steps; Trainer set-up {setup_s:.1f} s (not timed); engine step "
        f"{engine.text('.4f')} s; engine vs plain final weights max |diff| = {drift:.2e} "
        f"({'identical work' if drift == 0 else 'float drift only' if drift < 1e-4 else 'DIVERGED'}); "
        f"metrics.jsonl train_seconds at the end {records[-1]['train_seconds']:.3f} s over {trainer.step} steps.",
    ]
    return rows, entries, notes


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup(args)
    load_before = load()
    print(f"# {environment(args)}; load average {load_before:.2f}", flush=True)
    rows = [
        "| task | loop | median ms/step (IQR) | throughput vs plain: paired median (IQR) | ratio of totals |",
        "|---|---|---|---|---|",
    ]
    entries, notes = {}, []
    for task in args.tasks:
        r, e, n = run_task(task, args)
        rows += r
        entries.update(e)
        notes += n
        print(f"# {task} done; load average {load():.2f}", flush=True)
    notes += [
        f"Load average (1 min) before {load_before:.2f}, after {load():.2f}; {environment(args)}.",
        "Throughput vs plain = plain step time / this loop's step time, same batch in the same round "
        f"(1.000 for the plain loop itself). Target: engine >= {TARGET}.",
        "`engine` is the wall time between the engine's steps (all per-step work); `engine train_seconds` is "
        "the engine's own per-step timer, which stops before its bookkeeping, so it reads a little faster.",
        "mt batches are padded to their longest sentence, so step times vary from batch to batch (wide IQRs "
        "of ms/step); the paired ratio compares the same batch and is not affected.",
        "`plain, stock sdpa`: the plain loop on a copy switched back to the stock sdpa attention, to show the "
        "cost of the gated attention function the tasks install (gates unset).",
    ]
    finish(args, markdown("Training engine vs plain PyTorch loop", "", [rows], notes), entries)


if __name__ == "__main__":
    main()
