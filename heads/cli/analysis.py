"""``heads speed`` (measured inference speed of pruned copies), ``heads roles`` (Voita's head roles),
``heads redundancy`` (the share of redundant heads under each similarity definition), ``heads shift`` (a pruned
model's cost in domain and under a distribution shift) and ``heads trivial`` (what a task's trivial baselines
reach)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from heads.cli.common import (
    add_identity_option,
    add_run_options,
    check_corpora,
    check_out_file,
    check_split,
    domain_batches,
    fail,
    load_for_task,
    parse_params,
    resolve_source,
    run_config,
    scoring_batches,
    with_identity,
)
from heads.env import fix_threads, with_environment
from heads.outpath import writes_outputs


@writes_outputs
def cmd_trivial(args: argparse.Namespace) -> int:
    """A task's trivial baselines on the examples its models are evaluated on (word overlap for pair tasks)."""
    from heads.io import write_json
    from heads.tasks import get_task

    check_out_file(args.out)
    if args.source and "=" in args.source and not Path(args.source).exists():  # an override, not a folder
        args.overrides, args.source = [args.source, *args.overrides], None
    run_dir = Path(args.source) if args.source else None
    if run_dir is not None and not (run_dir / "config.json").is_file():
        raise fail(f"trivial: {run_dir} is not a run folder (no config.json); give --task instead")
    cfg = run_config(args, run_dir)
    # torch computes nothing here, but the record's environment should read as every other job's: a ledger
    # warns when the records it reads come from different environments
    fix_threads(cfg.train.threads, cfg.train.deterministic)
    try:
        baselines = get_task(cfg.task).trivial(cfg)
    except ValueError as exc:
        raise fail(f"trivial: {exc}") from None
    if not baselines:
        raise fail(f"trivial: task {cfg.task!r} has no trivial baseline")
    write_json(args.out, with_identity(args, with_environment(
        {"task": cfg.task, "split": cfg.eval.split, "baselines": baselines})))
    for name, result in baselines.items():
        print(f"{cfg.task} {name}: accuracy {result['accuracy']:.4f} on {result['examples']} examples -> {args.out}")
    return 0


