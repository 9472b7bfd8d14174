"""The GPU visit's evidence (issue 36): the translation runs of michel2019 and voita2019 at the ``gpu`` preset,
run straight from the run sheet on one device, each part under its own timeout.

A visit is short (minutes of device time, nothing installed but a Python with torch) and has no Snakemake, so
this is a small executor of the same run sheet the DAG uses (``heads.sheet``): every job is the DAG's own
``heads`` command line, so the run tree it writes is the one ``heads report`` reads. Parts, in order:

* ``calibrate`` (with ``--calibrate``, and in the miniature): the seeds' baselines trained side by side for a
  few steps; their seconds per step (and the start-up and final evaluation around them) size ``train.steps`` to
  the training budget. Otherwise the steps are the preset's, sized from the pace earlier visits measured
  (``--steps`` overrides); either way a dag override, so every run's config records the steps it trained;
* ``train``: the baselines, side by side;
* ``analyses``: Michel's single-head ablation with BLEU's paired bootstrap and all-but-one per site, Voita's L0
  gates at each penalty, and the surviving heads' roles;
* ``curves``: the importance-vs-random pruning curves;
* ``scratch``: the largest penalty's layout trained from initialisation (Voita's C3).

A part that runs out of its cap is killed (its process groups), its finished jobs kept; a job whose input is
missing is skipped and said to be. After every part the run tree's records (no weights) are archived to
``--archive``, so a visit cut short still brings back what it made. ``--render`` renders the ledgers of a
run tree (here, after the visit): ``results/gpu/<replication>/`` and ``results/gpu/claims.csv``.

    python benchmarks/gpu_evidence.py --device cuda --budget 480 --archive $OUT/gpu_runs.tar.gz
    python benchmarks/gpu_evidence.py --device cpu --scale mini --runs tmp/runs --out tmp/gpu_evidence.json
    python benchmarks/gpu_evidence.py --render --runs results/gpu/runs --results results/gpu
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from heads.freshness import write_settings  # noqa: E402
from heads.report.collect import read_jsonl_tolerant  # noqa: E402
from heads.sheet import (  # noqa: E402
    RunSpec,
    build,
    command_line,
    entry_overrides,
    layered,
    overrides_file,
    preset_settings,
)
from tools.visit import (  # noqa: E402
    BUDGET_S,
    CAPS,
    PARALLEL,
    PARTS,
    PRESET,
    RECORD,
    RESERVE_S,
    TASK,
    part_of,
    time_limit,
)

# the CPU miniature: the same sheet and commands on a model and data that run in minutes on two cores
MINI = {
    "tasks": {TASK: {"model": {"layers": 1, "d": 32, "heads": 4, "ff": 64, "vocab": 2000},
                     "data": {"seq_len": 24, "batch_size": 16},
                     "train": {"warmup": 5, "log_every": 5, "eval_every": 20, "checkpoint_every": 20,
                               "eval_batches": 2},
                     "eval": {"max_examples": 24, "beams": 1, "max_new_tokens": 12}}},
    "michel2019": {"curve_examples": 16, "curve_batches": 1, "curve_step": 0.25},
    "voita2019": {"steps": 4, "batches": 1},
}
MINI_CAPS = 4  # the miniature's caps are the visit's (tools.visit.CAPS) times this: a CPU process starts in ~20 s
TRAIN_SHARE = 0.85  # the steps are sized so that the baselines end within this share of train's cap
CALIBRATION_STEPS = (20, 60)  # seconds per step measured between these steps
MINI_CALIBRATION, MINI_STEPS = (5, 15), 30


@dataclass
class Job:
    entry: RunSpec
    command: str
    log: Path
    started: float = 0.0
    proc: subprocess.Popen | None = None
    record: dict = field(default_factory=dict)


def heads_shim(where: Path) -> Path:
    """A ``heads`` on PATH that runs this checkout's package with this Python (a visit installs nothing)."""
    where.mkdir(parents=True, exist_ok=True)
    shim = where / "heads"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m heads \"$@\"\n")
    shim.chmod(0o755)
    return where


