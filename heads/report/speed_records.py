"""Inference speed (``heads speed``) read one way for the speed table and the claims: which timings replicate a
speed measure, and what they count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heads.report.collect import number, same_ratio

PER_JOB = "n counts speed jobs, one per seed's model, each the median of interleaved repeats"
PER_REPEAT = "n counts timed repeats of one model, not seeds"


def samples(rows: Sequence[Mapping], ratio: float, batch: Any = None) -> list[float]:
    """Examples per second of every timed pass at ``ratio`` (and ``batch``), in file order: from each row's
    ``times`` (one entry per repeat, ``examples`` per pass) when present, else the row's ``examples_per_s``."""
    out: list[float] = []
    for row in rows:
        r = number(row.get("ratio"))
        if r is None or not same_ratio(r, ratio) or (batch is not None and row.get("batch") != batch):
            continue
        times, examples = row.get("times"), number(row.get("examples"))
        if isinstance(times, list) and times and examples is not None:
            out += [examples / t for t in map(number, times) if t is not None and t > 0]
        elif (rate := number(row.get("examples_per_s"))) is not None:
            out.append(rate)
    return out


def row_at(rows: Sequence[Mapping], ratio: float, batch: Any = None) -> Mapping | None:
    """The row of one speed job at ``ratio`` (and ``batch``), else None."""
    return next((x for x in rows if isinstance(x.get("ratio"), (int, float)) and same_ratio(x["ratio"], ratio)
                 and (batch is None or x.get("batch") == batch)), None)


def of_job(rows: Sequence[Mapping], how: str, ratio: float, batch: Any = None) -> float | None:
    """One speed job summarised: its median examples/s at ``ratio`` (``examples_per_s``), or that over the
    unpruned model's (``speedup``; ``cpu_speedup``: of median CPU seconds), at ``batch``."""
    mine, base = row_at(rows, ratio, batch), row_at(rows, 0.0, batch)
    if mine is None:
        return None
    if how in ("examples_per_s", "cpu_speedup"):
        return number(mine.get(how))
    eps, ref = number(mine.get("examples_per_s")), number(base.get("examples_per_s")) if base else None
    return eps / ref if eps is not None and ref else None


@dataclass
class Replicates:
    """The values a speed measure is estimated from, keyed by seed (several jobs) or by repeat (one job)."""

    values: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def replicates(per_seed: Mapping[int, Sequence[Mapping]], how: str, ratio: float, batch: Any = None
               ) -> Replicates:
    """Whole-job replicates where each seed's model was timed in its own job (and for ``cpu_speedup``, which
    only a job's median gives): each job's median pass. One job alone: its timed repeats, each pruned pass over
    the unpruned model's of the same repeat round (they ran interleaved), or their ratio of means where the
    passes do not pair up."""
    out = Replicates()
    if len(per_seed) > 1 or how == "cpu_speedup":
        out.notes.append(PER_JOB)
        for seed, rows in sorted(per_seed.items()):
            value = of_job(rows, how, ratio, batch)
            if value is None:
                out.missing.append(f"seed {seed} has nothing to measure")
            else:
                out.values[seed] = value
        return out
    rows = next(iter(per_seed.values()), [])
    pruned, full = samples(rows, ratio, batch), samples(rows, 0.0, batch)
    if not pruned or (how == "speedup" and not full):
        out.missing.append(f"no timings for ratio {ratio:g}" + ("" if full else " or 0.0"))
        return out
    out.notes.append(PER_REPEAT)
    if how == "examples_per_s":
        out.values = dict(enumerate(pruned))
    elif len(pruned) == len(full):  # the k-th passes of both ran in the same repeat round
        out.values = {i: p / f for i, (p, f) in enumerate(zip(pruned, full, strict=True)) if f > 0}
    else:
        out.values = {0: (sum(pruned) / len(pruned)) / (sum(full) / len(full))}
        out.notes.append("timings do not pair up: ratio of means")
    return out
