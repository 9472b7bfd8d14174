"""CPU minutes of a preset's replications, calibrated on the jobs a machine has already run
(``python -m tools.plan --cpu-from PRESET``).

:mod:`heads.plan` counts FLOPs; how long a FLOP takes on a CPU depends on the machine, the model family and the
kind of job. Snakemake's benchmark files record every finished job's wall seconds
(``logs/<preset>/benchmarks/runs/<label>.tsv``, column ``s``). From the jobs of a preset that ran here, this fits
per (task, command) ``seconds = start + FLOPs / rate`` (``start``: a job's fixed cost of interpreter, imports
and data, taken as the fastest job measured) and costs another preset's run sheet with it: core-minutes per
replication, and the minutes N cores need if the jobs packed perfectly (a lower bound: the DAG's order can leave
cores idle, and one job can be longer than the rest together).
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from heads.plan import Job, PlanError, analysis_job, run_config, train_job
from heads.sheet import RunSpec, Sheet, build, preset_settings


@dataclass(frozen=True)
class Calibration:
    """Seconds per job on the measured machine: ``start + flops / rate[(task, command)]``."""

    preset: str
    start_s: float
    rates: dict[tuple[str, str], float]  # (task, command) -> FLOPs per second past the start
    jobs: int  # measured jobs the rates come from

    def seconds(self, job: Job) -> float:
        """A job's estimated wall seconds; a (task, command) never measured takes the task's slowest rate, then
        the slowest of all (an over- rather than an under-estimate)."""
        rate = self.rates.get((job.task, job.command))
        if rate is None:
            same_task = [r for (t, _), r in self.rates.items() if t == job.task]
            rate = min(same_task or self.rates.values())
        return self.start_s + (job.train_flops + job.eval_flops) / rate


def _jobs(preset: str, root: str | Path) -> tuple[dict[str, Job], Sheet]:
    """Every sheet entry of ``preset`` costed in FLOPs, and the sheet (``of``: the labels each replication
    needs)."""
    sheet = build(root, preset_settings(root, preset, None))
    jobs = {label: train_job(e, cfg) if e.command == "train" else analysis_job(e, cfg)
            for label, e in sheet.runs.items() for cfg in [run_config(e, preset)]}
    return jobs, sheet


def measured_seconds(preset: str, logs: str | Path = "logs") -> dict[str, float]:
    """Wall seconds of every finished job of ``preset`` by run label (Snakemake's benchmark files)."""
    base = Path(logs) / preset / "benchmarks" / "runs"
    out = {}
    for path in sorted(base.rglob("*.tsv")) if base.is_dir() else []:
        with path.open() as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        try:
            seconds = float(rows[-1]["s"])
        except (IndexError, KeyError, ValueError):
            continue  # a benchmark file the job never finished
        out[path.relative_to(base).with_suffix("").as_posix()] = seconds
    return out


def as_run(label: str, job: Job, entry: RunSpec, runs: str | Path | None) -> Job:
    """A measured training job costed as it ran: from its run folder's ``config.json`` where ``runs`` has it (the
    preset may have changed since, e.g. more steps), else as the sheet says now."""
    config = Path(runs) / label / "config.json" if runs is not None else None
    if job.command != "train" or config is None or not config.is_file():
        return job
    from heads.resolve import from_dict

    try:
        return train_job(entry, from_dict(json.loads(config.read_text())))
    except (ValueError, KeyError, TypeError):
        return job  # a config this version cannot read: the sheet's estimate


def calibrate(preset: str, logs: str | Path = "logs", root: str | Path = "replications",
              runs: str | Path | None = None) -> Calibration:
    """Per (task, command), the median FLOPs per second past the start over the measured jobs of ``preset``;
    with ``runs`` (the run tree those jobs wrote), each training job is costed by the config it ran with."""
    seconds = measured_seconds(preset, logs)
    jobs, sheet = _jobs(preset, root)
    matched = {label: (as_run(label, jobs[label], sheet.runs[label], runs), s)
               for label, s in seconds.items() if label in jobs}
    if not matched:
        raise PlanError(f"no finished job of preset {preset!r} under {Path(logs) / preset / 'benchmarks' / 'runs'}: "
                        f"run its DAG first (snakemake --cores N --config preset={preset})")
    start = min(s for _, s in matched.values())
    groups: dict[tuple[str, str], list[float]] = {}
    for job, s in matched.values():
        flops = job.train_flops + job.eval_flops
        if flops > 0 and s > start:
            groups.setdefault((job.task, job.command), []).append(flops / (s - start))
    return Calibration(preset, start, {k: statistics.median(v) for k, v in sorted(groups.items())}, len(matched))


@dataclass
class ReplicationCost:
    """A replication's jobs on the calibrated machine."""

    name: str
    jobs: int
    core_s: float
    longest: tuple[str, float] = ("", 0.0)  # the longest single job: no packing makes the replication shorter
    by_command: dict[str, float] = field(default_factory=dict)  # core-seconds

    def minutes(self, cores: int) -> float:
        """Wall minutes on ``cores`` cores with perfect packing, never less than the longest job."""
        return max(self.core_s / cores, self.longest[1]) / 60


def cost(preset: str, calibration: Calibration, root: str | Path = "replications") -> list[ReplicationCost]:
    """Each replication of ``preset`` on its own (its shared baselines included), on the calibrated machine."""
    jobs, sheet = _jobs(preset, root)
    out = []
    for name, labels in sorted(sheet.of.items()):
        rc = ReplicationCost(name, len(labels), 0.0)
        for label in labels:
            s = calibration.seconds(jobs[label])
            rc.core_s += s
            rc.by_command[jobs[label].command] = rc.by_command.get(jobs[label].command, 0.0) + s
            if s > rc.longest[1]:
                rc.longest = (label, s)
        out.append(rc)
    return out


def markdown(preset: str, calibration: Calibration, costs: list[ReplicationCost], cores: int) -> str:
    """The per-replication table, with how it was calibrated."""
    lines = [f"## CPU cost of the {preset} preset, calibrated on {calibration.jobs} measured {calibration.preset} "
             "jobs", "",
             f"| replication | jobs | core-minutes | minutes on {cores} cores (lower bound) | longest job (min) "
             "| core-minutes by command |", "|---|--:|--:|--:|---|---|"]
    for c in costs:
        split = ", ".join(f"{k} {v / 60:,.0f}" for k, v in sorted(c.by_command.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {c.name} | {c.jobs} | {c.core_s / 60:,.0f} | {c.minutes(cores):,.0f} | "
                     f"{c.longest[0]} ({c.longest[1] / 60:,.1f}) | {split} |")
    lines += ["", f"Per job: {calibration.start_s:.1f} s to start (the fastest {calibration.preset} job) + FLOPs "
              "(heads.plan's count) / the median FLOP rate past the start of the measured jobs of the same task and "
              "command: " + ", ".join(f"{t} {c} {r / 1e9:.2g} GFLOP/s"
                                      for (t, c), r in calibration.rates.items()) + ". Minutes on N cores assume "
              "the jobs pack perfectly, one core each."]
    return "\n".join(lines) + "\n"
