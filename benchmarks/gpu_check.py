"""A prepared GPU check: the measurements a CPU cannot make, in minutes (``bash benchmarks/gpu_check.sh``).

Sections, each merged into ``--out`` (JSON, with a Markdown table beside it) as soon as it finishes, with
its ``status`` (ok, or failed with the error) and seconds:

* ``environment``: ``heads.env.environment()``, ``nvidia-smi -L``, torch/CUDA versions, the device's name;
* ``masked_vs_pruned``: a Llama with some heads of every site gated to zero vs the same model with those
  heads physically removed (``prune_heads``): max |logit difference| at fp32 and under bf16 autocast,
  against a stated tolerance;
* ``pruned_speedup``: realised vs theoretical (``heads.flops``) speed-up of removing 25/50/75 % of the heads
  of every site, training step and inference, at bf16 autocast and at fp32 (TF32 off);
* ``ablation``: batched single-head ablation vs one gated forward per head (``bench_ablation.py``'s code on
  the device), against its >= 5x target;
* ``throughput``: training tokens/s at fp32 (TF32 off; and on, on CUDA) and under bf16 autocast.

Timing follows ``common.py``: variants interleaved round by round in a rotating order, warm-up rounds
dropped, medians of paired per-round ratios, and every timed call ends with ``Placement.synchronize`` so
the clock measures the GPU's work rather than the kernel launches.

``--scale paper``: the paper preset's LM width (d=1024, 16 heads, vocab 32000, batch 32 x 512) with its
16 layers cut to 4 so the check fits its time budget; ablation on the tiny preset's models, where the 5x
target of ``bench_ablation.py`` was set. ``--scale small``: d=64, 4 heads, 2 layers, batch 4 x 32 and the
smoke preset, one or two rounds: the same code in seconds on a CPU (what the tests run).

    python benchmarks/gpu_check.py --device cuda --scale paper --out results/bench/gpu.json
    python benchmarks/gpu_check.py --device cpu --scale small --out tmp/gpu.json
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from heads.io import write_text  # light on purpose: --mark runs without importing torch

SECTIONS = ("environment", "masked_vs_pruned", "pruned_speedup", "ablation", "throughput")
PARTS = (*SECTIONS, "smoke_dag")  # smoke_dag: recorded by gpu_check.sh through --mark
# Tolerance on max |masked - pruned logit|, relative to max |logit|. fp32 differs only in summation order
# (~1e-6 seen); bf16 keeps 8 mantissa bits (~2-3 significant digits, eps 2^-8 = 0.004) and the two models
# round different matmul shapes, so a few bf16 steps through the layers is the honest bound.
RTOL = {"fp32": 1e-4, "bf16": 3e-2}
SPEEDUP_TARGET = 0.9  # realised / theoretical, as bench_pruned_step.py
ABLATION_TARGET = 5.0  # x, as bench_ablation.py
ABLATION_AGREE = 1e-4  # max |per-example loss difference| batched vs loop, as bench_ablation.py


@dataclass(frozen=True)
class Scale:
    """Model and batch sizes of one scale, and how many rounds to time."""

    d: int
    heads: int
    layers: int
    vocab: int
    batch: int
    seq: int
    steps: int  # timed rounds
    warmup: int  # untimed rounds first
    check_batch: int  # batch of the masked == pruned comparison
    ablation_preset: str
    chunks: tuple[int, ...]
    ablation_steps: int
    note: str


def scale_of(name: str) -> Scale:
    if name == "small":
        return Scale(
            d=64, heads=4, layers=2, vocab=256, batch=4, seq=32, steps=2, warmup=1, check_batch=2,
            ablation_preset="smoke", chunks=(2, 4), ablation_steps=1, note="tiny widths for a CPU smoke test",
        )  # fmt: skip
    from heads.presets import preset_for

    lm = preset_for("lm", "paper")
    model, data = lm["model"], lm["data"]
    return Scale(
        d=model["d"], heads=model["heads"], layers=4, vocab=model["vocab"], batch=data["batch_size"],
        seq=data["seq_len"], steps=10, warmup=3, check_batch=4, ablation_preset="tiny", chunks=(4, 8, 16, 32),
        ablation_steps=5, note=f"paper preset lm width; its {model['layers']} layers cut to 4 to fit the time budget",
    )  # fmt: skip


# -- the record ---------------------------------------------------------------------------------------


def read(out: Path) -> dict[str, Any]:
    return json.loads(out.read_text()) if out.exists() else {}


def record(out: Path, name: str, value: dict[str, Any], **top: Any) -> None:
    """Merge one section (over what it had) and top-level keys into ``out``; re-render the Markdown beside it.

    One writer at a time (the shell runs parts one after another), so no lock; the write is atomic.
    """
    data = read(out)
    data.update(top, updated=datetime.now(UTC).isoformat(timespec="seconds"))
    sections = data.setdefault("sections", {})
    sections[name] = {**sections.get(name, {}), **value}
    write_text(out, json.dumps(data, indent=2) + "\n")
    write_text(out.with_suffix(".md"), markdown(data))


def mark(args: argparse.Namespace) -> None:
    """The shell's view of one part: exit status, wall time and cap; a part killed before it recorded
    anything still gets a record (timed out or failed), and a measurement that recorded stays as it is."""
    section = read(args.out).get("sections", {}).get(args.mark, {})
    status = section.get("status")
    if args.rc in (124, 137):  # timeout's exit status; 137 = killed after --kill-after
        status = "timed out"
    elif args.rc != 0:
        status = "failed"
    elif status is None:
        status = "ok" if args.mark == "smoke_dag" else "failed"  # a measurement that exited 0 must have recorded
    value: dict[str, Any] = {"status": status, "rc": args.rc, "wall_s": args.seconds, "cap_s": args.cap}
    if args.log and args.log.exists() and (status != "ok" or args.mark == "smoke_dag"):
        value["log_tail"] = args.log.read_text(errors="replace")[-2000:]
    if args.runs:
        value["runs_by_device"] = runs_by_device(args.runs)
    record(args.out, args.mark, value)


def runs_by_device(root: Path) -> dict[str, int]:
    """How many finished runs under ``root`` name each device in their summary's environment."""
    counts: dict[str, int] = {}
    for path in root.rglob("summary.json"):
        try:
            device = json.loads(path.read_text()).get("environment", {}).get("device", "?")
        except (OSError, ValueError, AttributeError):
            continue
        counts[device] = counts.get(device, 0) + 1
    return counts


