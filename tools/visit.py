"""The GPU visit (``benchmarks/gpu_evidence.py``): its parts and their caps, and what each part of the next visit
should take, from what earlier visits measured (the archives they brought back, ``results/gpu/visits/``;
``python -m tools.plan --preset gpu`` prints the estimate).

An estimate comes only from a measurement: a job kind (baseline, l0, roles, ablation, curve/importance, ...)
that finished in a visit is expected to take what it took there (training jobs rescaled to this sheet's steps
by the pace the baselines measured, and a baseline's capped by the ``train.time_limit`` the visit gives it); one
that never finished has no estimate, and the part holding it says so, with the cap it ran out of. A part's
estimate is its jobs run as the visit runs them: ``parallel`` at a time, each after the runs it needs.
"""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from heads.sheet import RunSpec

PRESET, TASK = "gpu", "mt"
# What a part may take at most, seconds (less when the budget has less left); scratch gets what is left.
CAPS = {"calibrate": 75, "train": 310, "analyses": 150, "curves": 75}
PARTS = ("train", "analyses", "curves", "scratch")
BUDGET_S, RESERVE_S, PARALLEL = 560.0, 15.0, 9  # the script's defaults: all parts, kept back, jobs side by side
RECORD = "gpu_evidence.json"  # the visit's record, at the top of its archive
PACED = ("baseline", "scratch")  # training jobs that run as the baselines' pace was measured: seeds, alone
# What a part keeps back from its cap when it gives its training runs train.time_limit (counted from each run's
# own start: at PARALLEL, every training run of a part starts with the part). Measured: the baselines' time
# outside their steps (start-up, validations, final evaluation) was 25 s on an H200 (the second visit); the L0
# runs', among nine processes, 45-54 s, and the roles job after each 24-27 s (the first visit). So train keeps
# 30 s and analyses 95 s: each run then ends inside its part's cap, with fewer steps if it must, its roles
# job too, instead of being killed with nothing saved. Scratch gets none: C3 compares it at the steps it is
# sized to, and it starts only when the estimate fits.
ALLOWANCE_S = {"train": 30.0, "analyses": 95.0}
NEAR_LIMIT = 0.05  # a pace this close to its time limit is said to be: a slightly slower device stops it short


def time_limit(part: str, cap: float, scale: float = 1.0) -> float | None:
    """``train.time_limit`` for the training runs of ``part`` when it is capped at ``cap`` seconds (``scale``:
    the miniature's longer caps); None where the part gives none or has no room for one."""
    if part not in ALLOWANCE_S:
        return None
    limit = cap - ALLOWANCE_S[part] * scale
    return round(limit, 1) if limit > 0 else None


def part_of(e: RunSpec) -> str:
    """Which part of the visit runs an entry of the sheet."""
    if e.command == "train":
        return {"baseline": "train", "l0": "analyses", "scratch": "scratch"}.get(e.variant, "train")
    return "curves" if e.command == "curve" else "analyses"


def kind(e: RunSpec) -> str:
    """What a job is, alike across seeds and visits: its variant (a curve's also its scorer)."""
    return f"{e.variant}/{e.arm}" if e.command == "curve" else e.variant


@dataclass(frozen=True)
class Visit:
    """One visit as its archive brought it back: the record, and each training run's config (its steps)."""

    name: str
    record: dict
    configs: dict[str, dict]  # run label -> config.json

    @property
    def device(self) -> str | None:
        """The device it measured on (an H100's times need not be an H200's)."""
        return self.record.get("environment", {}).get("device_name")

    @property
    def label(self) -> str:
        return f"{self.name} on {self.device}" if self.device else self.name


def read_visit(path: Path) -> Visit:
    """A visit's archive (``.tar.gz`` of its record, ``runs/`` and ``logs/``) or a folder laid out alike."""
    path = Path(path)
    configs: dict[str, dict] = {}
    if path.is_dir():
        tops = sorted(path.glob("*.json"))
        if len(tops) != 1:
            raise ValueError(f"{path}: {len(tops)} records at the top (a visit's folder has one, {RECORD})")
        record = json.loads(tops[0].read_text())
        for cfg in (path / "runs").rglob("config.json"):
            configs[str(cfg.parent.relative_to(path / "runs"))] = json.loads(cfg.read_text())
        return Visit(path.name, record, configs)
    record = None
    with tarfile.open(path) as tar:
        for member in tar:
            if "/" not in member.name and member.name.endswith(".json"):  # the record (gpu_evidence.py --out)
                record = json.load(tar.extractfile(member))
            elif member.name.startswith("runs/") and member.name.endswith("/config.json"):
                configs[member.name[len("runs/"):-len("/config.json")]] = json.load(tar.extractfile(member))
    if record is None:
        raise ValueError(f"{path}: no record ({RECORD}) at the top of the archive (is it a visit's?)")
    return Visit(path.name.removesuffix(".tar.gz"), record, configs)


