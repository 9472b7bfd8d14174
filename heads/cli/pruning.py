"""``heads list``, ``heads score``, ``heads prune``, ``heads ablate``, ``heads curve``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from heads.cli.common import (
    PhaseClock,
    add_identity_option,
    add_run_options,
    check_out_file,
    check_split,
    claim_out,
    data_root,
    domain_batches,
    fail,
    load_for_task,
    parse_params,
    resolve_source,
    scoring_batches,
    with_identity,
)
from heads.env import with_environment
from heads.outpath import MODEL, writes_outputs


def cmd_list(args: argparse.Namespace) -> int:
    from heads.scoring import list_scorers
    from heads.strategies import STRATEGIES
    from heads.strategies.registry import load_plugins
    from heads.tasks import TASKS

    load_plugins()
    sections = {
        "tasks": {name: cls.description for name, cls in sorted(TASKS.items())},
        "scorers": dict(sorted(list_scorers().items())),
        "strategies": {name: cls.description() for name, cls in sorted(STRATEGIES.items())},
    }
    for title, rows in sections.items():
        print(f"{title}:")
        width = max(len(n) for n in rows)
        for name, text in rows.items():
            print(f"  {name:<{width}}  {text}")
    return 0


def _scorer_params(args, model=None) -> dict:
    """``--param`` as the scorer's declared parameters, typed and in range (``--param KEY`` named in an error);
    with the ``model``, a ``layers`` parameter within its layers too."""
    from heads.scoring.registry import check_scorer_params

    params = parse_params(args.param)
    layers = None
    if model is not None:
        from heads.surgery import sites

        layers = max((s.layer for s in sites(model)), default=-1) + 1
    check_scorer_params(args.scorer, params, "--param ", layers=layers)
    return params


@writes_outputs
def cmd_score(args: argparse.Namespace) -> int:
    from heads.io import write_json
    from heads.scoring import compute_scores
    from heads.surgery import head_layout

    check_out_file(args.out)
    params = _scorer_params(args)  # before the model is loaded
    loaded = load_for_task(args)
    _scorer_params(args, loaded.model)
    batches = scoring_batches(loaded, args.split, args.batches)
    try:
        with loaded.placement.autocast():
            scores = compute_scores(args.scorer, loaded.model, batches, **params)
    except (KeyError, TypeError) as exc:
        raise fail(f"score: {exc}") from None
    layout = head_layout(loaded.model)
    result = {
        "scorer": args.scorer,
        "params": params,
        "split": args.split,
        "batches": len(batches),
        "scores": {site: {"heads": layout[site], "values": v.tolist()} for site, v in scores.items()},
    }
    if args.out:
        write_json(args.out, with_environment(result, loaded.model))
    print(json.dumps(result, indent=2))
    return 0


def parse_remove(items: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        site, sep, heads = item.partition(":")
        if not sep or not heads:
            raise fail(f"--remove takes SITE:H[,H...], got {item!r}")
        try:
            out.setdefault(site, []).extend(int(h) for h in heads.split(","))
        except ValueError:
            raise fail(f"head indices must be integers in {item!r}") from None
    return out


@writes_outputs
def cmd_prune(args: argparse.Namespace) -> int:
    import shutil

    from heads import examples
    from heads.cli.surgery import markdown, site_table
    from heads.io import replace_dir, temp_dir_beside, write_json
    from heads.surgery import apply_layout, load, prune_heads, sites, uniform_layout
    from heads.surgery.persist import check_pruned_out, write_model

    if args.stratify and not args.domains:
        raise fail("prune: --stratify needs --domains (the domains to stratify by)")
    modes = [args.keep is not None, bool(args.remove), args.strategy is not None]
    if sum(modes) != 1:
        raise fail("prune: give exactly one of --keep K, --remove SITE:H,..., or --strategy NAME")
    if args.keep is not None and args.keep < 0:
        raise fail(f"prune: --keep must be >= 0, got {args.keep}")
    if args.evaluate and args.strategy is None:
        raise fail("prune: --evaluate needs --strategy (the evaluation uses the run's task configuration)")
    if args.seq_len < 1:
        raise fail(f"prune: --seq-len must be >= 1, got {args.seq_len}")
    source = resolve_source(args.source, data_root(args))
    check_pruned_out(Path(args.out), source, args.overwrite)
    out = claim_out(args.out, "prune", MODEL)  # a symlinked --out: the folder it leads to is replaced, not the link
    check_pruned_out(out, source, args.overwrite)  # again, where a link leads and under the lock
    loaded = None
    if args.strategy is not None:
        from heads.config import ConfigError
        from heads.strategies import build_strategy

        try:
            strategy = build_strategy(args.strategy, parse_params(args.param))
        except ConfigError as exc:
            raise fail(f"prune: {exc}") from None
        check_split(args.split)
        if args.domains and args.strategy != "posthoc":
            raise fail(f"prune: --domains scores for the posthoc strategy, not {args.strategy!r}")
        loaded = load_for_task(args)
        model = loaded.model
        n = getattr(strategy.params, "batches", 8)
        if args.domains:
            domains = domain_batches(loaded, args.domains, args.split, n, "prune")
            batches = domains if args.stratify else [b for found in domains.values() for b in found]
        else:
            batches = scoring_batches(loaded, args.split, n)
        try:
            with loaded.placement.autocast():
                remove = strategy.select(model, batches)
        except NotImplementedError as exc:
            raise fail(f"prune: {exc}; post-hoc strategies: posthoc, iterative") from None
    else:
        model = load(resolve_source(args.source, data_root(args)))
        remove = None
    try:
        if args.keep is not None:
            most = max(s.num_heads for s in sites(model))
            if args.keep > most:  # uniform_layout would keep every head without a word
                raise fail(f"prune: --keep {args.keep} exceeds the {most} heads of the largest site; use 0..{most}")
            apply_layout(model, uniform_layout(model, args.keep))
        else:
            prune_heads(model, remove if remove is not None else parse_remove(args.remove))
    except (KeyError, ValueError) as exc:  # a KeyError's str() is its message's repr: say the message
        raise fail(f"prune: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}") from None
    # Everything goes into a folder beside --out and is renamed into place at the end: --out is either the old
    # output or the complete new one, never a mix.
    tmp = temp_dir_beside(out)
    try:
        write_model(model, tmp)
        if loaded is not None:
            loaded.tokenizer.save_pretrained(tmp)
            record = {"strategy": args.strategy, "params": parse_params(args.param), "removed": remove,
                      **({"domains": list(args.domains), "stratified": bool(args.stratify)} if args.domains else {})}
        else:  # --keep or --remove: what was asked, so the folder says it is prune's (and may be replaced by it)
            record = {"keep": args.keep, "remove": parse_remove(args.remove) if args.remove else None}
        write_json(tmp / "pruning.json", with_environment(record, model))
        if loaded is not None:
            if args.evaluate:
                with loaded.placement.autocast():
                    result, columns = examples.split_off(
                        loaded.task.evaluate(model, loaded.cfg, loaded.tokenizer, loaded.cfg.eval.split))
                if columns is not None:
                    write_json(tmp / examples.FILE, examples.record(columns, result))
                write_json(tmp / "eval.json", with_environment(result, model))
                write_json(tmp / "summary.json", with_environment(_pruned_summary(args, loaded, model, result), model))
                print(json.dumps(result, indent=2))
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(markdown(site_table(model, args.seq_len)), end="")
    return 0


def _pruned_summary(args: argparse.Namespace, loaded, model, result: dict) -> dict:
    """A pruned model's record in the shape of a training run's ``summary.json`` (no training fields)."""
    from heads.flops import count_params, flops_per_token
    from heads.surgery import head_layout

    layout = head_layout(model)
    cfg = loaded.cfg
    return with_identity(args, {
        "status": "ok",
        "task": cfg.task,
        "preset": cfg.preset,
        "seed": cfg.train.seed,
        "strategy": args.strategy,
        "strategy_params": parse_params(args.param),
        "metric": loaded.task.metric,
        "value": result[loaded.task.metric],
        "eval": result,
        "final_val_loss": None,
        "heads": sum(len(v) for v in layout.values()),
        "params": count_params(model.config, layout, architecture=type(model).__name__),
        "head_layout": layout,
        "flops_per_token": flops_per_token(model.config, layout, cfg.data.seq_len,
                                           architecture=type(model).__name__).total,
    })


@writes_outputs
def cmd_ablate(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from heads.examples import path_beside
    from heads.io import is_stream, write_json
    from heads.scoring import AblationParams, ablation_table, all_but_one

    if args.chunk < 1:
        raise fail(f"ablate: --chunk must be >= 1, got {args.chunk}")
    if args.decode_chunk is not None and args.decode_chunk < 1:
        raise fail(f"ablate: --decode-chunk must be >= 1, got {args.decode_chunk}")
    if args.samples < 1:
        raise fail(f"ablate: --samples must be >= 1, got {args.samples}")
    check_out_file(args.out)
    stream = is_stream(args.out)  # /dev/stdout, a pipe: no folder to put the examples beside it in
    if not stream:
        check_out_file(path_beside(Path(args.out)), lock=False)
    loaded = load_for_task(args)
    batches = scoring_batches(loaded, args.split, args.batches)
    task, cfg = loaded.task, loaded.cfg
    if args.test == "bleu" and not hasattr(task, "decoding_set"):
        raise fail(f"ablate: --test bleu decodes translations; task {cfg.task!r} does not translate "
                   "(use --test loss or accuracy)")
    # The loss and accuracy changes are measured either way (the ablation figure and all-but-one use them);
    # with --test bleu the significance of each head comes from BLEU's paired bootstrap instead.
    layers = tuple(args.layers) if args.layers else None
    if args.spread_layers is not None:  # a sample stated by its size: the layers follow the model's depth
        from heads.scoring.ablation import spread_layers

        if layers:
            raise fail("ablate: --layers and --spread-layers name the sample twice; give one")
        try:
            layers = spread_layers(loaded.model, args.spread_layers)
        except ValueError as exc:
            raise fail(f"ablate: --spread-layers: {exc}") from None
    if layers:  # refused before anything is evaluated (and no error of the evaluation is taken for bad input)
        from heads.scoring.ablation import of_layers
        from heads.surgery import head_layout

        try:
            of_layers(loaded.model, head_layout(loaded.model), layers)
        except ValueError as exc:
            raise fail(f"ablate: --layers: {exc}") from None
    params = AblationParams(test="loss" if args.test == "bleu" else args.test, chunk=args.chunk, layers=layers)
    seconds = PhaseClock("ablate")
    with loaded.placement.autocast():
        with seconds("ablation"):
            table = ablation_table(loaded.model, batches, params)
        with seconds("all_but_one"):
            others = all_but_one(loaded.model, batches, chunk=args.chunk, layers=layers, held_out=args.held_out)
        bleu = None
        if args.test == "bleu":
            from heads.scoring.bleu_ablation import bleu_ablation

            data, refs = task.decoding_set(cfg, loaded.tokenizer, args.split)
            with seconds("bleu"):
                bleu = bleu_ablation(
                    loaded.model, lambda k: task.translate(loaded.model, cfg, loaded.tokenizer, data, k), refs,
                    samples=args.samples, chunk=args.decode_chunk or args.chunk)
    rows = [asdict(r) for r in table.rows]
    extra = {}
    if bleu is not None:
        by_head = {(b.site, b.position): b for b in bleu.rows}
        for row in rows:
            b = by_head[(row["site"], row["position"])]
            row.update(delta_bleu=b.delta_bleu, bleu=b.bleu, p_value_loss=row["p_value"], p_value=b.p_value,
                       significant=b.p_value < params.alpha)
        extra = {"baseline_bleu": bleu.baseline_bleu, "bleu_sentences": bleu.sentences,
                 "bleu_signature": bleu.signature, "bleu_beams": cfg.eval.beams,
                 "bootstrap": {"method": "paired bootstrap (sacrebleu PairedTest, bs)", "samples": bleu.samples,
                               "seed": bleu.seed}}
    result = with_identity(args, {
        "baseline_loss": table.baseline_loss,
        "baseline_accuracy": table.baseline_accuracy,
        "examples": table.examples,
        "test": args.test,
        "layers": list(layers) if layers else None,
        "power": {"alpha": params.power_alpha, "power": 0.8,
                  "statistic": "per-example mean loss" if params.test == "loss" else "per-example accuracy"},
        **extra,
        "heads": rows,
        "all_but_one": {site: asdict(r) for site, r in others.items()},
        # the best head chosen on the first half of the examples, scored on the second (--held-out)
        **({"all_but_one_held_out": True} if args.held_out else {}),
        "seconds": seconds.record,
        # this process's peak (CUDA's allocator; on CPU the resident set): what a GPU visit may run side by side
        "peak_mem_mb": round(loaded.placement.peak_memory_mb(), 1),
    })
    # the per-example statistic beside the result, written first (the result marks the job done); a BLEU test's
    # significance comes from its bootstrap, not from these, so none is kept for it
    beside, kept = path_beside(Path(args.out)), table.examples_record(params.test, params.noise_tol)
    if stream:
        pass
    elif kept is not None and bleu is None:
        write_json(beside, kept)
    else:
        beside.unlink(missing_ok=True)  # an earlier ablation's examples would not be this one's
    write_json(args.out, with_environment(result, loaded.model))
    significant = sum(r["significant"] for r in rows)
    what = "BLEU" if bleu is not None else f"the {params.test}"
    print(f"{len(rows)} heads ablated one at a time; {significant} change {what} significantly -> {args.out}")
    return 0


@writes_outputs
def cmd_curve(args: argparse.Namespace) -> int:
    from heads.config import ConfigError
    from heads.io import write_json
    from heads.strategies import build_strategy

    try:
        strategy = build_strategy("iterative", parse_params(args.param))
    except ConfigError as exc:
        raise fail(f"curve: {exc}") from None
    check_out_file(args.out)
    loaded = load_for_task(args)
    batches = scoring_batches(loaded, args.split, strategy.params.batches)

    seconds = PhaseClock("curve")

    def numbers(result: dict) -> dict:  # a curve point keeps the metrics, not the per-sentence statistics
        return {k: v for k, v in result.items() if isinstance(v, (int, float))}

    def evaluate(model) -> dict:
        with seconds(f"evaluation {len(seconds.record) + 1}"):
            return numbers(loaded.task.evaluate(model, loaded.cfg, loaded.tokenizer, loaded.cfg.eval.split))

    levels = None
    if strategy.params.together:
        if not hasattr(loaded.task, "evaluate_levels"):
            raise fail(f"curve: together=true evaluates every level under stacked gates; task {loaded.cfg.task!r} "
                       "evaluates one model at a time (leave together out)")

        def levels(model, rows: list[dict]) -> list[dict]:
            with seconds(f"{len(rows)} levels together"):
                results = loaded.task.evaluate_levels(model, loaded.cfg, loaded.tokenizer, loaded.cfg.eval.split,
                                                      rows)
            return [numbers(r) for r in results]

    with loaded.placement.autocast():
        points, per_order = strategy.curves(loaded.model, batches, evaluate, levels)
    record = {"strategy": "iterative", "params": parse_params(args.param), "metric": loaded.task.metric,
              "points": points, "seconds": seconds.record,
              "peak_mem_mb": round(loaded.placement.peak_memory_mb(), 1)}
    if per_order:
        record["per_order"] = per_order
    write_json(args.out, with_identity(args, with_environment(record, loaded.model)))
    for p in points:
        print(f"{p['ratio']:.3f} pruned: {loaded.task.metric} {p[loaded.task.metric]:.4f}")
    return 0


def _scoring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="run folder (its config applies) or model folder (with --task)")
    add_run_options(p, required=False)
    p.add_argument("--split", default="validation", help="data the scores are computed on (default validation)")
    p.add_argument("--batches", type=int, default=8, help="number of batches (default 8)")


def register(sub) -> None:
    p = sub.add_parser("list", help="registered tasks, scorers and strategies, one line each")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("score", help="one score per head per site (higher = keep)")
    _scoring_options(p)
    p.add_argument("--scorer", required=True, help="importance | ablation | similarity | js | confidence | ...")
    p.add_argument("--param", nargs="*", default=[], metavar="KEY=VALUE", help="scorer parameters")
    p.add_argument("--out", type=Path, help="write the scores as JSON here")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("prune", help="physically remove heads and save the smaller checkpoint")
    p.add_argument("source", help="run, checkpoint or shipped model (see inspect)")
    add_run_options(p, required=False)
    p.add_argument("--keep", type=int, help="keep the first K heads of every site")
    p.add_argument("--remove", nargs="+", default=[], metavar="SITE:H,H", help="remove these heads (original ids)")
    p.add_argument("--strategy", help="a post-hoc strategy (posthoc, iterative) choosing the heads")
    p.add_argument("--param", nargs="*", default=[], metavar="KEY=VALUE", help="strategy parameters (ratio=0.3 ...)")
    p.add_argument("--split", default="validation", help="data the strategy scores on")
    p.add_argument("--domains", nargs="+", metavar="DATASET",
                   help="score on these shipped corpora (the task's columns; lm: lm_wisdom lm_prophets lm_letters, "
                   "genres as domains) instead of the run's own data, the same number of batches from each")
    p.add_argument("--stratify", action="store_true",
                   help="with --domains: score each domain apart; a head is as prunable as in the domain where it "
                   "matters most (D7's stratified view), not as on the domains pooled")
    p.add_argument("--evaluate", action="store_true", help="evaluate the pruned model (writes OUT/eval.json)")
    p.add_argument("--out", required=True, type=Path, help="folder to save the pruned checkpoint to")
    p.add_argument(
        "--overwrite", action="store_true", help="replace --out even if it holds files prune did not write"
    )
    p.add_argument("--seq-len", type=int, default=128)
    add_identity_option(p)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("ablate", help="Michel's single-head ablation table and all-but-one per site")
    _scoring_options(p)
    p.add_argument("--test", default="loss", choices=["loss", "accuracy", "bleu"],
                   help="paired test per head: a t-test over examples on the loss or accuracy, or (translation) "
                        "BLEU's paired bootstrap over the decoded sentences, as Michel et al.")
    p.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of --test bleu")
    p.add_argument("--chunk", type=int, default=8, help="ablations per batched forward pass")
    p.add_argument("--decode-chunk", type=int,
                   help="with --test bleu: systems decoded together in one pass (default --chunk)")
    p.add_argument("--layers", type=int, nargs="+", metavar="L",
                   help="ablate the heads of these layers only (default all): a stated sample of a large model")
    p.add_argument("--spread-layers", type=int, metavar="N",
                   help="ablate the heads of N layers spread evenly over the model's depth, first and last "
                        "included: a sample of a stated size that follows any model's depth")
    p.add_argument("--held-out", action="store_true",
                   help="all-but-one: choose each site's best head on the first half of the examples and score it "
                        "on the second (the choice is not scored on the windows that made it)")
    p.add_argument("--out", type=Path, required=True)
    add_identity_option(p)
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("curve", help="iterative pruning curve: metric at every level")
    p.add_argument("source", help="run folder or model folder (with --task)")
    add_run_options(p, required=False)
    p.add_argument("--split", default="validation")
    p.add_argument(
        "--param", nargs="*", default=[], metavar="KEY=VALUE", help="e.g. scorer=importance step=0.1 max_ratio=0.8"
    )
    p.add_argument("--out", type=Path, required=True)
    add_identity_option(p)
    p.set_defaults(func=cmd_curve)