# -- helpers ------------------------------------------------------------------------------------------


def synced(fn: Callable[[], object], placement) -> Callable[[], None]:
    """``fn`` then a device synchronize: CUDA returns before its kernels finish, the clock must not."""

    def call() -> None:
        fn()
        placement.synchronize()

    return call


def cycle(batches: list[dict]) -> Iterator[dict]:
    while True:
        yield from batches


def base_lm(scale: Scale, seed: int):
    """The scale's Llama on the CPU (random init, seeded); callers deep-copy it to the device, so every
    variant starts from the same weights and the model is initialised once."""
    from heads import models

    return models.llama(
        vocab=scale.vocab, d=scale.d, layers=scale.layers, heads=scale.heads, max_len=scale.seq, seed=seed
    )


def batches(scale: Scale, batch: int, n: int, seed: int, placement) -> list[dict]:
    from common import random_batch

    return [placement.to(random_batch("llama", batch, scale.seq, scale.vocab, seed + i)) for i in range(n)]


def train_step(model, optimizer, placement, batch: dict) -> None:
    """Forward under autocast, backward, clipping and AdamW: what the trainer does per step."""
    import torch

    with placement.autocast():
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def infer(model, placement, batch: dict) -> None:
    import torch

    with torch.no_grad(), placement.autocast():
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)