@dataclass
class JobEstimate:
    label: str
    kind: str
    seconds: float | None  # None: nothing measured says
    basis: str
    stops: bool = False  # ended by its time limit short of its steps


@dataclass
class PartEstimate:
    name: str
    cap_s: float | None  # None: what the budget has left (scratch)
    jobs: list[JobEstimate] = field(default_factory=list)
    seconds: float | None = None  # the jobs as the visit schedules them; None: some job has no estimate
    skipped: str | None = None  # why the visit would not start it

    @property
    def unknown(self) -> list[str]:
        return sorted({j.kind for j in self.jobs if j.seconds is None})


def _steps_batch(cfg: dict) -> tuple[int | None, int | None]:
    return cfg.get("train", {}).get("steps"), cfg.get("data", {}).get("batch_size")


class Measured:
    """What the visits measured, by job kind, the latest visit winning. Only visits whose baselines trained at
    this sheet's batch (``batch``) count: every job's work grows with it; the others are quoted, not used."""

    def __init__(self, visits: list[Visit], kinds: dict[str, str], batch: int | None) -> None:
        self.ok: dict[str, tuple[Visit, list[tuple[str, float]]]] = {}
        self.ran_out: dict[str, tuple[Visit, float]] = {}
        self.elsewhere: dict[str, str] = {}  # kind -> what a visit at another batch saw
        self.pace: tuple[Visit, float, float] | None = None  # visit, s/step side by side, a job's other seconds
        for v in visits:
            at = next((_steps_batch(c)[1] for label, c in v.configs.items() if kinds.get(label) == "baseline"), None)
            by_kind: dict[str, list[tuple[str, dict]]] = {}
            for label, job in v.record.get("jobs", {}).items():
                if label in kinds:  # a label this sheet no longer has says nothing of it
                    by_kind.setdefault(kinds[label], []).append((label, job))
            for k, jobs in by_kind.items():
                statuses = {j.get("status") for _, j in jobs}
                slowest = max(float(j.get("seconds") or 0) for _, j in jobs)
                if at != batch:
                    if statuses & {"ok", "timed_out"}:
                        self.elsewhere[k] = (f"at batch {at} ({v.name}): "
                                             + ("ok, " if statuses == {"ok"} else "timed out at ") + f"{slowest:g} s")
                elif statuses == {"ok"}:
                    self.ok[k] = (v, [(label, float(j["seconds"])) for label, j in jobs])
                    self.ran_out.pop(k, None)  # the latest visit wins, either way
                elif "timed_out" in statuses:
                    self.ran_out[k] = (v, slowest)
                    self.ok.pop(k, None)
            train = v.record.get("parts", {}).get("train", {})
            if at == batch and train.get("seconds_per_step") and train.get("ok_all"):
                self.pace = (v, float(train["seconds_per_step"]), float(train.get("overhead_s", 0.0)))

    def job(self, e: RunSpec, k: str, steps: int | None) -> JobEstimate:
        """``e``'s estimate: what its kind took (a training job rescaled to ``steps`` at the baselines' pace)."""
        # the pace holds for the seeds' runs side by side alone in their part (baselines, scratch), not for an
        # l0 run among the analyses' nine processes (the first visit's took a third longer than the pace says)
        if k in PACED and self.pace and steps and (k == "baseline" or k not in self.ok):
            v, per_step, overhead = self.pace
            basis = f"{per_step:g} s a step x {steps} + {overhead:g} s (baselines' pace, {v.name})"
            limit = time_limit("train", CAPS["train"]) if k == "baseline" else None
            if limit is not None and per_step * steps > limit:  # the visit ends them at their time limit
                return JobEstimate(e.label, k, overhead + limit, f"{basis}; stopped by train.time_limit={limit:g} "
                                                                 f"after ~{int(limit / per_step)} steps", stops=True)
            if limit is not None and per_step * steps > limit * (1 - NEAR_LIMIT):
                basis += f"; within {NEAR_LIMIT:.0%} of train.time_limit={limit:g}: a slower device stops it short"
            return JobEstimate(e.label, k, overhead + per_step * steps, basis)
        if k in self.ok:
            v, jobs = self.ok[k]
            seconds = max(s for _, s in jobs)
            # a run its time limit stopped trained the steps its job record says, not its config's
            was = v.record["jobs"][jobs[0][0]].get("steps") or _steps_batch(v.configs.get(jobs[0][0], {}))[0]
            if e.command == "train" and was != steps:
                if not (self.pace and was and steps):
                    return JobEstimate(e.label, k, None, f"measured at {was} steps ({v.name}); this sheet trains "
                                                         f"{steps}")
                extra = self.pace[1] * (steps - was)  # the steps added or removed, at the baselines' pace
                return JobEstimate(e.label, k, seconds + extra, f"{seconds:g} s at {was} steps ({v.name}) "
                                                                f"{extra:+.0f} s")
            return JobEstimate(e.label, k, seconds, f"measured: {seconds:g} s, slowest of {len(jobs)} ({v.name})")
        if k in self.ran_out:
            v, seconds = self.ran_out[k]
            commit = str(v.record.get("environment", {}).get("git_commit") or "?")[:12]
            return JobEstimate(e.label, k, None, f"timed out at {seconds:g} s ({v.name}, commit {commit})")
        seen = f"; {self.elsewhere[k]}" if k in self.elsewhere else ""
        return JobEstimate(e.label, k, None, f"not measured at this sheet's batch{seen}")


