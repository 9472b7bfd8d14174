"""``heads mask``: Michel's masked pruning of single query heads and of key/value groups, one replicate."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from heads.cli.common import (
    PhaseClock,
    add_identity_option,
    add_run_options,
    check_out_file,
    fail,
    load_for_task,
    with_identity,
)
from heads.env import with_environment
from heads.outpath import writes_outputs

PERMUTATION_SEED = 0  # one fixed order of the scoring split: replicate r takes its r-th slice (disjoint slices)


def _windows(loaded, split: str) -> list:
    """Every window of ``split``, shards ignored: the masks of every replicate are scored on one common test
    set, and replicates draw disjoint scoring subsets from the whole scoring split."""
    cfg = replace(loaded.cfg, eval=replace(loaded.cfg.eval, shards=1, shard=0))
    return loaded.task.examples(cfg, loaded.tokenizer, split), cfg


def _batches(loaded, examples: list) -> list[dict]:
    from heads.tasks.batching import eval_batches

    size = loaded.cfg.data.batch_size
    return [loaded.placement.to(b) for b in eval_batches(examples, size, loaded.task.collate, len(examples))]


def spread(n: int, total: int) -> list[int]:
    """``n`` indices spread evenly over ``total`` (all of them when ``n`` is 0 or at least ``total``)."""
    if n <= 0 or n >= total:
        return list(range(total))
    return sorted({round(i * (total - 1) / (n - 1)) for i in range(n)}) if n > 1 else [0]


@writes_outputs
def cmd_mask(args: argparse.Namespace) -> int:
    import torch

    from heads.analysis.masking import ORDERS, UNITS, masking
    from heads.examples import path_beside
    from heads.io import write_json

    for name in ("score_windows", "chunk"):
        if getattr(args, name) < 1:
            raise fail(f"mask: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.test_windows < 0:
        raise fail(f"mask: --test-windows must be >= 0 (0: every window), got {args.test_windows}")
    if args.seed < 0:
        raise fail(f"mask: --seed must be >= 0, got {args.seed}")
    if args.floor < 0:
        raise fail(f"mask: --floor must be >= 0, got {args.floor}")
    bad = [u for u in args.units if u not in UNITS] + [o for o in args.orders if o not in ORDERS]
    if bad:
        raise fail(f"mask: unknown {bad}: --units takes {list(UNITS)}, --orders {list(ORDERS)}")
    if any(not 0 < r < 1 for r in args.ratios):
        raise fail(f"mask: --ratios are shares of the query heads in (0, 1), got {args.ratios}")
    if not 0 < args.oracle_step < 1:
        raise fail(f"mask: --oracle-step is a share in (0, 1), got {args.oracle_step}")
    check_out_file(args.out)
    check_out_file(path_beside(Path(args.out)), lock=False)
    loaded = load_for_task(args)
    if not hasattr(loaded.task, "clusters"):
        raise fail(f"mask: task {loaded.cfg.task!r} does not say which text each example comes from (the test's "
                   "bootstrap resamples texts); the lm and mt tasks do")
    scoring_all, _ = _windows(loaded, args.split)
    size = args.score_windows
    order = torch.randperm(len(scoring_all), generator=torch.Generator().manual_seed(PERMUTATION_SEED)).tolist()
    if (args.seed + 1) * size > len(order):
        raise fail(f"mask: replicate {args.seed} needs scoring windows {args.seed * size} to "
                   f"{(args.seed + 1) * size - 1} of the {args.split} split's {len(order)} (disjoint slices of "
                   f"{size}); use fewer --score-windows or replicates")
    chosen = sorted(order[args.seed * size:(args.seed + 1) * size])
    scoring = _batches(loaded, [scoring_all[i] for i in chosen])
    test_all, test_cfg = _windows(loaded, "test")
    picked = spread(args.test_windows, len(test_all))
    test = _batches(loaded, [test_all[i] for i in picked])
    clusters = loaded.task.clusters(test_cfg, loaded.tokenizer, "test")
    clusters = [clusters[i] for i in picked]
    seconds = PhaseClock("mask")
    with loaded.placement.autocast(), seconds("masking"):
        result = masking(loaded.model, scoring, test, units=args.units, orders=args.orders, ratios=args.ratios,
                         seed=args.seed, oracle_step=args.oracle_step, floor=args.floor,
                         chunk=args.chunk)
    columns = result.pop("columns")
    record = {
        **result,
        "scoring": {"split": args.split, "windows": len(chosen), "replicate": args.seed,
                    "of": len(order), "permutation_seed": PERMUTATION_SEED},
        "test": {"split": "test", "windows": len(picked), "of": len(test_all), "texts": len(set(clusters))},
        "seconds": seconds.record,
        "peak_mem_mb": round(loaded.placement.peak_memory_mb(), 1),
    }
    # the per-window losses beside the result, written first (the result marks the job done): a bootstrap over
    # the texts the windows come from, the same resample for every replicate and mask
    write_json(path_beside(Path(args.out)), {
        "units": len(picked), "rows": [[r["unit"], r["order"], r["ratio"]] for r in result["rows"]],
        "columns": {"cluster": clusters, **columns}})
    write_json(args.out, with_identity(args, with_environment(record, loaded.model)))
    base = result["baseline"]["loss"]
    print(f"unmasked: loss {base:.4f} on {len(picked)} test windows")
    for r in result["rows"]:
        print(f"{r['unit']:<5} {r['order']:<10} {r['ratio']:.2f}: {r['heads_closed']:>3} heads closed, loss "
              f"{r['loss']:.4f} ({r['relative']:+.2%}) -> {args.out}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("mask", help="Michel's masked pruning: single query heads vs key/value groups, one replicate")
    p.add_argument("source", help="run folder or model folder (with --task)")
    add_run_options(p, required=False)
    p.add_argument("--units", nargs="+", default=["head", "group"], help="head (Michel's unit) and/or group")
    p.add_argument("--orders", nargs="+", default=["importance"],
                   help="importance (a tied gate per group), random, oracle (greedy by measured cost)")
    p.add_argument("--ratios", type=float, nargs="+", default=[0.3, 0.5], help="shares of the query heads closed")
    p.add_argument("--seed", type=int, default=0,
                   help="the replicate: its slice of the scoring split and its random draws")
    p.add_argument("--split", default="validation", help="split the scores and the oracle's measurements use")
    p.add_argument("--score-windows", type=int, default=16, help="scoring windows per replicate (default 16)")
    p.add_argument("--test-windows", type=int, default=0,
                   help="test windows, spread evenly over the test split (default 0: all of them)")
    p.add_argument("--oracle-step", type=float, default=0.1,
                   help="the oracle re-measures every open unit at every such share of the heads (default 0.1)")
    p.add_argument("--chunk", type=int, default=8, help="masks per batched forward pass")
    p.add_argument("--floor", type=int, default=1,
                   help="units every site keeps open (default 1; 0 lets a layer's whole attention close, as under "
                        "multi-query attention, whose one group is all its heads)")
    p.add_argument("--out", type=Path, required=True)
    add_identity_option(p)
    p.set_defaults(func=cmd_mask)
