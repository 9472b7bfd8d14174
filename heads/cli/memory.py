"""``heads memory``: a pruned model's training-step memory against its unpruned reference, and the largest batch
each trains within the reference's memory at a given batch (D8)."""

from __future__ import annotations

import argparse

from heads.cli.common import add_output_arguments, add_pair_arguments, fail, load_pair, with_identity
from heads.env import with_environment
from heads.outpath import writes_outputs


@writes_outputs
def cmd_memory(args: argparse.Namespace) -> int:
    from heads.analysis.inputs import forward_inputs
    from heads.analysis.memory import Trainer, memory_rows
    from heads.analysis.speed import fixed_batches
    from heads.io import write_json
    from heads.surgery import head_layout, num_heads

    if args.cap_batch < 1:
        raise fail(f"memory: --cap-batch must be >= 1, got {args.cap_batch}")
    limit = 4 * args.cap_batch if args.limit is None else args.limit  # 0 is a value, not "the default"
    if limit < args.cap_batch:
        raise fail(f"memory: --limit {limit} is below --cap-batch {args.cap_batch}")
    loaded, reference, examples = load_pair(args, "memory")
    if loaded.placement.device.type not in ("cpu", "cuda"):
        raise fail(f"memory: step peaks are measured on CPU and CUDA, not {loaded.placement.device.type}")

    def batch_of(model):
        # every model and size reads the same first examples of the split (cycled when there are too few)
        return lambda size: loaded.placement.to(
            forward_inputs(model, fixed_batches(examples, size, 1, loaded.task.collate)[0]))

    # precision stays the weights' own (fp32 on CPU): autocast would hold extra casted copies that vary by kernel
    trainers = {"reference": Trainer(reference, batch_of(reference)),
                "model": Trainer(loaded.model, batch_of(loaded.model))}
    try:
        result = memory_rows(trainers, args.cap_batch, limit)
    except ValueError as exc:
        raise fail(f"memory: {exc}") from None
    for name, model in (("reference", reference), ("model", loaded.model)):
        result["models"][name]["heads"] = num_heads(head_layout(model))
    result.update({"source": str(args.source), "reference": str(args.reference), "split": args.split,
                   "device": loaded.placement.device.type})
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, loaded.model)))
    print(f"cap: the reference's step peak at batch {args.cap_batch}: {result['cap_bytes'] / 2**20:.1f} MiB")
    for name, r in result["models"].items():
        print(f"{name:<9} {r['heads']:>4} heads  params {r['param_bytes'] / 2**20:.2f} MiB  moments "
              f"{r['optimizer_bytes'] / 2**20:.2f} MiB  peak at {args.cap_batch}: {r['peak_bytes'] / 2**20:.1f} MiB  "
              f"largest batch within the cap: {r['largest_batch']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("memory", help="training-step memory of a pruned model and its reference; the largest batch "
                       "each trains within the reference's step peak at --cap-batch")
    add_pair_arguments(p)
    p.add_argument("--cap-batch", type=int, default=32,
                   help="the memory cap is the reference's step peak at this batch size (default 32)")
    p.add_argument("--limit", type=int, help="largest batch size tried (default 4 x --cap-batch)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_memory)
