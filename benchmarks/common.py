"""Shared pieces of the benchmark scripts: CLI, interleaved timing, spread, Markdown, summary.json, profiles.

Timing rules every script follows (the machine is shared, so absolute times drift):

* compare variants only *within one run*, never against a number from another run;
* interleave the variants round by round, rotating their order, so a noisy
  stretch hits all of them alike; drop warm-up rounds;
* report medians with their spread (quartiles, min, max) and the load average
  before and after, and prefer *paired* ratios (two variants timed in the same
  round) to ratios of medians;
* one torch thread by default: tiny models gain nothing from more, and two
  threads contending with another busy process spin-wait (up to 80x slower here).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

# the memory helpers live in the library (`heads memory` measures D8 with them); re-exported for the benchmarks
from heads.analysis.memory import optimizer_state_bytes, param_bytes, peak_tensor_bytes, tensor_bytes  # noqa: F401
from heads.io import write_text

RESULTS = Path("results/bench")
SUMMARY = RESULTS / "summary.json"


# -- command line ------------------------------------------------------------------------------------


def parser(doc: str | None, steps: int, warmup: int, out: str) -> argparse.ArgumentParser:
    """The options every benchmark shares: --out, --summary, --steps, --warmup, --threads, --seed, --tasks,
    --preset."""
    p = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        epilog="\n\n".join((doc or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=RESULTS / out, help="Markdown table (default: %(default)s)")
    p.add_argument("--summary", type=Path, default=SUMMARY, help="JSON to merge keys into (default: %(default)s)")
    p.add_argument("--steps", type=int, default=steps, help="timed rounds per variant (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=warmup, help="untimed rounds first (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="model init and batch seed (default: %(default)s)")
    p.add_argument("--tasks", nargs="+", default=["lm", "mt"], choices=sorted(FAMILY), help="(default: %(default)s)")
    p.add_argument("--preset", default="tiny", help="model sizes, seq_len and batch size (default: %(default)s)")
    return p


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.steps < 1:
        p.error(f"--steps must be >= 1, got {args.steps}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    if args.threads < 1:
        p.error(f"--threads must be >= 1, got {args.threads}")


def setup(args: argparse.Namespace) -> None:
    """Threads, offline hub, and quiet warnings for the run."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def load() -> float:
    """1-minute load average (other processes on the machine show up here)."""
    return os.getloadavg()[0]


def environment(args: argparse.Namespace) -> str:
    cpu = platform.processor() or platform.machine()
    return (
        f"torch {torch.__version__}, {args.threads} thread(s), {cpu}, {os.cpu_count()} CPUs, fp32; "
        f"{args.warmup} warm-up + {args.steps} timed rounds"
    )


# -- timing ------------------------------------------------------------------------------------------


