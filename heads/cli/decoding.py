"""``heads decode-speed``: prefill and cached-decoding speed of a model's pruned variants, interleaved in paired
rounds, beside the bound each speed-up cannot exceed (``heads.analysis.decoding``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from heads.cli.common import add_identity_option, add_run_options, check_out_file, check_split, fail, with_identity
from heads.env import with_environment
from heads.outpath import writes_outputs


def parse_variants(items: list[str]) -> dict[str, str]:
    """``NAME=SPEC`` words (``kv1of3=ratio:0.3333``, ``q1=query:1``) as name -> spec; ``full`` always first."""
    out = {"full": "full"}
    for item in items:
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec:
            raise fail(f"decode-speed: --variants takes NAME=SPEC words (kv1of3=ratio:0.3333), got {item!r}")
        if name in out:
            raise fail(f"decode-speed: variant {name!r} named twice (full is always measured)")
        out[name] = spec
    return out


def cells(args: argparse.Namespace, seq2seq: bool) -> list:
    """The measured shapes: every context x batch up to ``--max-tokens`` tokens (a translation model: one cell
    per batch, its sources as they are), the prefill timed every round up to ``--prefill-max-tokens``."""
    from heads.analysis.decoding import Cell

    if seq2seq:
        return [Cell(0, b, True) for b in args.batches]
    out = [Cell(c, b, c * b <= args.prefill_max_tokens) for b in args.batches for c in args.contexts
           if c * b <= args.max_tokens]
    if not out:
        raise fail(f"decode-speed: no context x batch is within --max-tokens {args.max_tokens}")
    return out


@writes_outputs
def cmd_decode_speed(args: argparse.Namespace) -> int:
    import torch

    from heads.analysis.decoding import context_batch, decoder_of, measure_decoding, variant
    from heads.cli.common import load_for_task
    from heads.io import write_json

    for name in ("rounds", "new_tokens", "threads"):
        if getattr(args, name) < 1:
            raise fail(f"decode-speed: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if any(x < 1 for x in (*args.batches, *args.contexts)):
        raise fail("decode-speed: contexts and batch sizes must be >= 1")
    specs = parse_variants(args.variants)
    check_split(args.split)
    check_out_file(args.out)
    started = time.time()

    def progress(message: str) -> None:
        print(f"heads decode-speed: {message} ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)

    args.source = args.model
    loaded = load_for_task(args, head=False)
    torch.set_num_threads(args.threads)
    model = loaded.model.eval()
    try:
        models = {name: variant(model, spec) for name, spec in specs.items()}
    except (ValueError, KeyError) as exc:
        raise fail(f"decode-speed: {exc}") from None
    del model, loaded.model
    seq2seq = decoder_of(models["full"]).kind == "seq2seq"
    examples = loaded.task.examples(loaded.cfg, loaded.tokenizer, args.split)
    inputs = {}
    for cell in cells(args, seq2seq):
        if seq2seq:  # the first sentences of the split, as they are (real source lengths)
            if len(examples) < cell.batch:
                raise fail(f"decode-speed: a batch of {cell.batch} asked of {len(examples)} {args.split} examples")
            batch = loaded.task.collate(examples[: cell.batch])
            batch = {k: batch[k] for k in ("input_ids", "attention_mask")}
        else:  # spans of the split's text, its windows joined back into the stream they were cut from
            stream = torch.tensor([t for window in examples for t in window], dtype=torch.long)
            try:
                batch = context_batch(stream, cell.context, cell.batch)
            except ValueError as exc:
                raise fail(f"decode-speed: {exc} (the {args.split} split)") from None
        inputs[cell] = loaded.placement.to(batch)
    progress(f"{len(models)} variants, {len(inputs)} cells, {args.rounds} rounds of {args.new_tokens} new tokens")
    result = measure_decoding(models, inputs, args.rounds, args.new_tokens, args.seed, specs=specs,
                              progress=progress)
    result.update({"source": str(args.model), "split": args.split, "threads": args.threads,
                   "device": loaded.placement.device.type,
                   "dtype": str(next(models["full"].parameters()).dtype).replace("torch.", ""),
                   "seconds": time.time() - started})
    if args.out:
        write_json(args.out, with_identity(args, with_environment(result, models["full"])))
    print(f"{'model':<8} {'phase':<7} {'ctx':>5} {'batch':>5} {'tok/s':>9} {'speedup':>8} {'95% CI':>15} "
          f"{'bound':>6} {'of bound':>8} {'cache MiB':>9}")
    for r in result["rows"]:
        bound = "-" if r.get("bound") is None else f"{r['bound']:.3f}"
        share = "-" if r.get("of_bound") is None else f"{r['of_bound']:.3f}"
        print(f"{r['model']:<8} {r['phase']:<7} {r['context']:>5} {r['batch']:>5} {r['tokens_per_s']:>9.1f} "
              f"{r['speedup']:>8.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] {bound:>6} {share:>8} "
              f"{r['cache_bytes'] / 2**20:>9.2f}")
    progress("done")
    return 0


def register(sub) -> None:
    p = sub.add_parser("decode-speed", help="prefill and cached-decoding speed of pruned variants in paired "
                       "interleaved rounds, beside the bound (bytes moved, FLOPs) each speed-up cannot exceed")
    p.add_argument("--model", required=True, help="a shipped model (smollm2, bergamot-en-pt) or a model folder")
    add_run_options(p, threads=False)  # its own --threads (default 1) times at
    p.add_argument("--variants", nargs="*", default=[], metavar="NAME=SPEC",
                   help="pruned variants beside full: ratio:R (R of every site's heads, whole key/value groups "
                   "under grouped-query attention) or query:K (K query heads of every group, groups kept)")
    p.add_argument("--contexts", type=int, nargs="+", default=[128, 512], help="context tokens (decoder-only)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="batch sizes (default 1 16)")
    p.add_argument("--max-tokens", type=int, default=8192, help="cells with context x batch above it are left out")
    p.add_argument("--prefill-max-tokens", type=int, default=512,
                   help="the prefill is timed every round where context x batch is at most this (else once, to "
                   "fill the cache); a translation model's encoder is timed at every batch")
    p.add_argument("--rounds", type=int, default=30, help="paired rounds, variants shuffled per round (default 30)")
    p.add_argument("--new-tokens", type=int, default=16, help="greedy tokens decoded per round (default 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the rounds' orders (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--split", default="test", help="the real text (or source sentences) timed on (default test)")
    p.add_argument("--out", type=Path, help="write the result JSON here")
    add_identity_option(p)
    p.set_defaults(func=cmd_decode_speed)
