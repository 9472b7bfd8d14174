"""Training-step time of a small Llama: full, physically pruned, and gate-masked.

Physical pruning (``prune_heads``) shrinks the q/k/v/o matrices, so a step
should get faster by about the FLOP ratio; gating heads to zero
(``install`` + ``set_gates``) computes every head and then multiplies some by
zero, so it saves nothing. Steps of the variants are interleaved, in a
rotating order, so machine noise hits them alike; warm-up rounds are dropped
and the median step time is reported.

    python benchmarks/bench_pruned_step.py [--steps 20 --warmup 3 --out results/bench.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from heads import models
from heads.flops import count_params, flops_per_token
from heads.surgery import full_layout, head_layout, install, num_heads, prune_heads, set_gates, sites


@dataclass
class Variant:
    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    heads: str
    layout: dict[str, list[int]]  # the heads the step actually computes
    times: list[float]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--layers", type=int, default=4, help="decoder layers")
    p.add_argument("--d", type=int, default=256, help="hidden size")
    p.add_argument("--heads", type=int, default=8, help="attention heads per layer")
    p.add_argument("--keep", type=int, default=None, help="heads kept per layer; None keeps half")
    p.add_argument("--vocab", type=int, default=256, help="vocabulary size")
    p.add_argument("--batch", type=int, default=32, help="sequences per step")
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    p.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per variant first")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=0, help="model init and batch seed")
    p.add_argument("--out", type=Path, default=None, help="also write the Markdown table here")
    return p.parse_args(argv)


def build(args: argparse.Namespace, name: str, keep: int) -> Variant:
    model = models.llama(vocab=args.vocab, d=args.d, layers=args.layers, heads=args.heads,
                         max_len=args.seq, seed=args.seed)
    dropped = {s.name: list(range(keep, s.num_heads)) for s in sites(model)}
    heads = str(num_heads(full_layout(model)))
    if name == "pruned":
        prune_heads(model, dropped)
        heads = str(num_heads(head_layout(model)))
    elif name == "masked":
        install(model)
        set_gates(model, {n: (torch.arange(args.heads) < keep).float() for n in dropped})
        heads = f"{keep * args.layers} of {heads} gated"
    model.train()
    # Optimizer made after pruning, so every variant starts from fresh AdamW state.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Variant(name, model, optimizer, heads, head_layout(model), [])


def step(v: Variant, batch: torch.Tensor) -> float:
    start = time.perf_counter()
    loss = v.model(input_ids=batch, labels=batch).loss
    loss.backward()
    v.optimizer.step()
    v.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def table(variants: list[Variant], args: argparse.Namespace) -> str:
    base = variants[0]
    arch = type(base.model).__name__
    base_flops = flops_per_token(base.model.config, base.layout, args.seq, architecture=arch).total
    base_time = statistics.median(base.times)
    rows = [
        "| variant | heads | params | FLOPs/token | theoretical speed-up | median step s | measured speed-up "
        "| realised/theoretical |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        flops = flops_per_token(v.model.config, v.layout, args.seq, architecture=arch).total
        params = count_params(v.model.config, v.layout, architecture=arch)
        assert params == sum(p.numel() for p in v.model.parameters()), "count_params disagrees with the model"
        theory, median = base_flops / flops, statistics.median(v.times)
        measured = base_time / median
        rows.append(f"| {v.name} | {v.heads} | {params:,} | {flops / 1e6:.1f} M | {theory:.3f} | {median:.4f} "
                    f"| {measured:.3f} | {measured / theory:.3f} |")
    return "\n".join(rows) + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    keep = args.heads // 2 if args.keep is None else args.keep
    if not 0 <= keep < args.heads:
        raise SystemExit(f"--keep must be in [0, {args.heads}), got {keep}")
    torch.set_num_threads(args.threads)
    variants = [build(args, name, keep) for name in ("full", "pruned", "masked")]
    batch = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(args.seed))
    print(f"# torch {torch.__version__}, {args.threads} threads, {platform.processor() or platform.machine()}; "
          f"Llama {args.layers} x d{args.d} x {args.heads} heads, keep {keep}; batch {args.batch} x {args.seq}, fp32; "
          f"{args.warmup} warm-up + {args.steps} timed steps per variant; load average {os.getloadavg()[0]:.2f}",
          flush=True)
    for r in range(args.warmup + args.steps):
        # Rotate the order each round so no variant always runs right after another.
        for v in variants[r % len(variants):] + variants[: r % len(variants)]:
            seconds = step(v, batch)
            if r >= args.warmup:
                v.times.append(seconds)
    text = table(variants, args)
    print(text, end="")
    # Other processes on the machine show as spread: compare min and quartiles before trusting medians.
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    for v in variants:
        q = statistics.quantiles(v.times, n=4) if len(v.times) > 1 else v.times * 3
        print(f"# {v.name}: step s min {min(v.times):.4f}, quartiles {q[0]:.4f} / {q[2]:.4f}, max {max(v.times):.4f}")
    if args.out is not None:
        write_atomic(args.out, text)
        print(f"# table written to {args.out}")


if __name__ == "__main__":
    main()
