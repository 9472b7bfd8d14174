"""Cost of head-importance scoring (Michel et al.) on one batch relative to one training step on it.

``compute_scores("importance", model, [batch])`` (per-example gradients of the
loss with respect to stacked per-example head gates: one forward and one
backward pass to the gates) against one training step of the engine's kind
(forward, backward, gradient clipping, AdamW) on the same batch, for the tiny
presets' models with gated attention installed (as the tasks build them),
random init and random tokens at the preset's batch size and seq_len. The two
are interleaved; the cost ratio is importance time / step time in the same
round, median over rounds. Target: <= 1.5.

    python benchmarks/bench_importance.py [--tasks lm mt --steps 10 --warmup 2]
"""

from __future__ import annotations

import copy

import torch
from common import (
    FAMILY,
    Spread,
    at_most,
    build_model,
    check_args,
    environment,
    finish,
    interleaved,
    load,
    markdown,
    paired,
    parser,
    profile_note,
    random_batch,
    setup,
)

from heads.presets import preset_for
from heads.scoring import compute_scores
from heads.surgery import install

TARGET = 1.5


def parse_args(argv: list[str] | None = None):
    p = parser(__doc__, steps=10, warmup=2, out="importance.md")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the preset's)")
    p.add_argument(
        "--profile",
        choices=["miss", "always", "never"],
        default="miss",
        help="torch.profiler op breakdown where the target is missed (default: %(default)s)",
    )
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup(args)
    load_before = load()
    print(f"# {environment(args)}; load average {load_before:.2f}", flush=True)
    rows = [
        "| task | batch x seq | variant | median ms (IQR) | cost / training step: paired median (IQR) |",
        "|---|---|---|---|---|",
    ]
    entries, sections, notes = {}, [rows], []
    for task in args.tasks:
        scored, seq = build_model(task, args.preset, args.seed)
        install(scored)
        trained = copy.deepcopy(scored).train()
        optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-4)
        b = args.batch or preset_for(task, args.preset)["data"]["batch_size"]
        batch = random_batch(FAMILY[task], b, seq, scored.config.vocab_size, args.seed)

        def train_step(model=trained, optimizer=optimizer, batch=batch) -> None:
            loss = model(**batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

        fns = {
            "training step": train_step,
            "importance": lambda model=scored, batch=batch: compute_scores("importance", model, [batch]),
            "importance, per_example=False": lambda model=scored, batch=batch: compute_scores(
                "importance", model, [batch], per_example=False
            ),
        }
        times = interleaved(fns, args.steps, args.warmup)
        for name, values in times.items():
            s = Spread.of([t * 1e3 for t in values])
            cost = paired(values, times["training step"])
            rows.append(
                f"| {task} | {b} x {seq} | {name} | {s.median:.1f} ({s.iqr('.1f')}) "
                f"| {cost.median:.3f} ({cost.iqr()}) |"
            )
            if name == "importance":
                entries[f"importance.{task}.cost_vs_train_step"] = at_most(
                    cost.median,
                    TARGET,
                    "importance time / training-step time",
                    iqr=[round(cost.q1, 4), round(cost.q3, 4)],
                    batch=b,
                    seq_len=seq,
                )
                if args.profile == "always" or (args.profile == "miss" and cost.median > TARGET):
                    sections.append(
                        [
                            f"Profile, {task}: importance vs training step:",
                            "",
                            *profile_note("importance", fns["importance"], "step", train_step),
                        ]
                    )
        print(f"# {task} done; load average {load():.2f}", flush=True)
    notes += [
        f"Load average (1 min) before {load_before:.2f}, after {load():.2f}; {environment(args)}.",
        "importance (the scorer's default, per_example=True) gives every example its own gate row, so one "
        "backward pass yields each example's |dL/dgate|; per_example=False (|grad| of the batch loss) is shown "
        "for comparison. The gradient goes to the gates only, so no weight gradients are formed (no "
        "optimizer either), which is why scoring costs less than a step.",
        f"Target: importance / training step <= {TARGET}.",
    ]
    finish(args, markdown("Importance scoring cost vs one training step", "", sections, notes), entries)


if __name__ == "__main__":
    main()
