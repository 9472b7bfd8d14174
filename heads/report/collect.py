"""Read the run tree ``OUT/runs`` (docs/RUN_LAYOUT.md) into tidy records, one per run.

What a run is comes from the identity it recorded (``run`` in its ``summary.json``
or ``config.json``, written from the workflow's run sheet), never from its
folder's name. Every run found is kept: one whose ``summary.json`` says
``diverged`` or that has no summary yet (``incomplete``) is a record with
``failed=True``, never silently dropped. Analyses are JSON files with the same
``run`` identity (kind ``ablation``, ``curve``, ``curve_at``, ``speed``,
``roles``, ``trivial``); unreadable files are recorded in :attr:`RunTree.problems`.

A record that contradicts itself is refused (:class:`RunTreeError`, one line naming the file and the field),
never averaged in: an identity whose label is not where the file lies (the label *is* its place: a run's folder,
an analysis's file without ``.json``), or a summary, config or analysis whose own ``task`` (or a summary whose
``metric``) is not its identity's task's. Files are read as UTF-8 with or without a byte-order mark.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from heads.events import Dropout, Prune, Redundancy, Wave
from heads.events import read as read_events
from heads.examples import FILE as EXAMPLES_FILE
from heads.examples import ExampleValues, path_beside
from heads.report.site_labels import site_kind
from heads.sheet.declare import fmt_ratio, run_label
from heads.task_metrics import TASK_METRIC, retained_defined
from heads.train.metrics_log import first_reaching

BASELINE = {"variant": "baseline", "arm": "none", "ratio": 0.0}
DEFAULT_TOL = 0.01  # time- and steps-to-target: 1 % above the baseline's median final validation loss


def target_loss(final_losses: Iterable[float | None], tol: float = DEFAULT_TOL) -> float | None:
    """``median(final val_loss over seeds) * (1 + tol)``; None when no seed has a final loss."""
    values = [float(v) for v in final_losses if v is not None]
    return statistics.median(values) * (1 + tol) if values else None


# how the report reads every text file (JSON, CSV, ledgers, Markdown): UTF-8, a byte-order mark (an editor's, a
# spreadsheet's) dropped; universal newlines read CRLF as LF
ENCODING = "utf-8-sig"


class RunTreeError(ValueError):
    """A record of a run tree that contradicts itself: one line naming the file and the field."""


def read_json(path: Path) -> tuple[Any, str | None]:
    """``(data, None)``, or ``(None, reason)`` when the file is absent or not valid JSON."""
    if not path.is_file():
        return None, f"{path.name} absent"
    try:
        return json.loads(path.read_text(encoding=ENCODING)), None
    except (OSError, ValueError) as exc:
        return None, f"{path.name} unreadable ({exc.__class__.__name__})"


def json_files(root: Path) -> list[Path]:
    """Every ``*.json`` under ``root``, sorted. Jobs still running write into the same tree: a checkpoint's
    temporary folder can vanish between being listed and being entered, which makes ``Path.rglob`` raise
    (Python 3.11 forgives only permission errors). ``os.walk`` skips a folder it can no longer read."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        found += [Path(folder) / f for f in files if f.endswith(".json")]
    return sorted(found)