def time_call(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(fns: Mapping[str, Callable[[], object]], steps: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each function: one call of each per round, the order rotated every round.

    The first ``warmup`` rounds are run but not kept. Functions must finish their
    work before returning (true on CPU).
    """
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + steps):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            seconds = time_call(fns[name])
            if r >= warmup:
                times[name].append(seconds)
    return times


@dataclass(frozen=True)
class Spread:
    """Median and spread of a sample."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        values = list(values)
        if not values:
            raise ValueError("no values")
        q1, q3 = (statistics.quantiles(values, n=4, method="inclusive")[::2]) if len(values) > 1 else values * 2
        return cls(statistics.median(values), q1, q3, min(values), max(values), len(values))

    def text(self, fmt: str = ".4f") -> str:
        return (
            f"median {self.median:{fmt}} (IQR {self.q1:{fmt}}-{self.q3:{fmt}}, "
            f"min {self.min:{fmt}}, max {self.max:{fmt}}, n={self.n})"
        )

    def iqr(self, fmt: str = ".3f") -> str:
        return f"{self.q1:{fmt}}-{self.q3:{fmt}}"


def paired(numerator: Sequence[float], denominator: Sequence[float]) -> Spread:
    """Spread of per-round ratios ``numerator[i] / denominator[i]`` (both timed in round i)."""
    if len(numerator) != len(denominator):
        raise ValueError("paired ratios need samples of equal length")
    return Spread.of([a / b for a, b in zip(numerator, denominator, strict=True)])


# -- profiles ----------------------------------------------------------------------------------------

# Self CPU time of each aten op lands in one bucket; the first pattern found in the op name wins.
OP_BUCKETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention kernel", ("scaled_dot_product", "_flash_attention", "_efficient_attention", "softmax")),
    ("matmul", ("addmm", "::mm", "bmm", "matmul", "linear", "baddbmm", "addbmm")),
    ("optimizer", ("_foreach", "adam", "lerp", "addcdiv", "addcmul")),
    ("embedding / loss", ("embedding", "cross_entropy", "nll_loss", "log_softmax", "gather", "scatter")),
    (
        "copies / layout",
        (
            "copy_",
            "clone",
            "contiguous",
            "cat",
            "index_select",
            "transpose",
            "view",
            "reshape",
            "permute",
            "expand",
            "to_copy",
            "_to_copy",
            "empty",
            "zeros",
            "ones",
            "fill_",
            "zero_",
        ),
    ),
    (
        "elementwise / norms",
        (
            "mul",
            "add",
            "div",
            "sub",
            "pow",
            "rsqrt",
            "mean",
            "sum",
            "silu",
            "gelu",
            "relu",
            "neg",
            "sigmoid",
            "tanh",
            "norm",
            "where",
            "masked",
            "exp",
            "sqrt",
            "abs",
            "cos",
            "sin",
            "clamp",
            "threshold",
            "dropout",
        ),
    ),
)


def op_profile(fn: Callable[[], object], repeats: int = 2, warm: bool = True) -> tuple[dict[str, float], float]:
    """Self CPU seconds per bucket of ``OP_BUCKETS`` (plus ``other`` and ``python / dispatch``) per call, and wall.

    ``python / dispatch`` is wall time no aten op accounts for: the interpreter,
    module calls, hooks and the dispatcher. Profiling slows ops a little, so only
    the split (not the absolute time) is meant to be compared between variants.
    ``warm``: one untimed call first.
    """
    from torch.profiler import ProfilerActivity, profile

    if warm:
        fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        wall = (time.perf_counter() - start) / repeats
    buckets: dict[str, float] = {name: 0.0 for name, _ in OP_BUCKETS}
    buckets["other"] = 0.0
    for event in prof.key_averages():
        if not event.key.startswith("aten::"):
            continue
        seconds = event.self_cpu_time_total / 1e6 / repeats
        for name, patterns in OP_BUCKETS:
            if any(p in event.key for p in patterns):
                buckets[name] += seconds
                break
        else:
            buckets["other"] += seconds
    buckets["python / dispatch"] = max(0.0, wall - sum(buckets.values()))
    return buckets, wall


def profile_note(
    label_a: str, fn_a: Callable[[], object], label_b: str, fn_b: Callable[[], object], repeats: int = 2
) -> list[str]:
    """Markdown lines: per-bucket time of two variants and how much each bucket shrank from a to b.

    With ``repeats=1`` the functions are taken as warm already (no untimed call).
    """
    a, wall_a = op_profile(fn_a, repeats, warm=repeats > 1)
    b, wall_b = op_profile(fn_b, repeats, warm=repeats > 1)
    lines = [
        f"| op bucket (torch.profiler, self CPU ms per call) | {label_a} | {label_b} | {label_a}/{label_b} "
        f"| share of {label_b}'s time |",
        "|---|---|---|---|---|",
    ]
    for name in a:
        ratio = a[name] / b[name] if b[name] > 0 else math.nan
        lines.append(f"| {name} | {a[name] * 1e3:.2f} | {b[name] * 1e3:.2f} | {ratio:.2f} | {b[name] / wall_b:.0%} |")
    lines.append(f"| wall (profiled) | {wall_a * 1e3:.2f} | {wall_b * 1e3:.2f} | {wall_a / wall_b:.2f} | 100% |")
    return lines


# -- memory ------------------------------------------------------------------------------------------


# -- output ------------------------------------------------------------------------------------------


def entry(measured: float | int, target: float | int | None, met: bool | None, unit: str, **extra) -> dict:
    """One summary.json value: ``{"measured", "target", "met", "unit"}`` (plus context such as ``spread``)."""
    if isinstance(measured, float):
        measured = round(measured, 6)
    return {"measured": measured, "target": target, "met": met, "unit": unit, **extra}


def at_least(measured: float, target: float, unit: str, **extra) -> dict:
    return entry(measured, target, bool(measured >= target), unit, **extra)


def at_most(measured: float, target: float, unit: str, **extra) -> dict:
    return entry(measured, target, bool(measured <= target), unit, **extra)


def update_summary(path: Path, entries: Mapping[str, dict]) -> None:
    """Merge ``entries`` into the JSON object at ``path`` (other scripts' keys stay).

    Read-modify-write happens under an exclusive lock on the folder (no lock file
    left behind), and the new file is renamed into place, so two benchmarks
    finishing at once lose nothing and a reader never sees a half-written file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(entries)
        write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    finally:
        os.close(folder)  # releases the lock


def markdown(title: str, header: str, sections: Iterable[Sequence[str]], notes: Iterable[str]) -> str:
    """A document: title, an environment line, tables (lists of lines), then notes as a bullet list."""
    parts = [f"# {title}", ""] + ([header, ""] if header else [])
    for lines in sections:
        parts += [*lines, ""]
    notes = list(notes)
    if notes:
        parts += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(parts)


def finish(args: argparse.Namespace, text: str, entries: Mapping[str, dict]) -> None:
    """Print the table, write it and merge the summary keys."""
    print(text, end="", flush=True)
    write_text(args.out, text)
    update_summary(args.summary, entries)
    print(f"# wrote {args.out} and {len(entries)} key(s) of {args.summary}")


FAMILY = {"lm": "llama", "mt": "marian"}  # task -> model family of the tiny presets


def build_model(task: str, preset: str, seed: int) -> tuple[nn.Module, int]:
    """The preset's model for ``task`` (random init, seeded) and its ``seq_len``."""
    from heads import models
    from heads.presets import preset_for

    spec = preset_for(task, preset)
    m, seq = spec["model"], spec["data"]["seq_len"]
    size = dict(vocab=m["vocab"], d=m["d"], layers=m["layers"], heads=m["heads"], seed=seed)
    if FAMILY[task] == "llama":
        return models.llama(max_len=seq, **size), seq
    return models.marian(max_len=seq + 2, **size), seq


def random_batch(family: str, batch: int, seq: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    """Random tokens of the tiny presets' shapes (no padding): ``labels`` = inputs for Llama, a target for Marian."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (batch, seq), generator=g)
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    out["labels"] = torch.randint(2, vocab, (batch, seq), generator=g) if family == "marian" else ids
    return out


# -- verdicts under another machine (bench_perturbation, bench_machines) ---------------------------------------


def relative_move(a: float, b: float) -> float:
    """How far ``b`` lies from ``a``, relative to the larger of the two (0 when equal)."""
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), 1e-12)


def signed(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.4g}"


def verdict_rows(claims: Mapping[str, Mapping], header: Sequence[str]) -> list[str]:
    """A Markdown table of each claim's verdict and effect on both sides (``header``: the five column names), a
    changed verdict marked."""
    lines = ["| " + " | ".join(header) + " |", "| --- | --- | --- | --- | --- |"]
    for cid, c in claims.items():
        mark = " **(changed)**" if c["base"] != c["perturbed"] else ""
        lines.append(f"| {cid} | {c['base']} | {c['perturbed']}{mark} | {signed(c['effect_base'])} | "
                     f"{signed(c['effect_perturbed'])} |")
    return lines