def environment(device: str) -> dict:
    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device,
           "python": sys.version.split()[0], "git_commit": os.environ.get("HEADS_GIT_COMMIT")}
    if device.startswith("cuda") and torch.cuda.is_available():
        out["device_name"] = torch.cuda.get_device_name(0)
    try:
        out["nvidia_smi"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                           timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out["nvidia_smi"] = None
    return out


class Visit:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.runs = Path(args.runs)
        self.sps, self.overhead = 0.0, 0.0  # seconds per step side by side and a job's other seconds
        self.logs = self.runs.parent / "logs"
        self.start = time.monotonic()
        self.record: dict = {"preset": PRESET, "scale": args.scale, "budget_s": args.budget,
                             "parallel": args.parallel, "parts": {}, "jobs": {}}
        env = dict(os.environ)
        shim = heads_shim(Path(tempfile.mkdtemp(prefix="heads-shim-")))
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        self.env = env

    # -- the sheet -------------------------------------------------------------------------------------------
    def sheet(self, steps: int | None):
        """The preset's sheet on this device (the miniature's sizes laid over it), training ``steps`` if given."""
        over = layered(MINI if self.args.scale == "mini" else {},
                       {"tasks": {TASK: {"train": {"device": self.args.device}}}})
        if steps is not None:
            over = layered(over, {"tasks": {TASK: {"train": {"steps": steps}}}})
        dag = preset_settings(ROOT / "replications", PRESET, over)
        if steps is not None:  # C3: the layout from scratch trains as many steps as the L0 model had in all
            dag["voita2019"]["scratch_steps"] = steps + dag["voita2019"]["steps"]
        return build(ROOT / "replications", dag)

    def command(self, e: RunSpec, runs: Path | None = None) -> str:
        runs = str(runs or self.runs)
        overrides = entry_overrides(e, runs, self.args.data_root)
        file = None
        if overrides:  # what the workflow's settings folder holds for it (heads.freshness.write_overrides)
            file = overrides_file(str(Path(runs).parent / ".settings"), e.label)
            write_settings(file, overrides)
        return command_line(e, runs, PRESET, self.args.data_root, self.args.threads, overrides=file)

    # -- running jobs side by side ---------------------------------------------------------------------------
    def cap(self, name: str) -> float:
        return CAPS[name] * (MINI_CAPS if self.args.scale == "mini" else 1)

    def left(self) -> float:
        return self.args.budget - (time.monotonic() - self.start)

    def run_part(self, name: str, jobs: list[Job], cap: float) -> dict:
        """Run ``jobs`` (in dependency order, ``parallel`` at a time) for at most ``cap`` seconds."""
        cap = max(0.0, min(cap, self.left()))
        began = time.monotonic()
        pending, running, done = list(jobs), [], {}
        labels = {j.entry.label for j in jobs}
        print(f"# {name}: {len(jobs)} jobs, cap {cap:.0f}s", flush=True)
        while pending or running:
            now = time.monotonic()
            if now - began > cap:
                for j in running:
                    self.kill(j)
                    j.record.update(status="timed_out", seconds=round(now - j.started, 1))
                for j in pending:
                    j.record.update(status="not_started")
                break
            for j in list(running):
                if j.proc.poll() is not None:
                    running.remove(j)
                    ok = j.proc.returncode == 0
                    j.record.update(status="ok" if ok else "failed", rc=j.proc.returncode,
                                    seconds=round(time.monotonic() - j.started, 1))
                    if not ok:
                        j.record["log_tail"] = tail(j.log)
                    done[j.entry.label] = ok
            for j in list(pending):
                if len(running) >= self.args.parallel:
                    break
                needs = [a for a in j.entry.after if a in labels]  # dependencies run in this part
                if any(done.get(a) is False or self.record["jobs"].get(a, {}).get("status") not in (None, "ok")
                       for a in j.entry.after):
                    pending.remove(j)
                    j.record.update(status="skipped", reason="a run it needs did not finish")
                    done[j.entry.label] = False
                    continue
                if any(a not in done for a in needs):
                    continue
                pending.remove(j)
                self.launch(j)
                running.append(j)
            time.sleep(0.5)
        for j in jobs:
            self.record["jobs"][j.entry.label] = {"part": name, **j.record}
        statuses = [j.record.get("status") for j in jobs]
        part = {"cap_s": round(cap), "seconds": round(time.monotonic() - began, 1), "jobs": len(jobs),
                **{s: statuses.count(s) for s in sorted(set(statuses))}}
        part["ok_all"] = all(s == "ok" for s in statuses)
        # beside what was set before it ran (its time limit); the record's own dict, which callers add to
        part = self.record["parts"].setdefault(name, {}) | part
        self.record["parts"][name] = part
        print(f"# {name}: {part}", flush=True)
        self.save()
        return part

    def launch(self, j: Job) -> None:
        j.log.parent.mkdir(parents=True, exist_ok=True)
        j.started = time.monotonic()
        with open(j.log, "w") as log:
            j.proc = subprocess.Popen(j.command, shell=True, cwd=ROOT, env=self.env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        j.record = {"command": j.command}

    @staticmethod
    def kill(j: Job) -> None:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(j.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                j.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def job(self, e: RunSpec, runs: Path | None = None) -> Job:
        return Job(e, self.command(e, runs), self.logs / f"{e.label}.log")

    # -- calibration ------------------------------------------------------------------------------------------
    def calibrate(self) -> int:
        """``train.steps`` that the training budget holds, from the seeds trained side by side briefly (the
        miniature's are fixed: it checks the plumbing, not the sizing)."""
        mini = self.args.scale == "mini"
        first, last = MINI_CALIBRATION if mini else CALIBRATION_STEPS
        sheet = self.sheet(None)
        most_steps = MINI_STEPS if mini else int(self.args.max_steps or _preset_steps())
        runs = self.runs.parent / "calibration"
        jobs = []
        for label in sheet.labels("train"):
            e = sheet[label]
            if e.variant != "baseline":
                continue
            tuned = replace(e, config=layered(e.config, {"train": {
                "steps": last, "log_every": first, "eval_every": last, "checkpoint_every": last}}))
            jobs.append(self.job(tuned, runs))
        part = self.run_part("calibrate", jobs, self.cap("calibrate"))
        per_step, overhead = [], []
        for j in jobs:
            rows = read_jsonl_tolerant(runs / j.entry.label / "metrics.jsonl")
            at = {r["step"]: r for r in rows if "train_seconds" in r}
            if first in at and last in at and j.record.get("status") == "ok":
                per_step.append((at[last]["train_seconds"] - at[first]["train_seconds"]) / (last - first))
                overhead.append(j.record["seconds"] - at[last]["train_seconds"])
        if not per_step:
            raise SystemExit("calibrate: no seed trained; see " + ", ".join(str(j.log) for j in jobs))
        # the slowest seed's pace and start-up (with its final evaluation): the three end together or not at all
        self.sps, self.overhead = max(per_step), max(overhead)
        budget = min(self.cap("train"), self.left()) * TRAIN_SHARE
        steps = most_steps if mini else min(most_steps, max(100, int((budget - self.overhead) / self.sps) // 100 * 100))
        part.update(seconds_per_step=round(self.sps, 4), overhead_s=round(self.overhead, 1),
                    train_budget_s=round(budget), steps=steps, steps_most=most_steps)
        self.record["steps"] = steps
        self.save()
        return steps

    def pace(self, jobs: list[Job]) -> None:
        """The baselines' own pace side by side (their summaries' training seconds per step, and the rest of
        each job's time): what the calibration guessed, measured, and what the scratch estimate uses."""
        per_step, overhead = [], []
        for j in jobs:
            s = self.summary(j.entry.label)
            if j.record.get("status") == "ok" and s is not None:
                per_step.append(s["train_seconds"] / max(s["steps"], 1))
                overhead.append(j.record["seconds"] - s["train_seconds"])
        if per_step:
            self.sps, self.overhead = max(per_step), max(overhead)
            self.record["parts"]["train"].update(seconds_per_step=round(self.sps, 4),
                                                 overhead_s=round(self.overhead, 1))
            self.save()

    def count_stopped(self, name: str, jobs: list[Job]) -> None:
        """The part's training runs that their time limit ended short of their steps: each job's record gets
        the steps it trained, the part's how many stopped."""
        stopped = 0
        for j in jobs:
            s = self.summary(j.entry.label) if j.entry.command == "train" and j.record.get("status") == "ok" else None
            if s is not None and s.get("stopped"):
                stopped += 1
                self.record["jobs"][j.entry.label]["steps"] = s["steps"]  # of the sheet's: what the limit left
        if "time_limit_s" in self.record["parts"].get(name, {}):
            self.record["parts"][name]["stopped_early"] = stopped
            self.save()

    def not_scratch(self, jobs: list[Job], cap: float, sheet) -> tuple[dict, str] | None:
        """Why the scratch part does not start (its record, each job's reason), or None. C3 compares the layout
        trained from scratch with the steps of the runs it builds on (its seed's baseline and L0 run), so not
        after one of those stopped early (read from their summaries: an earlier call's runs count too); and a
        run that cannot finish is not started (its claim then says the run is missing)."""
        stopped = sorted({a for j in jobs for a in self.stopped_upstream(sheet, j.entry.label)})
        if stopped:
            return ({"reason": f"{', '.join(stopped)} stopped at their time limit, short of the steps the "
                               "from-scratch runs are sized to match"}, "a run it matches stopped early")
        if self.args.scale != "mini":
            need = self.overhead + self.sps * max(
                (j.entry.config.get("train", {}).get("steps", 0) for j in jobs), default=0)
            if need > cap:
                return {"estimate_s": round(need), "left_s": round(cap)}, "the visit's budget does not hold it"
        return None

    def stopped_upstream(self, sheet, label: str) -> list[str]:
        """The runs ``label`` builds on, however far back, that their time limit ended short of their steps."""
        seen, todo, stopped = set(), list(sheet[label].after), []
        while todo:
            a = todo.pop()
            if a in seen:
                continue
            seen.add(a)
            if (self.summary(a) or {}).get("stopped"):
                stopped.append(a)
            todo.extend(sheet[a].after)
        return stopped

    def summary(self, label: str) -> dict | None:
        """A run's summary.json in this visit's run tree, or None where it has none (yet)."""
        path = self.runs / label / "summary.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def skip(self, name: str, jobs: list[Job], part: dict, reason: str) -> None:
        self.record["parts"][name] = {"skipped": True, "jobs": len(jobs), **part}
        for j in jobs:
            self.record["jobs"][j.entry.label] = {"part": name, "status": "not_started", "reason": reason}
        self.save()

    # -- records ----------------------------------------------------------------------------------------------
    def save(self) -> None:
        self.record["elapsed_s"] = round(time.monotonic() - self.start, 1)
        out = Path(self.args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.record, indent=2) + "\n")
        if self.args.archive:
            archive(self.runs, self.logs, out, Path(self.args.archive))

    def run(self) -> int:
        self.record["environment"] = environment(self.args.device)
        self.save()
        vocab = MINI["tasks"][TASK]["model"]["vocab"] if self.args.scale == "mini" else None
        prepare(self.args.data_root, vocab)
        if self.args.calibrate or self.args.scale == "mini":
            steps = self.calibrate()
        else:  # sized beforehand, from an earlier visit's measured pace (the preset says which)
            steps = self.record["steps"] = self.args.steps or _preset_steps()
        sheet = self.sheet(steps)
        self.record["sheet"] = {"entries": len(sheet.runs), "of": {k: len(v) for k, v in sheet.of.items()}}
        for name in self.args.parts.split(","):
            jobs = [self.job(e) for e in sheet.runs.values() if part_of(e) == name and e.task == TASK]
            cap = min(self.cap(name) if name in CAPS else self.left(), self.left() - self.args.reserve)
            # the part's training runs end inside its cap, with fewer steps if they must, rather than be killed
            limit = time_limit(name, cap, MINI_CAPS if self.args.scale == "mini" else 1)
            if limit is not None:
                jobs = [replace(j, command=f"{j.command} train.time_limit={limit:g}") if j.entry.command == "train"
                        else j for j in jobs]
                self.record["parts"][name] = {"time_limit_s": limit}
            why = self.not_scratch(jobs, cap, sheet) if name == "scratch" else None
            if why is not None:
                self.skip(name, jobs, *why)
                continue
            self.run_part(name, jobs, cap)
            self.count_stopped(name, jobs)
            if name == "train":
                self.pace(jobs)
        self.record["ok_all"] = all(p.get("ok_all", False) for p in self.record["parts"].values())
        self.save()
        return 0 if self.record["ok_all"] else 1


def _preset_steps() -> int:
    from heads.presets import preset_for

    return int(preset_for(TASK, PRESET)["train"]["steps"])


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


WEIGHTS = (".safetensors", ".bin", ".pt")


def archive(runs: Path, logs: Path, record: Path, dest: Path) -> None:
    """The run tree's records (configs, summaries, metrics, analyses, tokenizers; no weights), the jobs' logs and
    the visit's record, written to ``dest`` atomically (a kill mid-write leaves the previous archive)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for top, name in ((runs, "runs"), (logs, "logs")):
            if top.is_dir():
                for path in sorted(top.rglob("*")):
                    if path.is_file() and not path.name.endswith(WEIGHTS):
                        tar.add(path, arcname=f"{name}/{path.relative_to(top)}")
        if record.is_file():
            tar.add(record, arcname=record.name)
    os.replace(tmp, dest)


# -- rendering ----------------------------------------------------------------------------------------------
def render(runs: Path, results: Path) -> int:
    """Each replication's tables, figures and ledger from ``runs``, then the merged ledger (``heads report`` and
    ``heads claims``, as the DAG's report rules call them). The sheet's labels do not depend on the steps."""
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", PRESET))
    ledgers = []
    for replication, labels in sheet.of.items():
        out = results / replication
        mine = [lb for lb in labels if sheet[lb].task == TASK]
        subprocess.run([sys.executable, "-m", "heads", "report", "--runs", str(runs), "--replication", replication,
                        "--tasks", TASK, "--labels", ",".join(mine), "--out", str(out)], cwd=ROOT, check=True)
        ledgers.append(str(out / "claims.csv"))
    subprocess.run([sys.executable, "-m", "heads", "claims", "--ledgers", *ledgers, "--replications",
                    str(ROOT / "replications"), "--preset", PRESET, "--out", str(results)], cwd=ROOT, check=True)
    return 0


def unpack(archive_path: Path, into: Path) -> Path:
    """A visit's archive unpacked (its run tree is ``into/runs``); refuses members outside ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive_path) as tar:
        tar.extractall(into, filter="data")
    return into


def summarize(archives: list[Path]) -> str:
    """Markdown of each visit from its archive: where and when it ran, each part's time and outcome, and each
    baseline's steps, pace and score (read from the runs' own summaries and metrics)."""
    lines = ["# GPU visits (benchmarks/gpu_evidence.py)", "",
             "Generated by `python benchmarks/gpu_evidence.py --summarize ARCHIVE...` from the records each visit "
             "brought back (`results/gpu/visits/`). Seconds are wall-clock on the device, jobs side by side.", ""]
    for path in archives:
        with tempfile.TemporaryDirectory() as tmp:
            root = unpack(path, Path(tmp))
            record = json.loads(next(root.glob("*.json")).read_text())  # the visit's record, beside runs/
            env = record.get("environment", {})
            lines += [f"## {path.name}", "",
                      f"{env.get('device_name', env.get('device'))}, torch {env.get('torch')} "
                      f"(CUDA {env.get('cuda')}), "
                      f"commit {str(env.get('git_commit'))[:12]}; budget {record.get('budget_s')} s, "
                      f"{record.get('elapsed_s')} s used; train.steps {record.get('steps')}.", "",
                      "| part | jobs | outcome | seconds | cap |", "| --- | --: | --- | --: | --: |"]
            for name, part in record["parts"].items():
                outcome = ", ".join(f"{k} {v}" for k, v in part.items() if k in
                                    ("ok", "failed", "timed_out", "skipped", "not_started"))
                if part.get("seconds_per_step"):
                    outcome += f"; {part['seconds_per_step']} s a step side by side"
                if part.get("time_limit_s"):
                    outcome += (f"; train.time_limit {part['time_limit_s']} s, "
                                f"{part.get('stopped_early', 0)} stopped by it")
                if part.get("skipped") is True:
                    outcome = "not started: " + (part.get("reason") or f"estimated {part.get('estimate_s')} s, "
                                                                       f"{part.get('left_s')} s left")
                lines.append(f"| {name} | {part.get('jobs')} | {outcome} | {part.get('seconds', '-')} | "
                             f"{part.get('cap_s', '-')} |")
            lines += ["", "| baseline | steps | pairs a step | s a step | BLEU (test, beam) | chrF | val loss |",
                      "| --- | --: | --: | --: | --: | --: | --: |"]
            for summary in sorted(root.glob("runs/mt/baseline/none/0.0/seed*/summary.json")):
                s = json.loads(summary.read_text())
                cfg = json.loads((summary.parent / "config.json").read_text())
                ev = s.get("eval") or {}
                steps = f"{s['steps']} of {s['stopped']['of_steps']}" if s.get("stopped") else s["steps"]
                lines.append(f"| {summary.parent.name} | {steps} | {cfg['data']['batch_size']} | "
                             f"{s['train_seconds'] / max(s['steps'], 1):.3f} | {s['value']:.2f} "
                             f"(beam {cfg['eval']['beams']}) | {ev.get('chrf', float('nan')):.1f} | "
                             f"{s['final_val_loss']:.3f} |")
            lines.append("")
    return "\n".join(lines)


def prepare(data_root: str, vocab: int | None = None) -> Path:
    """The visit's data and tokenizer, made here (the device has neither the corpus package nor time for it);
    where they exist, only checked. Made once before the seeds start, so they never race to make it."""
    from heads.data.prepare import prepare_for
    from heads.data.tokenizer import tokenizer
    from heads.resolve import resolve

    cfg = resolve(TASK, PRESET, overrides=[f"data.root={data_root}"] + ([f"model.vocab={vocab}"] if vocab else []))
    folder = prepare_for(TASK, cfg.data)
    tokenizer(folder, vocab_size=cfg.model.vocab)
    print(f"prepared {folder} with its {cfg.model.vocab}-token tokenizer")
    return folder


# What the device's image lacks or holds too old (its python3 is 3.12 with torch, tokenizers, sacrebleu, scipy,
# pandas; transformers 5.17, no datasets): carried as wheels at the versions installed here.
CARRIED = ("transformers", "datasets", "dill", "multiprocess")


def wheels(dest: Path = ROOT / ".whl") -> None:
    """Download the carried packages' wheels for the device's Python (3.12, manylinux x86-64) into ``dest``."""
    from importlib.metadata import version

    pins = [f"{name}=={version(name)}" for name in CARRIED]
    platforms = [x for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                 for x in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest), *pins],
                   check=True)
    print(f"wheels for the device in {dest}: {', '.join(pins)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (the visit) or cpu (the miniature)")
    p.add_argument("--scale", choices=["visit", "mini"], default="visit")
    p.add_argument("--runs", default="results/gpu/runs", help="the run tree (default results/gpu/runs)")
    p.add_argument("--out", default=f"results/bench/{RECORD}", help="the visit's record")
    p.add_argument("--archive", help="a .tar.gz of the records (no weights), rewritten after every part")
    p.add_argument("--data-root", default="resources/data", help="the prepared data (carried to the device)")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for every part together")
    p.add_argument("--reserve", type=float, default=RESERVE_S, help="seconds kept back for the last records")
    p.add_argument("--max-steps", type=int, help="at most this many steps (default the preset's)")
    p.add_argument("--steps", type=int, help="train this many steps (default the preset's)")
    p.add_argument("--calibrate", action="store_true",
                   help="size the steps from a short run of the seeds side by side instead (its early steps are "
                        "slower than the run's: the first visit's calibration overstated the pace threefold)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"the parts to run, in order (default {','.join(PARTS)})")
    p.add_argument("--parallel", type=int, default=PARALLEL, help="jobs side by side (the GPU holds them all)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per job")
    p.add_argument("--render", action="store_true", help="render --runs into --results instead of running")
    p.add_argument("--results", default="results/gpu", help="where --render writes the ledgers")
    p.add_argument("--prepare", action="store_true",
                   help="prepare the data and tokenizer the visit carries, and download the wheels it needs")
    p.add_argument("--from-archive", help="with --render: the run tree of this visit's archive instead of --runs")
    p.add_argument("--summarize", nargs="+", metavar="ARCHIVE", help="Markdown of these visits' archives")
    p.add_argument("--md", help="with --summarize: write it here")
    args = p.parse_args(argv)
    if args.prepare:
        prepare(args.data_root)
        wheels()
        return 0
    if args.summarize:
        text = summarize([Path(a) for a in args.summarize])
        Path(args.md).write_text(text + "\n") if args.md else print(text)
        return 0
    if args.render:
        if args.from_archive:  # the run tree a visit brought back, unpacked for the render only
            with tempfile.TemporaryDirectory() as tmp:
                return render(unpack(Path(args.from_archive), Path(tmp)) / "runs", Path(args.results))
        return render(Path(args.runs), Path(args.results))
    return Visit(args).run()


if __name__ == "__main__":
    sys.exit(main())