def read_jsonl_tolerant(path: Path, problems: list[str] | None = None) -> list[dict]:
    """JSON lines; a line that is not a JSON object (torn by a kill mid-write, or damaged) is skipped, not fatal,
    and said in ``problems`` (the readers warn: a skipped line can change what is derived from the others)."""
    if not path.is_file():
        return []
    out = []
    for number_, line in enumerate(path.read_text(encoding=ENCODING, errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            out.append(obj)
        elif problems is not None:
            problems.append(f"{path} line {number_}: not a JSON object; skipped")
    return out


def number(value: Any) -> float | None:
    """A finite number as float, else None: the report reads every number of a file through this, its one
    check of finiteness (JSON written by Python may carry NaN or Infinity: a value, never a crash)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def as_list(value: Any) -> list:
    """``value`` if it is a list, else empty (a corrupt field where a list belongs reads as nothing)."""
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict:
    """``value`` if it is a mapping, else empty (a corrupt field where a mapping belongs reads as nothing)."""
    return value if isinstance(value, dict) else {}


def mean(values: Iterable[Any]) -> float | None:
    """The mean of the finite numbers among ``values`` (None where there are none)."""
    found = [v for v in values if number(v) is not None]
    return sum(found) / len(found) if found else None


@dataclass
class Run:
    """One run folder: where it sits in the tree, what it wrote, and its flat record."""

    task: str
    variant: str
    arm: str  # the arm's name on the run sheet (oneshot, dropout0.25, lam0.01, importance)
    ratio: float
    ratio_dir: str
    seed: int
    path: Path  # the run folder
    knob: float | None = None  # the number that orders arms (a penalty, a dropout rate), from the sheet
    strategy: str | None = None  # the registered strategy that ran (dropout_regime, l0, scratch, posthoc, ...)
    from_run: str | None = None  # the label of the run it starts from (a pruned model's source), from the sheet
    source: str = "config"  # the run config's model.source (a shipped name, a folder, a hub id)
    shards: int = 1  # the run config's eval.shards: above 1, its seed is a shard of the held-out text
    status: str = "incomplete"
    message: str | None = None
    summary: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    metrics: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    record: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    @cached_property
    def example_values(self) -> ExampleValues | None:
        """The evaluation's example-level columns (``examples.json``), read once; None where the run kept none."""
        return ExampleValues.read(self.path / EXAMPLES_FILE)

    @property
    def group(self) -> str:
        return f"{self.variant}/{self.arm}/{self.ratio_dir}"

    @property
    def name(self) -> str:
        return f"{self.task}/{self.group}/seed{self.seed}"


def _early_window(run: Run) -> int:
    """The last step of the early (warm-up) window: the step the run says its strategy first acted at (its
    summary's ``warmup_end``), else 10 % of its steps."""
    end = run.summary.get("warmup_end")
    if isinstance(end, int) and not isinstance(end, bool) and end > 0:
        return end
    total = number(run.summary.get("steps")) or (number(run.metrics[-1].get("step")) if run.metrics else 0) or 0
    return max(1, round(0.1 * total))


def _evaluations(metrics: list[dict]) -> list[tuple[int, float]]:
    """``(step, val_loss)`` of every record with a step and a finite validation loss, in logged order."""
    return [(int(r["step"]), float(r["val_loss"])) for r in metrics
            if isinstance(r.get("step"), int) and number(r.get("val_loss")) is not None]


def _at(evals: list[tuple[int, float]], step: float) -> tuple[int, float] | None:
    """The last evaluation at or before ``step``."""
    return max((e for e in evals if e[0] <= step), key=lambda e: e[0], default=None)


def late_improvement(metrics: list[dict]) -> float | None:
    """How much the validation loss still fell over the last half of training, relative to the final loss.

    A convergence check that needs no extra run: if loss falls like ``a + b t^-c`` the fall from T to 2T is
    ``2^-c`` times the fall from T/2 to T, so a run within x of this is within x of its 2x-longer loss."""
    evals = _evaluations(metrics)
    if len(evals) < 2 or evals[-1][0] <= 0:
        return None
    last_step, final = evals[-1]
    half = _at(evals, last_step / 2)
    if half is None or half[0] == last_step or final <= 0:
        return None
    return (half[1] - final) / final


def projected_improvement(metrics: list[dict]) -> float | None:
    """How much the validation loss would still fall if training ran twice as long, relative to the final loss,
    projected from the run's own evaluations: on a power law ``a + b t^-c`` each doubling of the steps falls by
    the same factor ``2^-c``, so the fall from T to 2T is the fall from T/2 to T times its ratio to the fall
    from T/4 to T/2. A per-seed convergence check for every arm without a longer run.

    A decelerating curve never falls more in the next doubling than in the last, so the ratio is capped at 1;
    where the earlier interval did not fall (evaluation noise) the ratio is unknown and the cap applies: the
    projection is then the last half's own fall, the most a decelerating curve could still lose. A last half
    that did not fall projects 0 (done). None with fewer than three evaluations at those points."""
    evals = _evaluations(metrics)
    if len(evals) < 3 or evals[-1][0] <= 0:
        return None
    last_step, final = evals[-1]
    half, quarter = _at(evals, last_step / 2), _at(evals, last_step / 4)
    if half is None or quarter is None or not quarter[0] < half[0] < last_step or final <= 0:
        return None
    late, early = half[1] - final, quarter[1] - half[1]
    if late <= 0:
        return 0.0
    ratio = min(late / early, 1.0) if early > 0 else 1.0
    return late * ratio / final


def _cpu_rate(metrics: list[dict], upto: int) -> float | None:
    """Tokens per CPU second over the steps up to ``upto`` (the last record there): throughput on the clock that
    jobs beside the run move less than its wall-clock; None for runs that logged no CPU time."""
    records = [r for r in metrics if isinstance(r.get("step"), int) and 0 < r["step"] <= upto]
    last = records[-1] if records else None
    cpu = number(last.get("train_cpu_seconds")) if last else None
    tokens = number(last.get("tokens")) if last else None
    return tokens / cpu if cpu and tokens else None


def _memory_at_prune(run: Run) -> dict[str, float | None]:
    """At the run's first prune after step 0, from the sizes its prune event logged: optimizer-state bytes after /
    before, and moment bytes per parameter byte after it (AdamW keeps two: more means stale moments of removed
    heads were kept). None where it pruned only at step 0 (no moment existed yet) or logged no sizes."""
    prunes = [e for e in read_events(run.events, Prune) if e.step > 0]
    first = min(prunes, key=lambda e: e.step) if prunes else None
    sizes = (first.optimizer_mb_before, first.optimizer_mb_after, first.param_mb_after) if first else (None,)
    if not all(sizes) or sizes[0] <= 0:
        return {"optimizer_mb_ratio": None, "moments_per_param": None}
    return {"optimizer_mb_ratio": sizes[1] / sizes[0], "moments_per_param": sizes[1] / sizes[2]}


def _load(run: Run, summary: Any, reason: str | None, problems: list[str] | None = None) -> None:
    run.metrics = read_jsonl_tolerant(run.path / "metrics.jsonl", problems)
    run.events = read_jsonl_tolerant(run.path / "events.jsonl", problems)
    if isinstance(summary, dict):
        run.summary = summary
        run.status = str(summary.get("status", "unknown"))
        run.message = summary.get("message")
        run.eval = summary.get("eval") if isinstance(summary.get("eval"), dict) else {}
        return
    run.status = "incomplete"
    run.message = reason if reason and "unreadable" in reason else "no summary.json (unfinished or killed)"


def _provenance(config: Any) -> tuple[str, int]:
    """``(model.source, eval.shards)`` of a run's config.json (``("config", 1)`` where it does not say)."""
    model = config.get("model") if isinstance(config, dict) else None
    evaluation = config.get("eval") if isinstance(config, dict) else None
    source = model.get("source") if isinstance(model, dict) else None
    shards = number(evaluation.get("shards")) if isinstance(evaluation, dict) else None
    return (str(source) if source else "config", int(shards) if shards and shards >= 1 else 1)


def _identity(data: Any) -> dict | None:
    """The run-sheet identity a file recorded (``run`` with at least label, kind, task and seed), else None."""
    ident = data.get("run") if isinstance(data, dict) else None
    if not isinstance(ident, dict) or not all(k in ident for k in ("label", "kind", "task", "seed")):
        return None
    return ident


def _identity_problem(ident: Mapping) -> str | None:
    """What in an identity is of the wrong type or contradicts its own label (None: nothing). The label is the
    place, the fields are what the record is grouped by: a run's label spells its task, variant, arm, ratio and
    seed (:func:`heads.sheet.run_label`), an analysis's ends in its seed; a field edited apart from the label
    would put the record in another group than its place says."""
    seed, ratio = ident.get("seed"), ident.get("ratio")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        return f"run.seed {seed!r} is not a whole number >= 0"
    if ratio is not None and (number(ratio) is None or not 0.0 <= float(ratio) <= 1.0):
        return f"run.ratio {ratio!r} is not a number in [0, 1]"
    label = str(ident.get("label", ""))
    if ident.get("kind") == "run" and all(isinstance(ident.get(k), str) for k in ("task", "variant", "arm")):
        spelled = run_label(ident["task"], ident["variant"], ident["arm"], float(ratio or 0.0), seed)
        if label != spelled:
            return (f"run.label {label!r} contradicts its task, variant, arm, ratio and seed, which spell "
                    f"{spelled!r}: a field edited apart from its place")
    last = label.rsplit("/", 1)[-1]
    if last.startswith("seed") and last[4:].isdigit() and int(last[4:]) != seed:
        return f"run.label {label!r} contradicts its run.seed {seed}: a field edited apart from its place"
    return None


def _contradiction(root: Path, file: Path, place: Path, ident: Mapping, data: Any, task: str) -> str | None:
    """What in ``file`` contradicts the identity ``ident`` that the record at ``place`` goes by (None: nothing):
    a label that is not where the file lies (the label is the place; a tree read from a folder above the run
    tree still ends in it), or the file's own ``task`` (a summary's ``metric``) not the identity's task's. An
    identity of ``task`` is what the record is averaged in with: a run of another task there would mix metrics."""
    name = file.relative_to(root).as_posix()
    wrong = _identity_problem(ident)
    if wrong is not None:
        return f"{name}: {wrong}; run that entry again"
    label = [p for p in str(ident.get("label", "")).split("/") if p]
    parts = place.relative_to(root).parts
    if not label or len(label) > len(parts) or tuple(parts[-len(label):]) != tuple(label):
        return (f"{name}: run.label {ident.get('label')!r} is not where it lies ({'/'.join(parts)}): a record moved "
                "or copied from another run; move it back, or run that entry again")
    if str(ident.get("task")) != task:
        return f"{name}: run.task {ident.get('task')!r} contradicts the task {task!r} it is read as"
    if not isinstance(data, dict):
        return None
    own = data.get("task")
    if isinstance(own, str) and own != task:
        return (f"{name}: task {own!r} contradicts its run.task {task!r}: a {own} record placed under a {task} "
                "label; move it to its own label, or run that entry again")
    metric, expected = data.get("metric"), TASK_METRIC.get(task)
    if isinstance(metric, str) and expected is not None and metric != expected:
        return (f"{name}: metric {metric!r} is not task {task!r}'s ({expected!r}): a record of another task placed "
                "under its label; move it to its own label, or run that entry again")
    return None


def _record(run: Run, metric: str | None, root: Path) -> dict:
    s, metrics = run.summary, run.metrics
    record: dict[str, Any] = {
        "task": run.task, "variant": run.variant, "arm": run.arm, "ratio": run.ratio, "seed": run.seed,
        "status": run.status, "failed": run.failed, "message": run.message,
        "path": run.path.relative_to(root).as_posix(),
        "metric": s["metric"] if isinstance(s.get("metric"), str) else metric,  # a corrupt one: the task's
    }
    record["value"] = number(s.get("value")) if "value" in s else number(run.eval.get(record["metric"] or ""))
    for key in ("final_val_loss", "tokens", "train_seconds", "train_cpu_seconds", "flops", "flops_per_token",
                "heads", "params"):
        record[key] = number(s.get(key))
    record["steps"] = number(s.get("steps", s.get("step")))
    record["late_improvement"] = late_improvement(metrics) if run.status == "ok" else None
    record["projected_improvement"] = projected_improvement(metrics) if run.status == "ok" else None
    if record["final_val_loss"] is None and run.status != "ok":
        vals = [r["val_loss"] for r in metrics if number(r.get("val_loss")) is not None]
        record["final_val_loss"] = vals[-1] if vals else None
    for key in ("train_seconds", "train_cpu_seconds"):
        if record[key] is None and metrics:
            record[key] = number(metrics[-1].get(key))
    record["heads_full"] = number(metrics[0].get("heads")) if metrics else None  # refined by RunTree (baseline)
    rates = [(r.get("step", 0), number(r.get("tokens_per_s"))) for r in metrics]
    record["tokens_per_s"] = mean(v for _, v in rates)
    early = _early_window(run)
    record["tokens_per_s_early"] = mean(v for step, v in rates if step <= early)
    record["cpu_tokens_per_s_early"] = _cpu_rate(metrics, early)
    mems = [number(r.get("peak_mem_mb")) for r in metrics]
    record["peak_mem_mb"] = max([m for m in mems if m is not None], default=None)
    record.update(_memory_at_prune(run))
    redundancy, dropout = read_events(run.events, Redundancy), read_events(run.events, Dropout)
    record["redundancy_ratio"] = redundancy[0].redundancy_ratio if redundancy else None
    record["redundancy_threshold"] = redundancy[0].threshold if redundancy else None
    record["attention_dropout"] = redundancy[0].attention_dropout if redundancy else (
        dropout[0].attention if dropout else None)
    record["prune_events"] = len(read_events(run.events, Prune))
    # the most alike pair of heads any redundancy probe saw: how near a threshold that pruned nothing came
    probed = [e.max_similarity for e in [*redundancy, *read_events(run.events, Wave)]]
    record["max_similarity"] = max([x for x in probed if x is not None], default=None)
    for key, value in sorted(run.eval.items()):
        if number(value) is not None:
            record[f"eval.{key}"] = number(value)
    return record


class RunTree:
    """All runs and analyses under one ``OUT/runs`` folder."""

    def __init__(self, root: str | Path, tasks: Iterable[str] | None = None, labels: Iterable[str] | None = None):
        """``tasks``: read only these tasks' runs and analyses; ``labels``: only these run-sheet entries. A
        replication renders from its own entries, so another replication's runs, finished or not when it
        renders, never leak into its tables or its ledger."""
        self.root = Path(root)
        self.only = None if tasks is None else frozenset(tasks)
        self.labels = None if labels is None else frozenset(labels)
        self.problems: list[str] = []
        self.reset_reads()
        self.runs: list[Run] = self._scan()
        self.reset_reads()  # what the scan itself looked up (targets, trivial baselines) is no reader's

    def reset_reads(self) -> None:
        """Start noting which records are read (:meth:`environments` with ``read_only``): a ledger names the
        environments of what its claims read, not of every run that happened to be in the tree."""
        self._read_runs: set[str] = set()
        self._read_kinds: set[tuple[str, str]] = set()

    # -- runs ----------------------------------------------------------------------------------------
    def _scan(self) -> list[Run]:
        """Every run that recorded its identity: from ``summary.json``, or from ``config.json`` while it has no
        summary yet (unfinished or killed); analyses are indexed by theirs."""
        runs: list[Run] = []
        self._analyses: dict[tuple[str, str], dict[str, dict]] = {}  # (task, kind) -> arm -> {seed|knob: data}
        self._paths: dict[tuple[str, str, str, int], Path] = {}  # (task, kind, arm, seed) -> the analysis's file
        self._knobs: dict[tuple[str, str, str], float | None] = {}
        if not self.root.is_dir():
            self.problems.append(f"{self.root}: no such run folder")
            return runs
        seen: set[Path] = set()
        for path in json_files(self.root):
            if path.parent in seen or path.name not in ("summary.json", "config.json") and "analysis" not in \
                    path.relative_to(self.root).parts:
                continue
            data, reason = read_json(path)
            if reason and "unreadable" in reason and path.name != "config.json":
                self.problems.append(f"{path.relative_to(self.root)}: {reason}")
            ident = _identity(data)
            if path.name == "summary.json" and ident is None and isinstance(data, dict):
                ident = _identity(read_json(path.parent / "config.json")[0])
            if ident is None:
                if path.name == "summary.json":
                    self.problems.append(f"{path.relative_to(self.root)}: records no run identity; skipped")
                continue
            task = str(ident["task"])
            if self.only is not None and task not in self.only or \
                    self.labels is not None and str(ident["label"]) not in self.labels:
                continue
            if ident["kind"] != "run":
                self._refuse(_contradiction(self.root, path, path.with_suffix(""), ident, data, task))
                self._index(ident, data, path)
                continue
            folder = path.parent
            if path.name == "config.json" and (folder / "summary.json").exists() and \
                    read_json(folder / "summary.json")[1] is None:
                continue  # the summary (read in its turn) speaks for the run; an unreadable one does not
            seen.add(folder)
            summary, why = (data, None) if path.name == "summary.json" else read_json(folder / "summary.json")
            if why and "unreadable" in why:  # read from its config.json instead, as an unfinished run: say so
                self.problems.append(f"{(folder / 'summary.json').relative_to(self.root)}: {why}; the run is "
                                     "read as unfinished")
            config = data if path.name == "config.json" else read_json(folder / "config.json")[0]
            self._check_run(folder, ident, summary, config, task)
            ratio = float(ident.get("ratio") or 0.0)
            strategy = (summary or {}).get("strategy") if isinstance(summary, dict) else None
            if strategy is None and isinstance(config, dict) and isinstance(config.get("strategy"), dict):
                strategy = config["strategy"].get("name")
            run = Run(task, str(ident.get("variant")), str(ident.get("arm")), ratio, fmt_ratio(ratio),
                      int(ident["seed"]), folder, number(ident.get("knob")), strategy,
                      str(ident["from_run"]) if ident.get("from_run") else None, *_provenance(config))
            _load(run, summary, why, self.problems)
            runs.append(run)
        metric = {t: self.metric(t, runs) for t in {r.task for r in runs}}
        for run in runs:
            run.record = _record(run, metric[run.task], self.root)
        self._value_change(runs)
        for task in sorted(metric):
            self._targets(task, [r for r in runs if r.task == task])
            self._over_trivial(task, [r for r in runs if r.task == task])
        runs.sort(key=lambda r: (r.task, r.variant, r.arm, r.ratio, r.seed))
        return runs

    @staticmethod
    def _refuse(problem: str | None) -> None:
        if problem is not None:
            raise RunTreeError(problem)

    def _check_run(self, folder: Path, ident: dict, summary: Any, config: Any, task: str) -> None:
        """Refuse a run whose summary or config contradicts the identity it is read by (:func:`_contradiction`);
        a config with an identity of its own is held to its place too (a summary copied over another run's)."""
        for name, data in (("summary.json", summary), ("config.json", config)):
            own = _identity(data)
            self._refuse(_contradiction(self.root, folder / name, folder, own or ident, data, task))

    @property
    def empty(self) -> bool:
        """Whether the tree holds no run and no analysis (of the tasks and labels read)."""
        return not self.runs and not self._analyses

    def _index(self, ident: dict, data: Any, path: Path) -> None:
        """An analysis: under (task, kind), its arm, then its seed (one file per arm for ``speed``)."""
        task, kind, arm = str(ident["task"]), str(ident["kind"]), str(ident.get("arm", "none"))
        self._analyses.setdefault((task, kind), {}).setdefault(arm, {})[int(ident["seed"])] = data
        self._knobs[(task, kind, arm)] = number(ident.get("knob"))
        self._paths[(task, kind, arm, int(ident["seed"]))] = path

    def analysis_examples(self, task: str, kind: str, arm: str, seed: int) -> dict | None:
        """The example-level record an analysis kept beside its result (``NAME.examples.json``: ``heads ablate``'s
        per-example statistic), or None where it kept none or it cannot be read."""
        path = self._paths.get((task, kind, arm, seed))
        if path is None:
            return None
        data, _ = read_json(path_beside(path))
        return data if isinstance(data, dict) and isinstance(data.get("columns"), dict) else None

    def environment_note(self, read_only: bool = False) -> str | None:
        """None when every run and analysis read names the same environment; else what differs (a table or
        ledger built from runs of several machines or package versions says so)."""
        from heads.env import describe_mix

        envs = list(self.environments(read_only).values())
        return describe_mix(envs) if envs else None

    def environments(self, read_only: bool = False) -> dict[str, dict | None]:
        """The environment each record names, by the record's path in the tree (runs and analyses), so ledgers
        of several replications can be merged without counting a shared run twice. ``read_only``: only the
        records read since :meth:`reset_reads` (runs selected, kinds of analysis looked up), so what other
        replications' runs happen to be in the tree never changes a ledger."""
        envs = {r.name: r.summary.get("environment") for r in self.runs if not r.failed
                and (not read_only or r.name in self._read_runs)}
        for (task, kind), arms in sorted(self._analyses.items()):
            if read_only and (task, kind) not in self._read_kinds:
                continue
            for arm, seeds in sorted(arms.items()):
                for seed, data in sorted(seeds.items()):
                    if isinstance(data, dict):
                        envs[f"{task}/analysis/{kind}/{arm}/seed{seed}"] = data.get("environment")
        return envs

    def reads(self) -> set[str]:
        """What was read since :meth:`reset_reads`: run names (``task/variant/arm/ratio/seedN``, failed ones
        too) and kinds of analysis (``task/analysis/kind``)."""
        return set(self._read_runs) | {f"{task}/analysis/{kind}" for task, kind in self._read_kinds}

    def _arms(self, task: str, kind: str) -> dict[str, dict]:
        self._read_kinds.add((task, kind))
        return self._analyses.get((task, kind), {})

    def knob(self, task: str, kind: str, arm: str) -> float | None:
        """The number an analysis arm was declared with (a penalty, a snapshot step)."""
        return self._knobs.get((task, kind, arm))

    @staticmethod
    def metric(task: str, runs: list[Run]) -> str | None:
        """The task's metric: from any summary of the task, else the default per task name."""
        for run in runs:
            if run.task == task and isinstance(run.summary.get("metric"), str) and run.summary["metric"]:
                return run.summary["metric"]
        return TASK_METRIC.get(task)

    def baselines_of(self, task: str) -> tuple[set[str], set[int]]:
        """The ``model.source`` and ``eval.shards`` values of ``task``'s baseline runs: what a claim's models are
        and what its seeds are (shards of one model's test text where above 1)."""
        runs = [r for r in self.runs if r.task == task and r.variant == "baseline"]
        return {r.source for r in runs}, {r.shards for r in runs}

    def baseline_target(self, task: str, tol: float | None = None, selector: Mapping | None = None) -> float | None:
        """The target loss of ``task``: median final val_loss of the (ok) baseline seeds times ``1 + tol``."""
        sel = {**BASELINE, **(selector or {})}
        finals = [r.record.get("final_val_loss") for r in self.select(task, **sel) if not r.failed]
        return target_loss(finals, DEFAULT_TOL if tol is None else tol)

    def _targets(self, task: str, runs: list[Run]) -> None:
        """Per task: time/steps-to-target against the baseline, and heads removed against its full count."""
        base = [r for r in runs if not r.failed and _matches(r, BASELINE)]
        target = target_loss([r.record.get("final_val_loss") for r in base])
        full = next((r.record["heads"] for r in base if r.record.get("heads")), None)
        full_layout = next((r.summary["head_layout"] for r in base if isinstance(r.summary.get("head_layout"), dict)),
                           None)
        for run in runs:
            run.record.update(reach_fields(run, target))
            if full is not None:
                run.record["heads_full"] = full
            h, h0 = run.record.get("heads"), run.record.get("heads_full")
            run.record["heads_removed_share"] = 1 - h / h0 if h is not None and h0 else None
            run.record.update(removed_by_kind(run.summary.get("head_layout"), full_layout))

    def _value_change(self, runs: list[Run]) -> None:
        """``value_change``: a pruned model's metric relative to the run it was pruned from, ``(value - source) /
        |source|`` (what pruning cost it; A3 compares that cost across models). None for other runs (a scratch
        run starts from a layout, a fine-tune from weights: neither is a cost) and where either value is
        missing."""
        by_label = {r.path.relative_to(self.root).as_posix(): r for r in runs}
        for run in runs:
            source = by_label.get(run.from_run or "")
            v = run.record.get("value")
            v0 = source.record.get("value") if source is not None and not source.failed else None
            ok = run.strategy == "posthoc" and not run.failed and v is not None and v0 is not None and v0 != 0
            # a relative change of a model that scores almost nothing is noise over noise, as a retained share is
            ok = ok and retained_defined(str(run.record.get("metric") or ""), v0)
            run.record["value_change"] = (v - v0) / abs(v0) if ok else None

    def _over_trivial(self, task: str, runs: list[Run]) -> None:
        """``over_trivial``: a run's metric minus the best trivial baseline of its task on the same seed's
        examples (``heads trivial``; word overlap for pair classification)."""
        trivial = self.analyses(task, "trivial")
        for run in runs:
            data = trivial.get(run.seed)
            found = as_dict(as_dict(data).get("baselines"))
            metric = run.record.get("metric") or ""
            scores = [x for b in found.values() if isinstance(b, dict) and (x := number(b.get(metric))) is not None]
            value = run.record.get("value")
            run.record["over_trivial"] = value - max(scores) if scores and value is not None else None

    def select(self, task: str, variant: str | None = None, arm: str | None = None,
               ratio: float | None = None, seed: int | None = None) -> list[Run]:
        """Runs of ``task`` matching the given exact values (None: any)."""
        want = {"variant": variant, "arm": arm, "ratio": ratio, "seed": seed}
        want = {k: v for k, v in want.items() if v is not None}
        found = [r for r in self.runs if r.task == task and _matches(r, want)]
        self._read_runs.update(r.name for r in found)
        return found

    def declares_run(self, task: str, variant: str, arm: str, ratio: float | None) -> bool:
        """Whether the run-sheet entries the tree was read by (``labels``: a replication's own at its preset)
        declare a run of ``task`` under ``variant`` and ``arm`` (patterns, as a selector gives them) at ``ratio``
        (None: any); True where the tree was read without labels, as nothing then says what was declared. A
        run's label is spelled from its identity (:func:`heads.sheet.run_label`, held to it when read), so an
        entry is one of ``task``'s runs where its label is that spelling of its own parts."""
        if self.labels is None:
            return True
        for label in self.labels:
            parts = label.split("/")
            if len(parts) != 5 or parts[0] != task or parts[1] == "analysis" or not parts[4].startswith("seed") \
                    or not parts[4][4:].isdigit():  # an analysis's label (heads.sheet.analysis_label) is no run's
                continue
            try:
                level = float(parts[3])
            except ValueError:
                continue
            if run_label(task, parts[1], parts[2], level, int(parts[4][4:])) == label and fnmatch.fnmatchcase(
                    parts[1], variant) and fnmatch.fnmatchcase(parts[2], arm) and (
                    ratio is None or same_ratio(level, ratio)):
                return True
        return False

    def declares_analysis(self, task: str, analysis: str, arm: str | None) -> bool:
        """Whether the run-sheet entries the tree was read by declare an analysis of ``task`` in the folder
        ``analysis`` (:func:`heads.sheet.analysis_label`: ``TASK/analysis/FOLDER[/ARM]/seedN``) whose arm matches
        the pattern ``arm`` (None: any, or an analysis without arms); True where the tree was read without labels."""
        if self.labels is None:
            return True
        for label in self.labels:
            parts = label.split("/")
            if len(parts) < 4 or parts[:3] != [task, "analysis", analysis]:
                continue
            if arm is None or (len(parts) == 5 and fnmatch.fnmatchcase(parts[3], arm)):
                return True
        return False

    def note_read(self, runs: list[Run]) -> list[Run]:
        """``runs``, noted as read: the environment note of a ledger names every record a claim read."""
        self._read_runs.update(r.name for r in runs)
        return runs

    def run(self, label: str) -> Run | None:
        """The run whose run-sheet label (its folder under the tree) is ``label``, noted as read."""
        found = next((r for r in self.runs if r.path.relative_to(self.root).as_posix() == label), None)
        if found is not None:
            self._read_runs.add(found.name)
        return found

    @property
    def tasks(self) -> list[str]:
        found = {r.task for r in self.runs} | {task for task, _ in self._analyses}
        return sorted(found if self.only is None else found & self.only)

    # -- analyses ------------------------------------------------------------------------------------
    def arm_names(self, task: str, kind: str) -> list[str]:
        """The arms one kind of analysis of ``task`` was declared with, sorted (heads.report.rows reads them)."""
        return sorted(self._arms(task, kind))

    def analyses(self, task: str, kind: str, arm: str = "none") -> dict[int, Any]:
        """``{seed: JSON}`` of one analysis arm, by seed (``none``: the kinds run once per model)."""
        return dict(sorted(self._arms(task, kind).get(arm, {}).items()))


RATIO_TOL = 1e-9  # ratios are written as decimals (0.3333): equal within this, whatever their float rounding


def same_ratio(a: float, b: float) -> bool:
    """Whether two pruning ratios name the same level (the one ratio comparison of the report)."""
    return abs(float(a) - float(b)) <= RATIO_TOL


def _matches(run: Run, want: Mapping[str, Any]) -> bool:
    return all(same_ratio(run.ratio, v) if k == "ratio" else getattr(run, k) == v for k, v in want.items())


def removed_by_kind(layout: Any, full: Mapping | None) -> dict:
    """``heads_removed_share.<kind>`` (self, causal, cross): the share of the full model's heads of that kind of
    site the run no longer has (Voita et al. count encoder self-attention heads alone)."""
    if not isinstance(layout, Mapping) or not full:
        return {}
    out = {}
    for kind in ("self", "causal", "cross"):
        total = sum(len(v) for s, v in full.items() if site_kind(s) == kind)
        if total:
            kept = sum(len(v) for s, v in layout.items() if site_kind(s) == kind and isinstance(v, list))
            out[f"heads_removed_share.{kind}"] = 1 - kept / total
    return out


def reach_fields(run: Run, target: float | None) -> dict:
    """``target``, ``time_to_target``/``steps_to_target`` (None if never), ``reached`` and the
    ``*_or_total`` fallbacks (the run's total time or steps when it never reached the target)."""
    # the first record at the target, found once: its wall-clock and CPU seconds (runs since train_cpu_seconds
    # was logged; the clock other jobs move less) and its step
    hit = first_reaching(run.metrics, "val_loss", target) if run.metrics and target is not None else None
    seconds, step = (hit.get("train_seconds"), hit.get("step")) if hit else (None, None)
    # the evaluation before the hit (none: the start): the target was crossed between the two, so a count is
    # known only to that bracket (the evaluation interval's resolution)
    before = _evaluation_before(run.metrics, hit) if hit else None
    reached = None if target is None or not run.metrics else seconds is not None
    total_s = run.record.get("train_seconds")
    total_steps = run.record.get("steps")
    cpu = number(hit.get("train_cpu_seconds")) if reached else None
    total_cpu = run.record.get("train_cpu_seconds")
    return {
        "target": target,
        "time_to_target": seconds,
        "steps_to_target": step,
        "cpu_time_to_target": cpu,
        "reached": reached,
        "time_to_target_or_total": seconds if reached else (total_s if reached is False else None),
        "steps_to_target_or_total": step if reached else (total_steps if reached is False else None),
        "cpu_time_to_target_or_total": cpu if reached else (total_cpu if reached is False else None),
        "time_to_target_from": (number(before.get("train_seconds")) or 0.0) if reached and before else (
            0.0 if reached else None),
        "steps_to_target_from": (number(before.get("step")) or 0) if reached and before else (0 if reached else None),
        "cpu_time_to_target_from": (number(before.get("train_cpu_seconds")) or 0.0) if cpu is not None and before
        else (0.0 if cpu is not None else None),
    }


def _evaluation_before(metrics: list[dict], hit: Mapping) -> dict | None:
    """The last record with a validation loss logged before ``hit`` (None: the hit is the first evaluation)."""
    before = None
    for record in metrics:
        if record is hit:
            return before
        if number(record.get("val_loss")) is not None:
            before = record
    return None
