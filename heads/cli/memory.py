"""``heads memory``: a pruned model's training-step memory against its unpruned reference, and the largest batch
each trains within the reference's memory at a given batch (D8)."""

from __future__ import annotations

import argparse
from pathlib import Path

from heads.cli.common import (
    add_identity_option,
    add_run_options,
    check_out_file,
    check_split,
    fail,
    load_for_task,
    resolve_source,
    with_identity,
)
from heads.env import with_environment


def cmd_memory(args: argparse.Namespace) -> int:
    from heads.analysis.inputs import forward_inputs
    from heads.analysis.memory import Trainer, memory_rows
    from heads.analysis.speed import fixed_batches
    from heads.io import write_json
    from heads.surgery import head_layout, load, num_heads

    if args.cap_batch < 1:
        raise fail(f"memory: --cap-batch must be >= 1, got {args.cap_batch}")
    limit = args.limit or 4 * args.cap_batch
    if limit < args.cap_batch:
        raise fail(f"memory: --limit {limit} is below --cap-batch {args.cap_batch}")
    check_split(args.split)
    check_out_file(args.out)
    loaded = load_for_task(args)
    if loaded.placement.device.type not in ("cpu", "cuda"):
        raise fail(f"memory: step peaks are measured on CPU and CUDA, not {loaded.placement.device.type}")
    reference = load(resolve_source(args.reference)).to(loaded.placement.device)
    if type(reference) is not type(loaded.model):
        raise fail(f"memory: {args.reference} is a {type(reference).__name__}, {args.source} a "
                   f"{type(loaded.model).__name__}: not one model before and after pruning")
    examples = loaded.task.examples(loaded.cfg, loaded.tokenizer, args.split)
    if not examples:
        raise fail(f"memory: the {args.split} split of {loaded.cfg.task} has no examples")

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
    p.add_argument("source", help="the pruned model's run folder (its config applies), or a model folder with --task")
    add_run_options(p, required=False)
    p.add_argument("--reference", required=True, help="the unpruned model it came from (run or model folder)")
    p.add_argument("--cap-batch", type=int, default=32,
                   help="the memory cap is the reference's step peak at this batch size (default 32)")
    p.add_argument("--limit", type=int, help="largest batch size tried (default 4 x --cap-batch)")
    p.add_argument("--split", default="train", help="examples the steps train on (default train)")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_memory)
