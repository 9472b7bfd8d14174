"""``heads clock``: training-step time of a pruned model, its unpruned reference and (``--dropout``) the reference
under attention dropout, measured interleaved in one process (D1, D4: clock ratios not confounded by what ran
beside two separately timed runs)."""

from __future__ import annotations

import argparse
import copy

from heads.cli.common import add_output_arguments, add_pair_arguments, fail, load_pair, with_identity
from heads.env import with_environment
from heads.outpath import writes_outputs


@writes_outputs
def cmd_clock(args: argparse.Namespace) -> int:
    from heads.analysis.clock import clock_rows
    from heads.analysis.inputs import forward_inputs
    from heads.analysis.memory import Trainer
    from heads.analysis.speed import fixed_batches
    from heads.io import write_json
    from heads.surgery import head_layout, num_heads
    from heads.train.dropout import set_dropout

    for name in ("steps", "repeats"):
        if getattr(args, name) < 1:
            raise fail(f"clock: --{name} must be >= 1, got {getattr(args, name)}")
    if args.batch is not None and args.batch < 1:
        raise fail(f"clock: --batch must be >= 1, got {args.batch}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        raise fail(f"clock: --dropout must be in [0, 1), got {args.dropout}")
    loaded, reference, examples = load_pair(args, "clock")
    t = loaded.cfg.train
    size = args.batch or loaded.cfg.data.batch_size
    models = {"reference": reference, "model": loaded.model}
    if args.dropout is not None:
        models["dropout"] = copy.deepcopy(reference)
    for name, model in models.items():
        # every model trains under the run's own dropout (a saved model keeps whatever rate it ended with);
        # the dropout copy differs only in its attention dropout
        set_dropout(model, attention=args.dropout if name == "dropout" else t.attention_dropout, residual=t.dropout)
    batch = loaded.placement.to(forward_inputs(reference, fixed_batches(examples, size, 1, loaded.task.collate)[0]))
    # precision stays the weights' own (fp32 on CPU), as in heads memory
    trainers = {name: Trainer(model, lambda n, b=batch: b) for name, model in models.items()}
    result = clock_rows(trainers, batch, steps=args.steps, repeats=args.repeats)
    for name, model in models.items():
        result["models"][name]["heads"] = num_heads(head_layout(model))
    result.update({"source": str(args.source), "reference": str(args.reference), "split": args.split,
                   "batch": size, "attention_dropout": t.attention_dropout, "dropout": args.dropout,
                   "device": loaded.placement.device.type})
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, loaded.model)))
    for name, r in result["models"].items():
        print(f"{name:<9} {r['heads']:>4} heads  {r['step_s'] * 1e3:8.1f} ms a step ({r['cpu_step_s'] * 1e3:.1f} CPU)  "
              f"against the reference: x{r['step_ratio']:.3f} ({r['cpu_step_ratio']:.3f} CPU)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("clock", help="training-step time of a pruned model, its reference and the reference under "
                       "attention dropout, measured interleaved")
    add_pair_arguments(p)
    p.add_argument("--dropout", type=float,
                   help="also time the reference with this attention dropout (the cost of dropout itself)")
    p.add_argument("--batch", type=int, help="examples per step (default the run's data.batch_size)")
    p.add_argument("--steps", type=int, default=10, help="training steps per model per repeat (default 10)")
    p.add_argument("--repeats", type=int, default=7, help="repeats, the models' order rotated (default 7)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_clock)