@writes_outputs
def cmd_speed(args: argparse.Namespace) -> int:
    import torch

    from heads.analysis.inputs import forward_inputs
    from heads.analysis.speed import fixed_batches, layout_at_ratio, measure_speed, pruned_copy, speed_rows
    from heads.io import write_json
    from heads.surgery import install

    if args.threads < 1:
        raise fail(f"speed: --threads must be >= 1, got {args.threads}")
    if args.repeats < 1 or args.examples < 1 or args.warmup < 0:
        raise fail("speed: --repeats and --examples must be >= 1, --warmup >= 0")
    if any(b < 1 for b in args.batches):
        raise fail(f"speed: batch sizes must be >= 1, got {args.batches}")
    bad = [r for r in args.ratios if not 0.0 <= r <= 1.0 or (args.scorer and r >= 1.0)]
    if bad:
        raise fail(f"speed: ratios must be in [0, 1) ([0, 1] without --scorer), got {bad}")
    if args.score_batches < 1 or args.floor < 0:
        raise fail("speed: --score-batches must be >= 1 and --floor >= 0")
    check_split(args.split)
    check_out_file(args.out)
    torch.set_num_threads(args.threads)
    started = time.time()
    loaded = load_for_task(args, head=False)
    model = loaded.model.eval()
    scores = None
    if args.scorer:
        from heads.scoring import compute_scores

        try:
            with loaded.placement.autocast():
                scores = compute_scores(
                    args.scorer, model, scoring_batches(loaded, args.split, args.score_batches),
                    **parse_params(args.param),
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise fail(f"speed: {exc}") from None
        except AttributeError as exc:  # e.g. a bare encoder: no logits, so no loss to take gradients of
            raise fail(f"speed: scorer {args.scorer!r} cannot score {type(model).__name__} ({exc})") from None
    if args.attention == "gated":
        install(model)
    else:
        model.set_attn_implementation(args.attention)
    ratios = sorted({0.0, *(float(r) for r in args.ratios)})
    try:
        variants = {r: pruned_copy(model, layout_at_ratio(model, r, scores, args.scope, args.floor)) for r in ratios}
    except ValueError as exc:
        raise fail(f"speed: {exc}") from None
    examples = loaded.task.examples(loaded.cfg, loaded.tokenizer, args.split)
    batches = {}
    for size in sorted(set(args.batches)):
        count = max(1, args.examples // size)
        batches[size] = [
            loaded.placement.to(forward_inputs(model, b, labels=False))
            for b in fixed_batches(examples, size, count, loaded.task.collate)
        ]

    def progress(message: str) -> None:
        print(f"heads speed: {message} ({time.time() - started:.0f} s)", file=sys.stderr)

    with loaded.placement.autocast():
        rows = measure_speed(variants, batches, repeats=args.repeats, warmup=args.warmup, progress=progress)
    rows = speed_rows(rows)
    for r in rows:
        r.update(
            threads=args.threads,
            scorer=args.scorer or "uniform",
            attention=args.attention,
            split=args.split,
            max_len=max(_width(b) for b in batches[r["batch"]]),
            mean_len=sum(_width(b) for b in batches[r["batch"]]) / len(batches[r["batch"]]),
        )
    if args.out:
        write_json(args.out, with_identity(args, with_environment({"rows": rows}, model)))
    print(
        f"{'ratio':>6} {'batch':>5} {'heads':>5} {'params':>11} {'ex/s':>9} {'speedup':>8} {'min':>6} "
        f"{'cpu':>6} {'load':>5}"
    )

    def show(x, spec: str) -> str:
        return format(x, spec) if x is not None else "-"

    for r in rows:
        print(
            f"{r['ratio']:>6.3g} {r['batch']:>5} {r['heads']:>5} {r['params']:>11,} {r['examples_per_s']:>9.1f} "
            f"{show(r['speedup'], '>8.3f')} {show(r['speedup_min'], '>6.3f')} {show(r['cpu_speedup'], '>6.3f')} "
            f"{show(r['load_avg'], '>5.2f')}"
        )
    print(f"heads speed: {time.time() - started:.1f} s in all", file=sys.stderr)
    return 0


def _width(batch: dict) -> int:
    """Padded length of a batch's (encoder) inputs."""
    ids = batch.get("input_ids")
    return int(ids.shape[1]) if ids is not None and ids.dim() > 1 else 0


def training_token_counts(loaded):
    """Token frequencies over the training split's real input tokens (what makes a token rare, for roles)."""
    from heads.analysis.roles import token_counts
    from heads.tasks.batching import eval_batches

    cfg = loaded.cfg
    train = loaded.task.examples(cfg, loaded.tokenizer, "train")
    vocab = max(len(loaded.tokenizer), int(getattr(loaded.model.config, "vocab_size", 0) or 0))
    return token_counts(eval_batches(train, cfg.data.batch_size, loaded.task.collate), vocab)


@writes_outputs
def cmd_roles(args: argparse.Namespace) -> int:
    from heads.analysis.roles import role_table, roles_result
    from heads.io import write_json
    from heads.surgery import load

    if not 0.0 < args.threshold <= 1.0:
        raise fail(f"roles: --threshold is a share of attention in (0, 1], got {args.threshold}")
    check_out_file(args.out)
    loaded = load_for_task(args, head=False)
    reference = (load(resolve_source(args.reference, loaded.cfg.data.root)).to(loaded.placement.device)
                 if args.reference else None)
    batches = scoring_batches(loaded, args.split, args.batches)
    counts = training_token_counts(loaded)
    try:
        with loaded.placement.autocast():
            table = role_table(loaded.model, batches, reference=reference, threshold=args.threshold, counts=counts)
    except ValueError as exc:
        raise fail(f"roles: {exc}") from None
    result = roles_result(
        table,
        source=str(args.source),
        reference=args.reference,
        split=args.split,
        batches=len(batches),
        threshold=args.threshold,
        frequencies={"split": "train", "tokens": int(counts.sum())},
    )
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, loaded.model)))
    print(f"{'site':<12} {'head':>4} {'conf':>6} {'pos':>6}  {'rare':>6} kept")
    for r in table:
        pos = f"{r.positional:.3f}" if r.positional is not None else "-"
        rare = f"{r.rare:.3f}" if r.rare is not None else "-"
        mark = "*" if r.is_positional else " "
        print(f"{r.label:<12} {r.head:>4} {r.confidence:>6.3f} {pos:>6}{mark} {rare:>6} {'yes' if r.kept else 'no'}")
    print(json.dumps(result["summary"], indent=2))
    return 0