def spread(values: list[float], digits: int = 4) -> dict[str, Any]:
    from common import Spread

    s = Spread.of(values)
    return {"median": round(s.median, digits), "iqr": [round(s.q1, digits), round(s.q3, digits)], "n": s.n}


# -- sections -----------------------------------------------------------------------------------------


def environment(scale: Scale, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from heads.env import environment as heads_environment

    def command(*argv: str) -> str | None:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    cuda = torch.cuda.is_available()
    placement = args.placement
    return {
        "heads": heads_environment(),
        "nvidia_smi_l": command("nvidia-smi", "-L"),
        "nvidia_smi": command("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": cuda,
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
        "device_name": torch.cuda.get_device_name(placement.device)
        if placement and placement.device.type == "cuda"
        else None,
        "device_error": args.device_error,
        "bf16_supported": torch.cuda.is_bf16_supported() if cuda else None,
    }


def masked_vs_pruned(scale: Scale, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from heads.placement import Placement
    from heads.surgery import install, prune_heads, set_gates, sites

    device = args.placement.device
    base = base_lm(scale, args.seed)
    full = copy.deepcopy(base).to(device).eval()
    masked, pruned = install(copy.deepcopy(base)).to(device).eval(), copy.deepcopy(base).to(device).eval()
    # A different half of the heads at every site, so a site-indexing mistake cannot cancel out.
    g = torch.Generator().manual_seed(args.seed)
    removed = {
        s.name: sorted(torch.randperm(s.num_heads, generator=g)[: s.num_heads // 2].tolist()) for s in sites(base)
    }
    set_gates(
        masked,
        {
            name: torch.tensor([0.0 if h in drop else 1.0 for h in range(scale.heads)], device=device)
            for name, drop in removed.items()
        },
    )
    prune_heads(pruned, removed)
    batch = batches(scale, scale.check_batch, 1, args.seed, args.placement)[0]
    logits: dict[tuple[str, str], torch.Tensor] = {}
    for precision in RTOL:
        placement = Placement(device, precision)
        for name, model in (("full", full), ("masked", masked), ("pruned", pruned)):
            with torch.no_grad(), placement.autocast():
                out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
            logits[name, precision] = out.logits.float()
    results = {}
    for precision, rtol in RTOL.items():
        reference = float(logits["masked", precision].abs().max())
        diff = float((logits["masked", precision] - logits["pruned", precision]).abs().max())
        # The gates must matter: were masked == full too, equal logits would prove nothing.
        effect = float((logits["masked", precision] - logits["full", precision]).abs().max())
        results[precision] = {
            "max_abs_diff": diff,
            "max_abs_logit": reference,
            "rtol": rtol,
            "tolerance": rtol * reference,
            "masked_vs_full_max_abs_diff": effect,
            "pass": diff <= rtol * reference < effect,
        }
    # Context for the bf16 tolerance: how far bf16 moves the same (masked) model's logits from fp32.
    results["bf16"]["bf16_vs_fp32_same_model"] = float(
        (logits["masked", "bf16"] - logits["masked", "fp32"]).abs().max()
    )
    return {
        "heads_removed_per_site": scale.heads // 2,
        "heads_per_site": scale.heads,
        "batch": [scale.check_batch, scale.seq],
        "results": results,
        "pass": all(r["pass"] for r in results.values()),
        "tolerance_rule": "max |masked - pruned| <= rtol x max |masked logit| < max |masked - full|; "
        "rtol fp32 1e-4 (summation order only), bf16 3e-2 (8 mantissa bits, ~2-3 significant digits, "
        "rounded differently by the two models)",
    }


def pruned_speedup(scale: Scale, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from common import interleaved, paired

    from heads.flops import flops_per_token
    from heads.placement import Placement
    from heads.surgery import head_layout, prune_heads, sites

    device = args.placement.device
    base = base_lm(scale, args.seed)
    models = {"full": copy.deepcopy(base).to(device)}
    for fraction in (0.25, 0.5, 0.75):
        model = copy.deepcopy(base).to(device)
        drop = round(fraction * scale.heads)  # the last heads of every site, as bench_pruned_step.py
        prune_heads(model, {s.name: list(range(scale.heads - drop, scale.heads)) for s in sites(model)})
        models[f"pruned {fraction:.0%}"] = model
    flops = {
        name: flops_per_token(m.config, head_layout(m), scale.seq, architecture=type(m).__name__).total
        for name, m in models.items()
    }
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, m in models.items()}
    data = batches(scale, scale.batch, 1, args.seed, args.placement)[0]
    rows = []
    for precision in ("bf16", "fp32"):
        placement = Placement(device, precision)
        for mode in ("train", "infer"):
            fns = {}
            for name, model in models.items():
                model.train(mode == "train")
                step = (
                    (lambda m=model, o=optimizers[name], p=placement: train_step(m, o, p, data))
                    if mode == "train"
                    else (lambda m=model, p=placement: infer(m, p, data))
                )
                fns[name] = synced(step, placement)
            placement.synchronize()
            times = interleaved(fns, scale.steps, scale.warmup)
            for name in models:
                if name == "full":
                    continue
                theory = flops["full"] / flops[name]
                speed = paired(times["full"], times[name])
                rows.append(
                    {
                        "precision": precision,
                        "mode": mode,
                        "variant": name,
                        "heads_per_site": len(next(iter(head_layout(models[name]).values()))),
                        "theoretical": round(theory, 4),
                        "ms": spread([t * 1e3 for t in times[name]], 2),
                        "full_ms": spread([t * 1e3 for t in times["full"]], 2),
                        "realised": round(speed.median, 4),
                        "realised_iqr": [round(speed.q1, 4), round(speed.q3, 4)],
                        "realised_over_theoretical": round(speed.median / theory, 4),
                        "met": bool(speed.median / theory >= SPEEDUP_TARGET),
                    }
                )
    return {
        "model": model_note(scale),
        "rounds": {"timed": scale.steps, "warmup": scale.warmup},
        "target": f"realised / theoretical >= {SPEEDUP_TARGET} (as bench_pruned_step.py)",
        "tf32": False,
        "rows": rows,
    }


def ablation(scale: Scale, args: argparse.Namespace) -> dict[str, Any]:
    import bench_ablation
    from common import FAMILY, interleaved, paired, random_batch

    from heads.surgery import head_layout

    placement = args.placement
    rows, results = [], []
    for task in ("lm", "mt"):
        ns = argparse.Namespace(preset=scale.ablation_preset, seed=args.seed)
        model, seq, preset_batch = bench_ablation.build(task, ns)
        model = model.to(placement.device)
        heads = sum(len(v) for v in head_layout(model).values())
        for b in sorted({1, preset_batch}):  # as bench_ablation.py: batch 1 and the preset's batch
            batch = placement.to(random_batch(FAMILY[task], b, seq, model.config.vocab_size, args.seed))
            out: dict[str, Any] = {}

            def keep(name: str, fn: Callable[[], Any], out: dict[str, Any] = out) -> Callable[[], None]:
                return synced(lambda: out.__setitem__(name, fn()), placement)

            fns = {"per-head loop": keep("per-head loop", lambda m=model, x=batch: bench_ablation.per_head_loop(m, x))}
            for chunk in scale.chunks:
                fns[f"stacked, chunk {chunk}"] = keep(
                    f"stacked, chunk {chunk}", lambda m=model, x=batch, c=chunk: bench_ablation.batched(m, x, c)
                )
            placement.synchronize()
            times = interleaved(fns, scale.ablation_steps, 1)  # one warm-up round: CUDA's first calls load kernels
            diff = max(bench_ablation.max_loss_difference(out["per-head loop"], out[name]) for name in fns)
            speeds = {name: paired(times["per-head loop"], times[name]) for name in fns if name != "per-head loop"}
            best = max(speeds, key=lambda n: speeds[n].median)
            for name in fns:
                rows.append(
                    {"task": task, "batch": b, "variant": name, "seconds": spread(times[name])}
                    | ({"speedup": round(speeds[name].median, 3)} if name in speeds else {})
                )
            results.append(
                {
                    "task": task,
                    "batch": [b, seq],
                    "heads": heads,
                    "best_chunk": int(best.rsplit(" ", 1)[1]),
                    "speedup": round(speeds[best].median, 3),
                    "speedup_iqr": [round(speeds[best].q1, 3), round(speeds[best].q3, 3)],
                    "met": bool(speeds[best].median >= ABLATION_TARGET),
                    "max_loss_diff": diff,
                    "agree": diff <= ABLATION_AGREE,
                }
            )
    return {
        "models": f"the {scale.ablation_preset} preset's lm (Llama) and mt (Marian), random init, fp32",
        "rounds": {"timed": scale.ablation_steps, "warmup": 1},
        "target": f"speed-up >= {ABLATION_TARGET}x at the best chunk (as bench_ablation.py)",
        "results": results,
        "rows": rows,
    }


def throughput(scale: Scale, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from common import interleaved, paired

    from heads.placement import Placement

    device = args.placement.device
    base = base_lm(scale, args.seed)
    # TF32 (fp32 weights, 10-bit mantissa products) is what train.precision=fp32 runs at on CUDA by default
    # (train.tf32: true); plain fp32 is the reference. On a CPU the flag does nothing, so it is left out.
    variants = ["fp32", "bf16"] + (["tf32"] if device.type == "cuda" else [])
    data = batches(scale, scale.batch, 4, args.seed, args.placement)  # the same 4 batches, cycled by each variant
    fns, peaks = {}, {}
    for name in variants:
        placement = Placement(device, "fp32" if name == "tf32" else name)
        model = copy.deepcopy(base).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        feed = cycle(data)

        def step(m=model, o=optimizer, p=placement, f=feed, tf32=name == "tf32") -> None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            train_step(m, o, p, next(f))

        fns[name] = synced(step, placement)
    args.placement.synchronize()
    times = interleaved(fns, scale.steps, scale.warmup)
    cuda = device.type == "cuda"
    for name in variants:  # one more step each, alone, for its peak memory
        args.placement.peak_memory_mb(reset=True)
        # Every variant's weights and AdamW state stay resident; what a step adds above them is its own.
        resident = torch.cuda.memory_allocated(device) / 2**20 if cuda else None
        fns[name]()
        peak = args.placement.peak_memory_mb(reset=True)
        peaks[name] = {"peak_mb": round(peak, 1), "step_mb": round(peak - resident, 1) if cuda else None}
    torch.backends.cuda.matmul.allow_tf32 = False
    tokens = scale.batch * scale.seq
    rows = []
    for name in variants:
        s = spread(times[name], 5)
        rows.append(
            {
                "precision": name,
                "ms": spread([t * 1e3 for t in times[name]], 2),
                "tokens_per_s": round(tokens / s["median"], 1),
                "speedup_vs_fp32": round(paired(times["fp32"], times[name]).median, 3),
                **peaks[name],
            }
        )
    return {
        "model": model_note(scale),
        "tokens_per_step": tokens,
        "rounds": {"timed": scale.steps, "warmup": scale.warmup},
        "peak_note": "CUDA: allocator peak during one step (every variant's weights and AdamW state resident) and "
        "step_mb, what the step adds above what was resident; CPU: the process's lifetime resident peak",
        "rows": rows,
    }


def model_note(scale: Scale) -> dict[str, Any]:
    return {
        **{k: v for k, v in asdict(scale).items() if k in ("d", "heads", "layers", "vocab", "batch", "seq")},
        "ff": 4 * scale.d,
        "note": scale.note,
    }


MEASURE: dict[str, Callable[[Scale, argparse.Namespace], dict[str, Any]]] = {
    "environment": environment,
    "masked_vs_pruned": masked_vs_pruned,
    "pruned_speedup": pruned_speedup,
    "ablation": ablation,
    "throughput": throughput,
}


# -- Markdown -----------------------------------------------------------------------------------------


def markdown(data: dict[str, Any]) -> str:
    """The JSON as tables: parts with their status, then each finished section's numbers."""
    s = data.get("sections", {})
    env = s.get("environment", {})
    lines = [
        "# GPU check",
        "",
        f"Device `{data.get('device')}` ({env.get('device_name') or 'no CUDA device'}), scale `{data.get('scale')}`, "
        f"torch {env.get('torch')}, CUDA {env.get('torch_cuda')}; updated {data.get('updated')}. "
        "Written by `benchmarks/gpu_check.sh` / `benchmarks/gpu_check.py`; the numbers are in the JSON beside this.",
        "",
        "| part | status | seconds (measured / wall / cap) |",
        "|---|---|---|",
    ]
    for name in PARTS:
        if name in s:
            p = s[name]
            lines.append(
                f"| {name} | {p.get('status')} | {p.get('seconds', '-')} / {p.get('wall_s', '-')} / "
                f"{p.get('cap_s', '-')} |"
            )
    if s.get("masked_vs_pruned", {}).get("results"):
        m = s["masked_vs_pruned"]
        lines += [
            "",
            f"## Masked == pruned ({m['heads_removed_per_site']} of {m['heads_per_site']} heads per site, "
            f"batch {m['batch'][0]} x {m['batch'][1]})",
            "",
            "| precision | max abs diff | max abs logit | tolerance | masked vs full | pass |",
            "|---|---|---|---|---|---|",
        ]
        for precision, r in m["results"].items():
            lines.append(
                f"| {precision} | {r['max_abs_diff']:.2e} | {r['max_abs_logit']:.3f} | {r['tolerance']:.2e} "
                f"(rtol {r['rtol']}) | {r['masked_vs_full_max_abs_diff']:.2e} | {r['pass']} |"
            )
        lines += [
            "",
            f"Rule: {m['tolerance_rule']}. bf16 vs fp32, same masked model: "
            f"{m['results']['bf16']['bf16_vs_fp32_same_model']:.2e}.",
        ]
    if s.get("pruned_speedup", {}).get("rows"):
        p = s["pruned_speedup"]
        lines += [
            "",
            f"## Pruned vs full ({_model_text(p['model'])})",
            "",
            "| precision | mode | variant | heads/site | full ms | variant ms | theoretical | realised (IQR) "
            "| realised / theoretical |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in p["rows"]:
            lines.append(
                f"| {r['precision']} | {r['mode']} | {r['variant']} | {r['heads_per_site']} | "
                f"{r['full_ms']['median']} | {r['ms']['median']} | {r['theoretical']:.3f} | "
                f"{r['realised']:.3f} ({r['realised_iqr'][0]:.3f}-{r['realised_iqr'][1]:.3f}) | "
                f"{r['realised_over_theoretical']:.3f} |"
            )
        lines += ["", f"Target: {p['target']}. Theoretical = heads.flops ratio (matmuls only). fp32 without TF32."]
    if s.get("ablation", {}).get("results"):
        a = s["ablation"]
        lines += [
            "",
            f"## Batched single-head ablation vs per-head loop ({a['models']})",
            "",
            "| task | batch x seq | heads | best chunk | speed-up (IQR) | >= 5x | max loss diff |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in a["results"]:
            lines.append(
                f"| {r['task']} | {r['batch'][0]} x {r['batch'][1]} | {r['heads']} | {r['best_chunk']} | "
                f"{r['speedup']:.2f} ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) | {r['met']} | "
                f"{r['max_loss_diff']:.1e} |"
            )
    if s.get("throughput", {}).get("rows"):
        t = s["throughput"]
        lines += [
            "",
            f"## Training throughput ({_model_text(t['model'])})",
            "",
            "| precision | ms/step (IQR) | tokens/s | speed-up vs fp32 | peak MiB | step MiB |",
            "|---|---|---|---|---|---|",
        ]
        for r in t["rows"]:
            lines.append(
                f"| {r['precision']} | {r['ms']['median']} ({r['ms']['iqr'][0]}-{r['ms']['iqr'][1]}) | "
                f"{r['tokens_per_s']:,.0f} | {r['speedup_vs_fp32']:.2f} | {r['peak_mb']} | {r['step_mb'] or '-'} |"
            )
        lines += ["", f"Peak memory: {t['peak_note']}."]
    if "smoke_dag" in s:
        d = s["smoke_dag"]
        lines += [
            "",
            "## Smoke DAG on the device",
            "",
            f"`snakemake --cores 8 --config preset=smoke` in a fresh copy: {d.get('status')} "
            f"(exit {d.get('rc')}) in {d.get('wall_s')} s; runs by device: {d.get('runs_by_device')}.",
        ]
    failed = [n for n in PARTS if n in s and s[n].get("status") != "ok"]
    for name in failed:
        tail = s[name].get("error") or s[name].get("log_tail") or ""
        lines += ["", f"### {name}: {s[name].get('status')}", "", "```", tail[-1500:].strip(), "```"]
    return "\n".join(lines) + "\n"


def _model_text(m: dict[str, Any]) -> str:
    return (
        f"Llama d={m['d']}, {m['heads']} heads, {m['layers']} layers, ff {m['ff']}, vocab {m['vocab']}, "
        f"batch {m['batch']} x {m['seq']}; {m['note']}"
    )


# -- command line -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default: %(default)s)")
    p.add_argument("--scale", choices=["paper", "small"], default="paper", help="(default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("results/bench/gpu.json"), help="(default: %(default)s)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="(default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch CPU threads (default: 1 on a CPU, as common.py; else torch's)")
    shell = p.add_argument_group("for gpu_check.sh: record a part's exit status instead of measuring")
    shell.add_argument("--mark", choices=PARTS, help="the part to record")
    shell.add_argument("--rc", type=int, default=0, help="its exit status (124/137: timed out)")
    shell.add_argument("--seconds", type=float, help="its wall time")
    shell.add_argument("--cap", type=float, help="its time cap")
    shell.add_argument("--log", type=Path, help="its output (the tail is kept when it failed)")
    shell.add_argument("--runs", type=Path, help="a run tree: count the devices its runs name")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    top = {"device": args.device, "scale": args.scale}
    if args.mark:
        mark(args)
        return 0
    import torch

    from heads.config import ConfigError
    from heads.placement import Placement, resolve_device

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # common, bench_ablation (a script's own folder is there already; an import's is not)
        sys.path.insert(0, here)
    if args.threads or args.device == "cpu":
        # Two threads contending with another busy process spin-wait (20 s instead of 2 here).
        torch.set_num_threads(args.threads or 1)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 here; TF32 is its own throughput row
    try:
        args.placement = Placement(resolve_device(args.device))
        args.device_error = None
    except ConfigError as exc:  # the environment section still says what the machine has
        args.placement, args.device_error = None, str(exc)
    scale = scale_of(args.scale)
    failed = []
    for name in args.sections:
        started = time.perf_counter()
        print(f"# {name} ...", flush=True)
        try:
            if args.placement is None and name != "environment":
                raise RuntimeError(args.device_error)
            value = {"status": "ok", **MEASURE[name](scale, args)}
        except Exception as exc:  # recorded, and the next section still runs (a CUDA error may poison them too)
            traceback.print_exc()
            value = {"status": "failed", "error": "".join(traceback.format_exception(exc))[-3000:]}
            failed.append(name)
        value["seconds"] = round(time.perf_counter() - started, 1)
        record(args.out, name, value, **top)
        print(f"# {name}: {value['status']} in {value['seconds']} s", flush=True)
    print(args.out.with_suffix(".md").read_text(), end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
