"""Memory before and after pruning 50 % of the heads mid-training: peak, optimizer state, parameters.

The tiny presets' Llama (lm) and Marian (mt), random init, random token
batches of the preset's seq_len, train with AdamW (forward, backward, clipping,
step); after the first phase ``prune_heads(model, remove, optimizer=...)``
removes the upper half of the heads at every site, slicing the AdamW moments
with the weights, and training goes on with the same optimizer object. Per
phase: ``--warmup`` untimed steps, then ``--steps`` steps whose peak is taken.

* parameter bytes: all parameters (target: exactly ``heads.flops.count_params``
  of the layout, 4 bytes each);
* optimizer-state bytes: AdamW ``exp_avg`` + ``exp_avg_sq`` (target: exactly
  twice the trainable parameter bytes, i.e. nothing stale kept after slicing);
* peak tensor bytes of a training step: all live CPU tensors (parameters,
  gradients, moments, activations, temporaries) at the step's high point, from
  torch.profiler's memory timeline (target: lower after pruning). The process's
  resident size is no measure of this: it holds the interpreter and libraries,
  and freed tensors stay in the C allocator's cache for the next step.

    python benchmarks/bench_memory.py [--tasks lm mt --batch 32 --steps 1 --warmup 2]
"""

from __future__ import annotations

import torch
from common import (
    FAMILY,
    at_most,
    build_model,
    check_args,
    entry,
    environment,
    finish,
    load,
    markdown,
    optimizer_state_bytes,
    param_bytes,
    parser,
    peak_tensor_bytes,
    random_batch,
    setup,
    tensor_bytes,
)

from heads.flops import count_params
from heads.surgery import head_layout, num_heads, prune_heads, sites

MB = 2**20


def parse_args(argv: list[str] | None = None):
    p = parser(__doc__, steps=1, warmup=2, out="memory.md")
    p.add_argument("--batch", type=int, default=32, help="sequences per step (default: %(default)s)")
    p.add_argument("--fraction", type=float, default=0.5, help="heads removed per site (default: %(default)s)")
    args = p.parse_args(argv)
    check_args(p, args)
    if not 0 < args.fraction < 1:
        p.error("--fraction must be in (0, 1)")
    return args


def measure(model, optimizer, step, args) -> dict:
    for _ in range(args.warmup):
        step()
    peak = max(peak_tensor_bytes(step)[0] for _ in range(args.steps))
    trainable = tensor_bytes(p for p in model.parameters() if p.requires_grad)
    layout = head_layout(model)
    return {
        "heads": num_heads(layout),
        "params": param_bytes(model),
        "params_expected": 4 * count_params(model.config, layout, architecture=type(model).__name__),
        "trainable": trainable,
        "optimizer": optimizer_state_bytes(optimizer),
        "optimizer_expected": 2 * trainable,
        "peak": peak,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup(args)
    load_before = load()
    print(f"# {environment(args)}; load average {load_before:.2f}", flush=True)
    rows = [
        "| task | phase | heads | parameter MB | optimizer state MB (exp_avg + exp_avg_sq) | peak tensor MB per step |",
        "|---|---|---|---|---|---|",
    ]
    entries, notes = {}, []
    for task in args.tasks:
        model, seq = build_model(task, args.preset, args.seed)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = random_batch(FAMILY[task], args.batch, seq, model.config.vocab_size, args.seed)
        losses = []

        def step(model=model, optimizer=optimizer, batch=batch, losses=losses) -> None:
            loss = model(**batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))

        before = measure(model, optimizer, step, args)
        heads = sites(model)[0].num_heads
        drop = round(args.fraction * heads)
        prune_heads(model, {s.name: list(range(heads - drop, heads)) for s in sites(model)}, optimizer=optimizer)
        after = measure(model, optimizer, step, args)
        if not all(torch.isfinite(torch.tensor(losses))):
            raise AssertionError(f"{task}: training after pruning gave a non-finite loss")
        for phase, m in (("before pruning", before), (f"after pruning {args.fraction:.0%}", after)):
            rows.append(
                f"| {task} | {phase} | {m['heads']} | {m['params'] / MB:.3f} | {m['optimizer'] / MB:.3f} "
                f"| {m['peak'] / MB:.1f} |"
            )
        rows.append(
            f"| {task} | after / before | {after['heads'] / before['heads']:.2f} "
            f"| {after['params'] / before['params']:.3f} | {after['optimizer'] / before['optimizer']:.3f} "
            f"| {after['peak'] / before['peak']:.3f} |"
        )
        key = f"memory.{task}"
        for phase, m in (("before", before), ("after", after)):
            entries[f"{key}.param_bytes.{phase}"] = entry(
                m["params"], m["params_expected"], m["params"] == m["params_expected"], "bytes"
            )
            entries[f"{key}.optimizer_state_bytes.{phase}"] = entry(
                m["optimizer"], m["optimizer_expected"], m["optimizer"] == m["optimizer_expected"], "bytes"
            )
        # The peak before pruning is the target the peak after it must not exceed.
        entries[f"{key}.peak_step_bytes"] = at_most(
            after["peak"], before["peak"], "bytes (after pruning; target: before)"
        )
        notes.append(
            f"{task}: {type(model).__name__}, batch {args.batch} x seq_len {seq}; training loss "
            f"{losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} steps, pruned after step "
            f"{len(losses) // 2} with the optimizer's moments sliced alongside."
        )
        print(f"# {task} done; load average {load():.2f}", flush=True)
    notes += [
        f"Load average (1 min) before {load_before:.2f}, after {load():.2f}; {environment(args)}.",
        "Targets (summary.json): parameter bytes = 4 x count_params(layout) and optimizer-state bytes = "
        "2 x trainable parameter bytes, exactly, before and after pruning; peak step bytes after pruning <= "
        "before (summary key `peak_step_bytes`: measured = after, target = before).",
        "Peak tensor bytes come from torch.profiler's memory timeline of one step (everything the step touches "
        "or creates); activations dominate at this batch, and only the attention share of them shrinks.",
        "The engine's metrics.jsonl `peak_mem_mb` is a lifetime maximum (ru_maxrss on CPU, "
        "max_memory_allocated without a reset on GPU), so it cannot show this drop.",
    ]
    finish(args, markdown("Memory before and after pruning mid-training", "", [rows], notes), entries)


if __name__ == "__main__":
    main()