@writes_outputs
def cmd_redundancy(args: argparse.Namespace) -> int:
    from heads.analysis.control import attach, control_site, planted_control
    from heads.analysis.redundancy import default_units, redundancy
    from heads.io import write_json

    if not 0.0 < args.threshold <= 1.0:
        raise fail(f"redundancy: --threshold is a cosine in (0, 1], got {args.threshold}")
    if not 0.0 < args.js_threshold <= 1.0:
        raise fail(f"redundancy: --js-threshold is a divergence in bits in (0, 1], got {args.js_threshold}")
    if args.space and args.spaces:
        raise fail("redundancy: give --space or --spaces, not both")
    check_out_file(args.out)
    loaded = load_for_task(args, head=False)
    spaces = list(dict.fromkeys(args.spaces or [args.space or "value"]))
    units = list(dict.fromkeys(args.units)) if args.units else list(default_units(loaded.model))
    common = {"poolings": args.pooling, "spaces": spaces, "threshold": args.threshold, "units": args.units,
              "js": args.js, "js_threshold": args.js_threshold, "split_half": args.split_half}
    control = None
    if args.control is not None:  # a site the control cannot use is refused before any measurement
        try:
            control_site(loaded.model, [*units, *(["head"] if args.js else [])], args.control or None)
        except ValueError as exc:
            raise fail(f"redundancy: {exc}") from None
    with loaded.placement.autocast():
        if args.domains:
            # D7: each domain's own ratio and the stratified one (redundant in every domain), beside the ratio on
            # the domains' batches pooled, which hides a head that only one domain needs
            domains = domain_batches(loaded, args.domains, args.split, args.batches, "redundancy")
            batches = [b for found in domains.values() for b in found]
            rows = [{**r, "view": "stratified"} for r in redundancy(loaded.model, domains, **common)]
            rows += [{**r, "view": "pooled"} for r in redundancy(loaded.model, batches, **common)]
        else:
            batches = scoring_batches(loaded, args.split, args.batches)
            rows = redundancy(loaded.model, batches, **common)
        if args.control is not None:
            # the precondition of a similarity claim, independent of its outcome: a planted duplicate is seen
            try:
                control = planted_control(loaded.model, batches, units=units, spaces=spaces,
                                          poolings=args.pooling, threshold=args.threshold, js=args.js,
                                          js_threshold=args.js_threshold, site=args.control or None)
            except ValueError as exc:
                raise fail(f"redundancy: {exc}") from None
            rows = attach(rows, control)
    result = {"source": str(args.source), "split": args.split, "batches": len(batches),
              **({"domains": list(args.domains)} if args.domains else {}), "rows": rows,
              **({"control": control} if control is not None else {})}
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, loaded.model)))
    for r in rows:
        view = f"{r['view']:<10} " if "view" in r else ""
        if r["space"] == "attention":
            near = "-" if r.get("min_js") is None else f"{r['min_js']:.3f}"
            line = (f"{view}{r['pooling']:<6} {r['space']:<9} redundant {r['redundancy_ratio']:.3f} of {r['unit']}s "
                    f"below JS {r['threshold']:g}; most alike pair JS {near}")
        else:
            near = "-" if r["max_similarity"] is None else f"{r['max_similarity']:.3f}"
            line = (f"{view}{r['pooling']:<6} {r['space']:<8} redundant {r['redundancy_ratio']:.3f} of {r['unit']}s "
                    f"above cosine {r['threshold']:g}; most alike pair {near}")
        if "split_half_r" in r:
            line += "; split-half r " + ("-" if r["split_half_r"] is None else f"{r['split_half_r']:.3f}")
        if "control_found" in r:
            line += f"; planted duplicate {'found' if r['control_found'] else 'MISSED'}"
        print(line)
        for name, d in sorted((r.get("domains") or {}).items()):
            near = "-" if d["max_similarity"] is None else f"{d['max_similarity']:.3f}"
            print(f"  {name:<14} redundant {d['redundancy_ratio']:.3f}; most alike pair {near}")
    if control is not None:
        print(f"control: {control['label']} units {control['planted']} planted in a copy of the model")
    return 0