def schedule(jobs: list[tuple[JobEstimate, tuple[str, ...]]], parallel: int) -> float:
    """When the last of ``jobs`` (estimate, labels it waits for) ends, ``parallel`` at a time in order, each
    started once the jobs it needs (in this part) have ended: the visit's executor, on estimated times."""
    labels = {j.label for j, _ in jobs}
    end: dict[str, float] = {}
    running: list[tuple[float, str]] = []
    pending = list(jobs)
    now = 0.0
    while pending or running:
        for j, after in list(pending):
            if len(running) >= parallel:
                break
            needs = [a for a in after if a in labels]
            if all(a in end and end[a] <= now for a in needs):
                pending.remove((j, after))
                running.append((now + float(j.seconds or 0.0), j.label))
        if not running:
            raise ValueError("jobs wait for runs that never end (a cycle in the part)")
        running.sort()
        now, label = running.pop(0)
        end[label] = now
    return now


def estimate(entries: list[RunSpec], visits: list[Visit], preset: str = PRESET,
             parallel: int = PARALLEL) -> tuple[list[PartEstimate], float | None]:
    """Each part's estimate for a visit running ``entries`` (the task's jobs of the sheet), and the start-up
    before the parts (the latest visit's: its elapsed time less its parts')."""
    from heads.plan import run_config

    kinds = {e.label: kind(e) for e in entries}
    baseline = next((e for e in entries if kinds[e.label] == "baseline"), None)
    measured = Measured(visits, kinds, run_config(baseline, preset).data.batch_size if baseline else None)
    parts = []
    for name in PARTS:
        mine = [e for e in entries if part_of(e) == name]
        if not mine:
            continue
        part = PartEstimate(name, CAPS.get(name))
        waits = []
        for e in mine:
            steps = run_config(e, preset).train.steps if e.command == "train" else None
            job = measured.job(e, kinds[e.label], steps)
            part.jobs.append(job)
            waits.append((job, e.after))
        if not part.unknown:
            part.seconds = schedule(waits, parallel)
        stops = [j.label for p in parts for j in p.jobs if j.stops] if name == "scratch" else []
        if stops:  # as gpu_evidence.py's not_scratch decides
            part.skipped = (f"not started: {len(stops)} run(s) it matches are estimated to stop at their time "
                            "limit, short of the steps it is sized to")
        parts.append(part)
    start = None
    if visits:
        record = visits[-1].record
        spent = sum(float(p.get("seconds", 0.0)) for p in record.get("parts", {}).values())
        if "elapsed_s" in record:
            start = max(0.0, float(record["elapsed_s"]) - spent)
    return parts, start
