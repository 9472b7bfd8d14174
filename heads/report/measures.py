"""Selectors: turn one side of a claim (``a:`` / ``b:`` in claims.yaml) into per-seed values.

A selector is a mapping with ``from`` (default ``run``) and the keys that
source needs; replications/README.md is the reference. Every selector yields a
:class:`SeedValues`: values keyed by seed (by repeat for ``speed`` of one model alone), the seeds whose
run diverged, and the reasons anything is missing, so one absent experiment
makes one claim inconclusive instead of crashing the report.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heads.events import Prune
from heads.events import read as read_events
from heads.paired import paired_ttests
from heads.report import decoding, speed_records
from heads.report.collect import Run, RunTree, as_dict, as_list, number, reach_fields, same_ratio
from heads.report.estimators import Share, site_kinds
from heads.report.kinds import KINDS, RUN_KEYS, SOURCES, Kind
from heads.report.rows import by_seed
from heads.report.site_labels import site_kind

TTT_FIELDS = {"time_to_target", "steps_to_target", "cpu_time_to_target"}
FROM_SOURCE = {"value_change"}  # run fields computed against the run a model was pruned from (RunTree)


# said where a claim still names a run's arm by its old key
RENAMED = " (a run's arm on the run sheet is named by arm:, as in runs.py)"


class SelectorError(ValueError):
    """A selector names an unknown source, measure or key (a mistake in claims.yaml, not in the data)."""


@dataclass
class SeedValues:
    """Per-seed values of one selector, with what went wrong on the way."""

    label: str
    values: dict[int, float] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # seeds whose run was meant to prune (selector ``pruned: true``) but removed no head: measured, yet they
    # say nothing about the strategy, so the ledger leaves them out and says why
    idle: dict[int, str] = field(default_factory=dict)
    # seeds whose value is an evaluation metric the run kept example-level values of: the metric over a resample
    # of unit indices (all units: None), and how many units there are (heads.examples)
    resample: dict[int, Callable[[Any], float]] = field(default_factory=dict)
    units: dict[int, int] = field(default_factory=dict)
    # seeds whose value is a share of countable units (heads, sites): ``(k, n)``, so a claim on which every seed
    # gives the same share can still be tested, by the exact binomial over the units (stats.decide_binomial)
    counts: dict[int, tuple[int, int]] = field(default_factory=dict)
    # seeds whose value is a count known only to its evaluation interval (steps or seconds to a target): the
    # ``(low, high)`` it lies in, so a claim is judged at that resolution (heads.report.claims.at_resolution)
    brackets: dict[int, tuple[float, float]] = field(default_factory=dict)


def against_yardstick(a: SeedValues, b: SeedValues) -> tuple[dict[int, float], list[str]]:
    """``(a - b) / |b|`` per seed of the yardstick ``b`` (run on fewer seeds, e.g. the baseline trained twice as
    long), and what kept any seed from being measured: a failure or gap of either side on *any* seed (a baseline
    seed that diverged makes the check unmeasured even where no yardstick ran: its claims could not use it
    either), or a yardstick seed ``a`` has no value for."""
    problems = list(a.failed.values()) + a.missing + list(b.failed.values()) + b.missing
    values = {}
    for seed, y in sorted(b.values.items()):
        if seed not in a.values:
            problems.append(f"seed {seed}: no value to compare with its yardstick")
        elif y == 0:
            problems.append(f"seed {seed}: the yardstick is 0")
        else:
            values[seed] = (a.values[seed] - y) / abs(y)
    return values, problems


def precondition_values(tree: RunTree, a: Mapping[str, Any], b: Mapping[str, Any] | None = None
                        ) -> tuple[dict[int, float], list[str]]:
    """A precondition's per-seed values and what kept any from being measured: ``a`` itself, or with a yardstick
    ``b``, ``(a - b) / |b|`` on the seeds ``b`` was run on (:func:`against_yardstick`)."""
    found = measure(tree, a)
    if b is None:
        return dict(sorted(found.values.items())), list(found.failed.values()) + found.missing
    return against_yardstick(found, measure(tree, b))


def check_selector(sel: Mapping[str, Any], where: str) -> None:
    """Raise :class:`SelectorError` for an unknown source, key or measure, or a key the source needs."""
    source = sel.get("from", "run")
    if source not in SOURCES:
        raise SelectorError(f"{where}: from: {source!r} is not one of {list(SOURCES)}")
    kind = KINDS.get(source)
    known = RUN_KEYS if kind is None else kind.keys
    unknown = sorted(set(sel) - known - {"from", "task"})
    if unknown:
        renamed = RENAMED if "strategy" in unknown else ""
        raise SelectorError(f"{where}: keys {unknown} are unknown for from: {source}; known: {sorted(known)}"
                            + renamed)
    for key in ("variant", "field") if kind is None else kind.required:
        if key not in sel:
            raise SelectorError(f"{where}: from: {source} needs {key!r}" + (
                " (the pruned model's arm)" if key == "arm" else ""))
    if kind is not None and sel.get("measure") not in kind.measures:
        raise SelectorError(f"{where}: measure: {sel.get('measure')!r} is not one of {list(kind.measures)}")
    if source == "shift" and sel["measure"] == "gap" and "dataset" not in sel:
        raise SelectorError(f"{where}: a gap needs the shifted dataset it is measured on")
    if "pruned" in sel and not isinstance(sel["pruned"], bool):
        raise SelectorError(f"{where}: pruned must be true or false, got {sel['pruned']!r}")
    if isinstance(sel.get("pick"), Mapping):
        if set(sel["pick"].values()) - {"min", "max"}:
            raise SelectorError(f"{where}: pick values must be 'min' or 'max'")
        # what a pick may order by: the keys naming this source's groups (an unknown one would be skipped, and
        # the claim left inconclusive for "several match" with no word on why)
        orderable = {"variant", "arm", "ratio"} if kind is None else {kind.arm} - {None, "step"}
        stray = sorted(set(sel["pick"]) - orderable)
        if stray:
            raise SelectorError(f"{where}: pick orders by {sorted(orderable)}, not {stray}" + (
                RENAMED if "strategy" in stray else ""))


def measure(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    """Evaluate one (checked) selector against the run tree: a run field, an analysis's per-seed estimator, or
    one of the two measures a per-seed estimator cannot give (speed's paired timings, the clock's time to
    target)."""
    source = sel.get("from", "run")
    if source == "run":
        return _run(tree, sel)
    if source == "speed":
        return _speed(tree, sel)
    if source == "decoding":
        return _decoding(tree, sel)
    if source == "clock" and sel["measure"].endswith("time_to_target_ratio"):
        return _time_to_target(tree, sel)
    if source == "ablation" and sel["measure"] in BUDGET_MEASURES:
        return _ablation_budget(tree, sel)
    return _analysis(tree, sel)


# single-head ablation as an effect size: the share of heads whose change in loss has its 95 % interval above the
# harmless budget (they matter), or wholly within +-budget (shown harmless), not only a count of p-values
BUDGET_MEASURES = ("above_budget_share", "within_budget_share")


def _budget_share(base: np.ndarray, ablated: np.ndarray, budget: float, how: str) -> float:
    """The share of rows of ``ablated`` ([heads, examples]) whose paired t-interval of the per-example change
    against ``base`` lies above ``budget`` times the mean baseline loss (``above``) or within +-that (``within``)."""
    from scipy import stats as st

    diff = ablated - base[None, :]
    n = diff.shape[1]
    if n < 2:
        return float("nan")
    mean, se = diff.mean(axis=1), diff.std(axis=1, ddof=1) / np.sqrt(n)
    half = float(st.t.ppf(0.975, n - 1)) * se
    bound = budget * float(np.mean(base))
    hits = mean - half > bound if how == "above_budget_share" else (mean - half > -bound) & (mean + half < bound)
    return float(np.mean(hits))


def _ablation_budget(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    """:data:`BUDGET_MEASURES` per seed, from the per-example losses ``heads ablate`` kept beside its result,
    recomputed on example resamples (the heads share one test set)."""
    task, how, budget = sel["task"], sel["measure"], float(sel.get("budget", 0.01))
    series = SeedValues(f"{task} ablation {how} (budget {budget:g})")
    kinds = site_kinds(sel)
    seeds = sorted(tree.analyses(task, "ablation", "none"))
    if not seeds:
        series.missing.append(f"{task}: no analysis/ablation/seed*.json")
    for seed in seeds:
        kept = tree.analysis_examples(task, "ablation", "none", seed)
        try:
            assert kept is not None and kept.get("test") == "loss"
            base = np.asarray(kept["columns"]["base"], dtype=np.float64)
            ablated = np.asarray(kept["columns"]["ablated"], dtype=np.float64)
            chosen = np.asarray([kinds is None or site_kind(str(site)) in kinds for site, _ in kept["heads"]])
            ablated = ablated[chosen]
        except (AssertionError, KeyError, TypeError, ValueError):
            series.missing.append(f"{task}: ablation seed {seed} kept no per-example losses")
            continue
        if ablated.ndim != 2 or not ablated.shape[0] or ablated.shape[1] != base.shape[0] or base.shape[0] < 2:
            series.missing.append(f"{task}: ablation seed {seed} has nothing to measure")
            continue
        share = _budget_share(base, ablated, budget, how)
        series.values[seed] = share
        series.counts[seed] = (round(share * ablated.shape[0]), ablated.shape[0])
        series.resample[seed] = (lambda idx, b=base, a=ablated: _budget_share(
            b if idx is None else b[idx], a if idx is None else a[:, idx], budget, how))
        series.units[seed] = int(base.shape[0])
    return series


# -- runs ----------------------------------------------------------------------------------------------
def _pick(groups: list[tuple], keys: Sequence[str], pick: Mapping[str, str],
          knob: Callable[[tuple], float | None]) -> list[tuple]:
    """Narrow the matching groups by ``pick`` ({key: min|max}): a number key by its value, a named arm by the
    number the run sheet declared it with (its ``knob``: a penalty, a dropout rate)."""
    for key, how in pick.items():
        if key not in keys or len(groups) < 2:
            continue
        i = keys.index(key)

        def order_of(g: tuple, i: int = i) -> float:
            value = g[i]
            n = value if isinstance(value, (int, float)) else knob(g)
            return math.nan if n is None else float(n)

        numbered = [g for g in groups if not math.isnan(order_of(g))]
        if numbered:
            best = (max if how == "max" else min)(order_of(g) for g in numbered)
            groups = [g for g in numbered if order_of(g) == best]
    return groups


def _run(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    task, variant, arm = sel["task"], str(sel["variant"]), str(sel.get("arm", "*"))
    ratio = sel.get("ratio")
    fld = str(sel["field"])
    label = f"{task}/{variant}/{arm}/{'*' if ratio is None else ratio} {fld}"
    series = SeedValues(label)
    runs = [r for r in tree.runs if r.task == task and fnmatch.fnmatchcase(r.variant, variant)
            and fnmatch.fnmatchcase(r.arm, arm) and (ratio is None or same_ratio(r.ratio, ratio))]
    if not runs:
        series.missing.append(f"no runs under {task}/{variant}/{arm}/{'*' if ratio is None else ratio}")
        return series
    groups = sorted({(r.variant, r.arm, r.ratio) for r in runs})
    knobs = {(r.variant, r.arm, r.ratio): r.knob for r in runs}
    groups = _pick(groups, ["variant", "arm", "ratio"], sel.get("pick") or {}, knobs.get)
    if len(groups) > 1:
        names = ", ".join(next(r.group for r in runs if (r.variant, r.arm, r.ratio) == g) for g in groups)
        series.missing.append(f"{task}: {len(groups)} run groups match ({names}); name one or add pick")
        return series
    (v, s, q), = groups
    tree.note_read(runs)  # the groups not picked were read too: which one is picked depends on them
    chosen = [r for r in runs if (r.variant, r.arm, r.ratio) == (v, s, q)]
    if fld in FROM_SOURCE:  # a field computed against the run it was pruned from reads that run as well
        for run in chosen:
            tree.run(run.from_run or "")
    if len({(r.variant, r.arm, r.ratio) for r in runs}) > 1:
        series.notes.append(f"picked {chosen[0].group}")
    series.label = f"{task}/{chosen[0].group} {fld}"
    target = None
    if fld in TTT_FIELDS:
        target = _target(tree, task, sel)
        if target is None:
            series.missing.append(f"{task}: no baseline final val_loss to set the target")
            return series
    not_reached = 0
    for run in chosen:
        if run.status == "diverged":
            series.failed[run.seed] = f"{run.name} diverged" + (f" ({run.message})" if run.message else "")
            continue
        if run.failed:
            series.missing.append(f"{run.name}: {run.status}" + (f" ({run.message})" if run.message else ""))
            continue
        value, reached, low = _run_field(run, fld, target)
        if value is None:
            series.missing.append(f"{run.name}: no {fld}")
            continue
        not_reached += reached is False
        series.values[run.seed] = value
        if low is not None:
            series.brackets[run.seed] = (low, value)
        _attach_examples(series, run, fld)
        if sel.get("pruned") and not _removed_heads(run):
            closest = run.record.get("max_similarity")
            series.idle[run.seed] = f"{run.name} removed no heads" + (
                f" (its most alike pair of heads: cosine {closest:.2f})" if closest is not None else "")
    if not_reached:
        series.notes.append(f"target not reached by {not_reached}/{len(chosen)} {v}/{s} runs (total used)")
    return series


def _target(tree: RunTree, task: str, sel: Mapping[str, Any]) -> float | None:
    """The target loss a selector's ``target`` names (``tol`` and the baseline's selector), else the default."""
    spec = dict(sel.get("target") or {})
    return tree.baseline_target(task, spec.pop("tol", None), spec)


def _attach_examples(series: SeedValues, run: Run, fld: str) -> None:
    """Where ``fld`` is the run's evaluation metric (``value``, ``eval.NAME``) and the run kept example-level
    values that give it, how to recompute it on a resample of units."""
    name = run.record.get("metric") if fld == "value" else fld.removeprefix("eval.") if fld.startswith(
        "eval.") else None
    values = run.example_values if name else None
    if values is None or not values.supports(str(name)):
        return
    series.resample[run.seed] = lambda idx, values=values, name=str(name): values.metric(name, idx)
    series.units[run.seed] = values.units


def _removed_heads(run: Run) -> bool:
    """Whether the run ended with fewer heads than the full model (post-hoc folders included); a run without
    a head count falls back to its prune events."""
    share = run.record.get("heads_removed_share")
    return share > 0 if share is not None else bool(run.record.get("prune_events"))


def _run_field(run: Run, fld: str, target: float | None) -> tuple[float | None, bool | None, float | None]:
    """A record field, whether the target was reached and, for a count to the target, the low end of the
    bracket it lies in (the evaluation before); time/steps-to-target fall back to the run's total when the
    target is never reached (no bracket: the total is only a lower bound)."""
    if fld in TTT_FIELDS:
        reach = reach_fields(run, target)
        low = number(reach.get(f"{fld}_from")) if reach["reached"] else None
        return reach[f"{fld}_or_total"], reach["reached"], low
    return number(run.record.get(fld)), None, None


# -- analyses: one seed's tidy rows (heads.report.rows) to one value ------------------------------------------
def _per_seed(tree_data: Mapping[int, Any], label: str, missing_text: str,
              fn: Callable[[Any], float | Share | None]) -> SeedValues:
    series = SeedValues(label)
    if not tree_data:
        series.missing.append(missing_text)
    for seed, data in sorted(tree_data.items()):
        value = fn(data)
        if value is None or not isinstance(value, Share) and not math.isfinite(value):
            series.missing.append(f"{label}: seed {seed} has nothing to measure")
        elif isinstance(value, Share):
            series.values[seed] = value.k / value.n
            series.counts[seed] = (value.k, value.n)
        else:
            series.values[seed] = value
    return series


# what a label says for a key the selector leaves out (the value its measure then reads)
LABEL_DEFAULTS = {"field": "confidence", "pooling": "mean", "space": "value", "dataset": "in domain", "model": "model"}


def _label(how: Kind, sel: Mapping[str, Any], arm: str) -> str:
    kinds = site_kinds(sel)
    where = f"ratio {sel['ratio']}" if "ratio" in sel else f"up to {sel['upto']}" if "upto" in sel else ""
    sites = "" if kinds is None else f" ({'/'.join(sorted(kinds))} sites)"
    return how.label.format(**{**LABEL_DEFAULTS, **{k: v for k, v in sel.items() if v is not None}, "arm": arm,
                               "where": where, "sites": sites}).strip()


def _arm(tree: RunTree, task: str, kind: str, how: Kind, sel: Mapping[str, Any]
         ) -> tuple[str, str | None, str | None]:
    """``(arm, note, missing)``: the one arm of analysis ``kind`` the selector names, a note when it was
    picked out of several, or why there is not exactly one."""
    if how.arm is None:
        return "none", None, None
    names = tree.arm_names(task, kind)
    if how.arm == "step":  # snapshots in training order, the trained model (no knob) last
        step = sel.get("step", "last")
        names = sorted(names, key=lambda a: (tree.knob(task, kind, a) is None, tree.knob(task, kind, a) or 0.0, a))
        arms = names[:1] if step == "first" else names[-1:] if step == "last" else [
            a for a in names if tree.knob(task, kind, a) == float(step)]
        if not arms:
            return "", None, f"{task}: no analysis/{kind}/step*/ (step {step})"
        return arms[0], f"{step}: {arms[0]}" if step in ("first", "last") else None, None
    pattern = str(sel.get(how.arm, how.default))
    arms = [g[0] for g in _pick([(n,) for n in names if fnmatch.fnmatchcase(n, pattern)], [how.arm],
                                sel.get("pick") or {}, lambda g: tree.knob(task, kind, g[0]))]
    if len(arms) != 1:
        return pattern, None, (f"{task}: no analysis/{kind}/{pattern}/seed*.json" if not arms else
                               f"{task}: {kind} of {', '.join(sorted(arms))} match; name one or add pick")
    return arms[0], None if arms[0] == pattern else f"picked {arms[0]}", None


def _analysis(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    """A selector over one analysis arm: its value on each seed that wrote one."""
    task, kind = sel["task"], sel["from"]
    how = KINDS[kind]
    arm, note, missing = _arm(tree, task, kind, how, sel)
    label = _label(how, sel, arm or str(sel.get("step")))
    if missing:
        return SeedValues(label, missing=[missing])
    if how.reads_json:  # a curve's own JSON: its measures read fields the tidy rows leave out
        data = {s: d for s, d in tree.analyses(task, how.analysis, arm).items() if isinstance(d, dict)
                and isinstance(d.get("points"), list)}
    else:
        data = by_seed(tree, kind, task, arm)
    value = how.value
    assert value is not None, kind  # measure() routes the kinds without a per-seed estimator elsewhere
    series = _per_seed(data, label, f"{task}: no analysis/{how.analysis}/{'' if arm == 'none' else arm + '/'}"
                                    "seed*.json", lambda d: value(d, sel))
    series.notes += [note] if note else []
    if kind == "ablation" and sel["measure"] == "significant_share" and sel.get("alpha") is not None:
        for seed in list(series.values):
            _attach_ablation_examples(series, seed, tree.analysis_examples(task, kind, arm, seed), sel)
    if kind == "mask" and sel["measure"] == "loss":
        for seed in list(series.values):
            _attach_mask_examples(series, seed, tree.analysis_examples(task, kind, arm, seed), sel)
    return series


def _attach_mask_examples(series: SeedValues, seed: int, kept: Mapping[str, Any] | None,
                          sel: Mapping[str, Any]) -> None:
    """Where ``heads mask`` kept its per-window losses, the mask's loss recomputed on a resample of the *texts*
    the windows come from (a cluster bootstrap: windows cut from one article are not independent), the same
    texts for every replicate and both sides of a claim."""
    if kept is None:
        return
    unit, ratio, order = str(sel.get("unit", "head")), sel.get("ratio"), sel.get("order")
    try:
        cols = kept["columns"]
        clusters = np.asarray(cols["cluster"])
        tokens = np.asarray(cols["tokens"], dtype=np.float64)
        if unit == "none":
            losses = np.asarray(cols["base"], dtype=np.float64)
        else:
            at = next(i for i, (u, o, r) in enumerate(kept["rows"])
                      if u == unit and abs(float(r) - float(ratio)) < 1e-9 and order in (None, o))
            losses = np.asarray(cols["masked"][at], dtype=np.float64)
    except (KeyError, TypeError, ValueError, StopIteration):
        return
    if not (clusters.shape == tokens.shape == losses.shape) or tokens.sum() <= 0:
        return
    texts = np.unique(clusters)
    members = [np.flatnonzero(clusters == t) for t in texts]

    def loss(idx: Any) -> float:
        if idx is None:
            return float(losses.sum() / tokens.sum())
        windows = np.concatenate([members[i] for i in idx])
        return float(losses[windows].sum() / tokens[windows].sum())

    if abs(loss(None) - series.values[seed]) > 1e-6 * max(1.0, abs(series.values[seed])):
        return  # not the windows the result was computed on: keep the seed-level test
    series.resample[seed] = loss
    series.units[seed] = len(texts)


def _attach_ablation_examples(series: SeedValues, seed: int, kept: Mapping[str, Any] | None,
                              sel: Mapping[str, Any]) -> None:
    """Where the ablation kept its per-example statistic, the significant share recomputed on a resample of the
    examples: every head's paired test redone on the same resampled examples (they share one test set, so the
    share's uncertainty is the examples', not that of heads as independent trials)."""
    if kept is None or sel.get("test") is not None and kept.get("test") != sel["test"]:
        return
    try:
        cols = kept["columns"]
        base = np.asarray([np.nan if v is None else v for v in cols["base"]], dtype=np.float64)
        ablated = np.asarray([[np.nan if v is None else v for v in row] for row in cols["ablated"]],
                             dtype=np.float64)
        sites = [str(site) for site, _ in kept["heads"]]
        tol = float(kept.get("noise_tol", 0.0))
    except (KeyError, TypeError, ValueError):
        return
    kinds = site_kinds(sel)
    chosen = np.asarray([kinds is None or site_kind(s) in kinds for s in sites], dtype=bool)
    if ablated.shape != (len(sites), base.shape[0]) or not chosen.any():
        return
    ablated, alpha, full = ablated[chosen], float(sel["alpha"]), series.values[seed]

    def share(idx: Any) -> float:
        at = slice(None) if idx is None else idx
        return float(np.mean(paired_ttests(base[at], ablated[:, at], tol) < alpha))

    if abs(share(None) - full) > 1e-9:
        return  # not the examples the rows were tested on (an older or foreign file): keep the seed-level test
    series.resample[seed] = share
    series.units[seed] = int(base.shape[0])


# -- speed ---------------------------------------------------------------------------------------------
def _speed(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    task, how = sel["task"], sel["measure"]
    ratio, batch = float(sel.get("ratio", 0.5)), sel.get("batch")
    label = f"{task} speed {how} ratio {ratio:g}" + (f" batch {batch}" if batch is not None else "")
    per_seed = by_seed(tree, "speed", task, "none")
    if not per_seed:
        return SeedValues(label, missing=[f"{task}: no analysis/speed/seed*.json"])
    found = speed_records.replicates(per_seed, how, ratio, batch)
    return SeedValues(label, found.values, missing=[f"{label}: {m}" for m in found.missing], notes=found.notes)


# -- cached decoding -------------------------------------------------------------------------------------------
def _decoding(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    """One variant's paired rounds against the unpruned model's (``heads decode-speed``): with one job, a value
    per round; with several (seeds of the rounds' shuffle), each job's mean over its rounds."""
    task, how, model, phase = sel["task"], sel["measure"], str(sel["model"]), str(sel["phase"])
    batch, context = sel.get("batch"), sel.get("context")
    label = f"{task} decoding {model} {phase} {how} batch {batch}" + (f" context {context}" if context else "")
    series = SeedValues(label)
    jobs = {(arm, seed): data for arm in tree.arm_names(task, "decoding")
            for seed, data in tree.analyses(task, "decoding", arm).items() if isinstance(data, dict)}
    if not jobs:
        series.missing.append(f"{task}: no analysis/decoding/*/seed*.json")
        return series
    per_job: dict[int, list[float]] = {}
    for (arm, seed), data in sorted(jobs.items()):
        rows = [r for r in as_list(data.get("rows")) if isinstance(r, dict)]
        found = decoding.matching(rows, model, phase, batch, context)
        if len(found) != 1:
            why = "none" if not found else f"{len(found)} (contexts {sorted({r.get('context') for r in found})}: " \
                                           "name one)"
            series.missing.append(f"{label}: {arm} seed {seed} has {why} such rows")
            continue
        ref = decoding.reference_of(rows, found[0], str(data.get("reference", "full")))
        values = decoding.per_round(found[0], ref, how) if ref is not None else []
        if not values:
            series.missing.append(f"{label}: {arm} seed {seed}: no paired rounds (or no bound) to measure")
            continue
        per_job[seed] = values
    if len(per_job) == 1:
        series.values = dict(enumerate(next(iter(per_job.values()))))
        series.notes.append(decoding.PER_ROUND)
    elif per_job:
        series.values = {seed: float(np.mean(v)) for seed, v in per_job.items()}
        series.notes.append("n counts decoding jobs, each the mean over its paired rounds")
    return series


# -- the interleaved training-step clock --------------------------------------------------------------------
def _first_prune_step(run: Run) -> int | None:
    steps = [e.step for e in read_events(run.events, Prune)]
    return min(steps) if steps else None


def _weighed(steps: float, base_steps: float, first_prune: int, step_ratio: float) -> float:
    """Pruned run's time to the target over the baseline's, in baseline step times: the steps before its first
    prune at the baseline's step time, the rest at the pruned model's (``step_ratio``)."""
    full = min(first_prune, steps)
    return (full + (steps - full) * step_ratio) / base_steps


def _time_to_target(tree: RunTree, sel: Mapping[str, Any]) -> SeedValues:
    """Training-step times measured interleaved in one job (``heads clock``) against the separately trained runs'
    step counts: the pruned run's steps to the target (the baseline's final loss + ``target.tol``), those before
    its first prune at the baseline's step time and the rest at the pruned model's, over the baseline's steps to
    the target (training steps alone: evaluation passes are left out). Step counts come from the runs and are
    exact; only the step times are clock."""
    task, how, arm = sel["task"], sel["measure"], str(sel["arm"])
    label = f"{task} clock {arm} {sel.get('model', 'model')} {how}"
    data = {seed: d for seed, d in tree.analyses(task, "clock", arm).items() if isinstance(d, dict)}
    series = SeedValues(label)
    if not data:
        series.missing.append(f"{task}: no analysis/clock/{arm}/seed*.json")
        return series
    target = _target(tree, task, sel)
    if target is None:
        series.missing.append(f"{task}: no baseline final val_loss to set the target")
        return series
    ratio_key = "cpu_step_ratio" if how.startswith("cpu_") else "step_ratio"
    not_reached = 0
    for seed, d in sorted(data.items()):
        ident = d.get("run") if isinstance(d.get("run"), dict) else {}
        pruned = tree.run(str(ident.get("from_run")))
        base = next(iter(tree.select(task, variant="baseline", arm="none", ratio=0.0, seed=seed)), None)
        step_ratio = number(as_dict(as_dict(d.get("models")).get("model")).get(ratio_key))
        if pruned is None or base is None or pruned.failed or base.failed or step_ratio is None:
            series.missing.append(f"{label}: seed {seed} lacks its pruned run, its baseline or its step ratio")
            continue
        reach = reach_fields(pruned, target)
        steps, not_reached = reach["steps_to_target_or_total"], not_reached + (reach["reached"] is False)
        base_steps = reach_fields(base, target)["steps_to_target_or_total"]
        at = _first_prune_step(pruned)
        if steps is None or not base_steps or at is None:
            series.missing.append(f"{label}: seed {seed}: no steps to the target, or no prune, to weigh")
            continue
        series.values[seed] = _weighed(steps, base_steps, at, step_ratio)
        lows = [number(r.get("steps_to_target_from")) if r["reached"] else None
                for r in (reach, reach_fields(base, target))]
        if None not in lows and lows[1] > 0:  # both step counts known to their evaluation interval
            series.brackets[seed] = (_weighed(lows[0], base_steps, at, step_ratio),
                                     _weighed(steps, lows[1], at, step_ratio))
    if not_reached:
        series.notes.append(f"target not reached by {not_reached}/{len(data)} {arm} runs (their total steps used)")
    return series