@writes_outputs
def cmd_shift(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from heads import examples
    from heads.analysis.shift import shift_rows
    from heads.io import write_json
    from heads.surgery import load
    from heads.tasks.text import saved_tokenizer

    split = check_split(args.split) if args.split else None
    check_out_file(args.out)
    loaded = load_for_task(args)
    ref_dir = resolve_source(args.reference, loaded.cfg.data.root)
    theirs = saved_tokenizer(ref_dir) if (ref_dir / "tokenizer.json").is_file() else None
    if theirs is not None and theirs.get_vocab() != loaded.tokenizer.get_vocab():
        raise fail(f"shift: {args.reference} reads text with another tokenizer than {args.source}; "
                   "the two models cannot be scored on the same tokens")
    cfg = loaded.cfg
    check_corpora(cfg, args.datasets, "shift")  # refused by name before anything is evaluated
    reference = load(ref_dir).to(loaded.placement.device)
    split = split or cfg.eval.split

    def evaluate(model, dataset: str | None) -> dict:
        c = cfg if dataset is None else replace(cfg, data=replace(cfg.data, dataset=dataset))
        with loaded.placement.autocast():
            result, _ = examples.split_off(loaded.task.evaluate(model, c, loaded.tokenizer, split))
        return result

    try:
        result = shift_rows(evaluate, loaded.model, reference, args.datasets, loaded.task.metric)
    except (ValueError, KeyError) as exc:
        raise fail(f"shift: {exc}") from None
    result.update({"source": str(args.source), "reference": str(args.reference), "split": split})
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, loaded.model)))
    for r in [result["in_domain"], *result["shifted"].values()]:
        gap = "" if r.get("gap") is None else f"  gap {r['gap']:+.4f}"
        print(f"{r['dataset'] or 'in domain':<10} {r['metric']} {r['model']:.4f} vs {r['reference']:.4f}: "
              f"change {r['change']:+.4f}{gap}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("speed", help="measured inference examples/s of pruned copies at several ratios and batch sizes")
    p.add_argument("source", help="run folder (its config applies), model folder (with --task) or minilm")
    add_run_options(p, required=False, threads=False)  # its own --threads (default 1) times at
    p.add_argument(
        "--ratios",
        type=float,
        nargs="+",
        default=[0.0, 0.25, 0.5],
        help="shares of heads removed (ratio 0 is always measured; default 0 0.25 0.5)",
    )
    p.add_argument("--batches", type=int, nargs="+", default=[1, 32], help="batch sizes (default 1 32)")
    p.add_argument("--repeats", type=int, default=5, help="timed passes per ratio and batch size (median; default 5)")
    p.add_argument(
        "--examples",
        type=int,
        default=32,
        help="examples per timed pass: examples // batch batches, at least one (default 32)",
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed passes per variant first (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--split", default="validation", help="examples timed on, and scored on with --scorer")
    p.add_argument("--scorer", help="prune by this scorer (e.g. importance) instead of uniformly, first heads kept")
    p.add_argument("--param", nargs="*", default=[], metavar="KEY=VALUE", help="scorer parameters")
    p.add_argument("--scope", default="global", choices=["global", "per_site"], help="with --scorer (default global)")
    p.add_argument("--floor", type=int, default=1, help="heads every site keeps with --scorer (default 1)")
    p.add_argument("--score-batches", type=int, default=8, help="batches the scorer sees (default 8)")
    p.add_argument(
        "--attention",
        default="gated",
        choices=["gated", "sdpa", "eager"],
        help="attention implementation timed (default gated: the project's sdpa path, no gates set)",
    )
    p.add_argument("--out", type=Path, help="write the rows as JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_speed)

    p = sub.add_parser("trivial", help="a task's trivial baselines (word overlap for pair classification)")
    p.add_argument("source", nargs="?", help="run folder whose configuration and data apply (or give --task)")
    add_run_options(p, required=False)
    p.add_argument("--out", type=Path, required=True, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_trivial)

    p = sub.add_parser("roles", help="Voita's head roles (confidence, positional) of every head")
    p.add_argument("source", help="run folder (its config applies), model folder (with --task) or minilm")
    add_run_options(p, required=False)
    p.add_argument("--reference", help="the unpruned model SOURCE came from: report all its heads, with kept flags")
    p.add_argument("--split", default="validation")
    p.add_argument("--batches", type=int, default=4, help="number of batches (default 4)")
    p.add_argument("--threshold", type=float, default=0.9, help="positional when this share is reached (default 0.9)")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_roles)

    p = sub.add_parser("redundancy",
                       help="share of heads with a near-duplicate in their site, per similarity definition")
    p.add_argument("source", help="run folder (its config applies), model folder (with --task) or minilm")
    add_run_options(p, required=False)
    p.add_argument("--split", default="validation")
    p.add_argument("--batches", type=int, default=4, help="number of batches (default 4)")
    p.add_argument("--threshold", type=float, default=0.85,
                   help="cosine above which a head is redundant (default 0.85)")
    p.add_argument("--pooling", nargs="+", default=["token", "mean"], choices=["token", "mean"],
                   help="similarity per token, or of sequence-mean outputs (the report's); default both")
    p.add_argument("--space", choices=["value", "residual"],
                   help="head outputs before (value) or after (residual) the output projection (default value)")
    p.add_argument("--spaces", nargs="+", choices=["value", "residual"],
                   help="several spaces in one job, a row each (instead of --space)")
    p.add_argument("--units", nargs="+", choices=["head", "group"],
                   help="compare single query heads and/or key/value groups, a row each (default: groups in a "
                   "grouped-query model, heads otherwise)")
    p.add_argument("--js", action="store_true",
                   help="add a row for attention patterns: query heads with a partner at JS divergence below "
                   "--js-threshold (eager attention: slower)")
    p.add_argument("--js-threshold", type=float, default=0.05,
                   help="JS divergence in bits below which two heads attend alike (default 0.05)")
    p.add_argument("--split-half", action="store_true",
                   help="each row's split-half reliability: the correlation of pair similarities between even "
                   "and odd batches (split_half_r)")
    p.add_argument("--control", nargs="?", const="", metavar="SITE",
                   help="positive control: plant a duplicate unit in a copy of the model at SITE (default the "
                   "middle site) and record whether each row's measurement finds it")
    p.add_argument("--domains", nargs="+", metavar="DATASET",
                   help="measure on these shipped corpora (lm: lm_wisdom lm_prophets lm_letters, genres as domains), "
                   "--batches of each: each domain's ratio, the stratified one (redundant in every domain) and the "
                   "ratio on the domains pooled")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_redundancy)

    p = sub.add_parser("shift", help="a pruned model against its reference in domain and on shifted corpora")
    p.add_argument("source", help="the pruned model's run folder (its config applies), or a model folder with --task")
    add_run_options(p, required=False)
    p.add_argument("--reference", required=True, help="the unpruned model it is compared with (run or model folder)")
    p.add_argument("--datasets", nargs="+", required=True,
                   help="shifted offline corpora with the task's columns (lm: lm_kjv lm_bbe)")
    p.add_argument("--split", help="split scored (default: the run's eval.split)")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_shift)
