"""Evaluate the claims of ``replications/*/claims.yaml`` against a run tree: ``OUT/CLAIMS.md`` and ``OUT/claims.csv``.

One row per claim, always: a claim whose experiments are missing is
*inconclusive* with the reason, one whose runs diverged is *failed*, one the
tiny scale cannot address is *not tested*, one on a task its replication runs
none of at the preset, or reading an arm the preset's run sheet does not
declare, is *not run at this preset*; nothing in the data crashes the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from heads.io import write_json, write_text
from heads.report.baselines import baselines_table
from heads.report.collect import RunTree
from heads.report.facts import fill
from heads.report.fmt import Table, fmt
from heads.report.kinds import KINDS
from heads.report.measures import SeedValues, measure, precondition_values
from heads.report.robustness import FRAGILE, NOT_MEASURED, robustness
from heads.report.spec import Claim, Precondition
from heads.report.stats import (
    ALPHA,
    AT_RESOLUTION,
    FAILED,
    INCONCLUSIVE,
    LEVEL,
    METHOD,
    METHOD_BINOMIAL,
    METHOD_EXAMPLES,
    MIN_SEEDS,
    NOT_RUN,
    NOT_SUPPORTED,
    NOT_TESTED,
    NOT_YET,
    SUPPORTED,
    VERDICTS,
    Decision,
    Estimate,
    clopper_pearson,
    decide,
    decide_at_resolution,
    decide_binomial,
    decide_equivalence,
    decide_exact,
    effect_size,
    estimate,
    holm,
    two_level,
)

CSV_COLUMNS = ["claim", "replication", "verdict", "effect", "ci_low", "ci_high", "paper_value", "n_seeds", "method",
               "p_value", "p_adjusted", "precondition"]
EXTRA_COLUMNS = ["task", "quantity", "condition", "effect_size", "per_seed", "note", "robustness"]
MAX_REASONS = 3
RESAMPLES = 1000  # example resamples of a two-level interval (sacrebleu's default for its paired bootstrap)
RESAMPLE_SEED = 0  # the same resamples on every render: identical inputs give identical bytes


@dataclass
class ClaimResult:
    """A claim's verdict with the estimate behind it."""

    claim: Claim
    verdict: str
    estimate: Estimate = field(default_factory=lambda: Estimate(0, None, None, None, None))
    effect_size: float | None = None
    per_seed: dict[int, float] = field(default_factory=dict)
    note: str = ""
    p_value: float | None = None
    precondition: str = ""
    robustness: str = NOT_MEASURED  # what a perturbation imitating another machine did to this verdict
    method_used: str = ""  # a method other than the claim's test over seeds (the exact binomial on equal counts)
    p_adjusted: float | None = None  # p_value adjusted over the replication's tests (:func:`adjust`)

    @property
    def fragile(self) -> bool:
        return self.robustness.startswith(FRAGILE)

    @property
    def method(self) -> str:
        if self.claim.not_tested or self.estimate.n == 0:
            return ""
        if self.method_used:
            return self.method_used
        return (METHOD_EXAMPLES if self.estimate.examples else METHOD)[self.claim.test]


def _effect(claim: Claim, x: float, y: float | None) -> float | None:
    """One seed's effect: a alone, a - b, (a - b) / |b| (``relative``) or a / b; None where b is 0 and a ratio
    or relative change is asked for."""
    if y is None:
        return x
    if claim.kind == "paired_ratio" or claim.relative:
        if y == 0:
            return None
        return x / y if claim.kind == "paired_ratio" else (x - y) / abs(y)
    return x - y


def _combine(claim: Claim, a: SeedValues, b: SeedValues | None) -> tuple[dict[int, float], list[str]]:
    """Per-seed effect (:func:`_effect`), paired by seed; the second list says which seeds could not be paired or
    had no defined effect."""
    if b is None:
        return dict(a.values), []
    unmeasured = []
    only_a, only_b = sorted(set(a.values) - set(b.values)), sorted(set(b.values) - set(a.values))
    if only_a:
        unmeasured.append(f"seeds {only_a} only in a")
    if only_b and not claim.seeds_of_a:
        unmeasured.append(f"seeds {only_b} only in b")
    out = {}
    for key in sorted(set(a.values) & set(b.values)):
        effect = _effect(claim, a.values[key], b.values[key])
        if effect is None:
            what = "ratio" if claim.kind == "paired_ratio" else "relative change"
            unmeasured.append(f"seed {key}: b is 0, no {what}")
            continue
        out[key] = effect
    return out, unmeasured


def example_replicates(claim: Claim, seeds: Sequence[int], a: SeedValues, b: SeedValues | None) -> np.ndarray | None:
    """The seed-mean effect recomputed on :data:`RESAMPLES` resamples of the evaluation units, the same resample
    for every seed and both arms (they are scored on the same examples, so the pairing holds); None unless every
    seed of every side kept example-level values of the same units, or where a resample leaves an effect
    undefined."""
    sides = [a] if b is None else [a, b]
    if len(seeds) < 2 or any(seed not in s.resample for s in sides for seed in seeds):
        return None
    units = {s.units[seed] for s in sides for seed in seeds}
    if len(units) != 1:
        return None
    m = units.pop()
    rng = np.random.default_rng(RESAMPLE_SEED)
    replicates = np.empty(RESAMPLES)
    for r in range(RESAMPLES):
        idx = rng.integers(0, m, m)
        effects = [_effect(claim, a.resample[seed](idx), None if b is None else b.resample[seed](idx))
                   for seed in seeds]
        if any(e is None or not np.isfinite(e) for e in effects):
            return None
        replicates[r] = float(np.mean(effects))
    return replicates


def _estimate(claim: Claim, per_seed: dict[int, float], a: SeedValues, b: SeedValues | None) -> Estimate:
    """Two-level where the runs kept example-level values (:func:`example_replicates`), else over seeds alone."""
    values = list(per_seed.values())
    # seeds that are shards of the examples already sample them (Claim.seeds_are), unless every seed was scored on
    # the same examples (Claim.common_test: replicates of a procedure on one test set)
    replicates = example_replicates(claim, sorted(per_seed), a, b) if len(values) >= 2 and (
        not claim.seeds_are or claim.common_test) else None
    return estimate(values) if replicates is None else two_level(values, replicates)


def _short(reasons: Sequence[str]) -> str:
    unique = list(dict.fromkeys(reasons))
    text = "; ".join(unique[:MAX_REASONS])
    return text + (f" (+{len(unique) - MAX_REASONS} more)" if len(unique) > MAX_REASONS else "")


def _values(values: Sequence[float]) -> str:
    """Per-seed values in words: one number, or the mean with the range."""
    if len(values) == 1:
        return f"{values[0]:.4g} (one seed)"
    if min(values) == max(values):
        return f"{values[0]:.4g} on every seed"
    return f"mean {sum(values) / len(values):.4g}, seeds {min(values):.4g} to {max(values):.4g}"


def direct_on_every_seed(tree: RunTree, direct: Precondition) -> bool:
    """Whether a direct test's yardstick (``b``: the baseline trained twice as long) ran on every seed its ``a``
    has (a seed whose run failed counts as had: the test then says it could not be measured)."""
    a, b = measure(tree, direct.a), measure(tree, direct.b)
    seeds = set(a.values) | set(a.failed)
    return bool(seeds) and seeds <= set(b.values) | set(b.failed)


def _calibrated(tree: RunTree, pre: Precondition, per_seed: dict[int, float], problems: list[str]
                ) -> tuple[dict[int, float], str]:
    """``per_seed`` (a projection) times, seed by seed, what the direct test measured on that seed over what the
    same projection said of the direct test's run (``calibrate.projected``), and the words saying so; as it is
    where the direct test did not run on every seed."""
    direct = pre.direct
    if pre.calibrate.get("pooled") and direct is not None:
        return _pooled(tree, pre, per_seed, problems)
    if direct is None or not direct_on_every_seed(tree, direct):
        return per_seed, f" (uncalibrated: {direct.name if direct else 'the direct test'} did not run on every seed)"
    measured, more = precondition_values(tree, direct.a, direct.b)
    projected, most = precondition_values(tree, pre.calibrate["projected"])
    problems += more + most
    out = {}
    for seed, value in per_seed.items():
        if seed not in measured or seed not in projected:
            problems.append(f"seed {seed}: no direct test and projection of the same seed to calibrate by")
        elif projected[seed] <= 0:
            problems.append(f"seed {seed}: the projection it is calibrated by is {projected[seed]:.3g}, no scale")
        else:
            out[seed] = value * measured[seed] / projected[seed]
    scale = [measured[s] / projected[s] for s in out]
    return out, (f" (calibrated by {direct.name}: each seed's projection times its baseline's direct fall over "
                 f"its baseline's projected fall, {min(scale):.3g} to {max(scale):.3g})" if scale else "")


def _pooled(tree: RunTree, pre: Precondition, per_seed: dict[int, float], problems: list[str]
            ) -> tuple[dict[int, float], str]:
    """``per_seed`` (a projection) times one scale for every seed: the mean, over the seeds the direct test ran
    on, of its measured fall over the same projection of its run (``calibrate: {pooled: true}``, where the longer
    run trains on fewer seeds than the claim reads: the other seeds are taken to err as those did)."""
    direct = pre.direct
    measured, more = precondition_values(tree, direct.a, direct.b)
    projected, most = precondition_values(tree, pre.calibrate["projected"])
    problems += more + most
    scales = [measured[s] / projected[s] for s in sorted(measured) if s in projected and projected[s] > 0]
    if not scales:
        problems.append(f"no seed with both {direct.name} and a positive projection of its run to calibrate by")
        return {}, ""
    scale = sum(scales) / len(scales)
    seeds = ", ".join(str(s) for s in sorted(measured) if s in projected and projected[s] > 0)
    return {s: v * scale for s, v in per_seed.items()}, (
        f" (calibrated by {direct.name} on seed{'s' if len(scales) > 1 else ''} {seeds}: every seed's projection "
        f"times {scale:.3g}, that run's direct fall over its projected fall)")


def check_preconditions(claim: Claim, tree: RunTree) -> tuple[str, str | None]:
    """``(column text, verdict or None)``: *not tested* when a precondition fails, *inconclusive* when one cannot
    be measured, None when all hold (or none is declared, or only ones that guard a single verdict are not met:
    :func:`guarded_preconditions`)."""
    text, blocked, _ = guarded_preconditions(claim, tree)
    return text, blocked


def guarded_preconditions(claim: Claim, tree: RunTree) -> tuple[str, str | None, dict[str, str]]:
    """:func:`check_preconditions` and, third, what a precondition that guards one verdict only (``guards:``)
    turns that verdict into when the claim's test gives it: *not tested* when one is not met, *inconclusive*
    when one cannot be measured (any other verdict stands). Only preconditions without ``guards`` block the
    claim whatever its test gives."""
    if not claim.requires:
        return ("none needed" if claim.declared else "none declared"), None, {}
    met, failed, unmeasured = [], [], []
    guarded: dict[str, str] = {}
    for pre in claim.requires:
        only = f" (blocks {pre.guards} only)" if pre.guards else ""
        try:
            # a projection yields to the direct test where that one measured every seed: it only stood in for it
            if pre.superseded_by and pre.direct is not None and direct_on_every_seed(tree, pre.direct):
                met.append(f"{pre.what}: not needed, {pre.direct.name} measured every seed directly")
                continue
            per_seed, problems = precondition_values(tree, pre.a, pre.b)
            how = ""
            if pre.calibrate:
                per_seed, how = _calibrated(tree, pre, per_seed, problems)
            values = list(per_seed.values())
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            unmeasured.append(f"{pre.what}: {exc}{only}")
            _block(pre.guards, INCONCLUSIVE, guarded)
            continue
        if not values or problems:
            unmeasured.append(f"{pre.what}: " + (_short(problems) or "no value") + only)
            _block(pre.guards, INCONCLUSIVE, guarded)
            continue
        # a yardstick run on fewer seeds (a longer training on the first) is said as such, not as "every seed"
        every = direct_on_every_seed(tree, pre) if pre.b is not None else len(values) > 1
        where = "on every seed" if every else (
            f"(measured on seed{'s' if len(values) > 1 else ''} {', '.join(map(str, per_seed))} only)")
        words = f"{pre.what}: {_values(values)}{how}, needs {pre.bound()} {where}"
        if all(pre.holds(v) for v in values):
            met.append(words)
        else:
            failed.append(words + only + (f"; {pre.why}" if pre.why else ""))
            _block(pre.guards, NOT_TESTED, guarded)
    blocked = guarded.pop("", None)  # what the preconditions without guards make of the claim, whatever its test
    if failed:
        text = "not met: " + "; ".join(failed)
        # a guarded failure blocks nothing else: a precondition that could not be measured is said beside it
        return (text + ("; not measured: " + "; ".join(unmeasured) if unmeasured and blocked != NOT_TESTED
                        else "")), blocked, guarded
    if unmeasured:
        return "not measured: " + "; ".join(unmeasured), blocked, guarded
    return "met: " + "; ".join(met), None, guarded


def _block(guards: str | None, verdict: str, guarded: dict[str, str]) -> None:
    """Record that ``guards`` (a verdict, or "" for every verdict) becomes ``verdict``; *not tested* outranks
    *inconclusive*, as a failed precondition outranks one that could not be measured."""
    key = guards or ""
    if guarded.get(key) != NOT_TESTED:
        guarded[key] = verdict


def not_tested(claim: Claim) -> ClaimResult:
    """The row of a claim no model made could show: what its spec declares (``not_tested``), whatever the runs
    hold."""
    why = str(claim.not_tested)
    return ClaimResult(claim, NOT_TESTED, note=why, precondition="not met: " + why)


# the note of a claim whose preset runs an arm it reads nowhere (said by the ledger's rule where a row has it)
NOT_DECLARED = "this preset's run sheet declares no run under"
# the note of a claim whose replication runs none of its task at this preset (likewise)
NO_TASK = "this preset runs no"


def _undeclared(claim: Claim, tree: RunTree) -> list[str]:
    """The run selectors of the claim's sides (spelled as the missing inputs are) that no run-sheet entry the
    tree was read by declares (:meth:`RunTree.declares_run`): the preset runs none of that arm, so nothing could
    be measured. None where the tree was read without the sheet's labels."""
    out = []
    for sel in (claim.a, claim.b):
        if sel is None:
            continue
        source = sel.get("from", "run")
        if source in DECLARED_ANALYSES:  # an analysis: declared by its label (its arm by the kind's arm key)
            how = KINDS[source]
            arm = str(sel.get(how.arm, how.default)) if how.arm and how.arm != "step" else None
            if not tree.declares_analysis(sel["task"], how.analysis, arm):
                out.append(f"{sel['task']}/analysis/{how.analysis}" + (f"/{arm}" if arm else ""))
            continue
        if source != "run":
            continue
        task, variant, arm, ratio = sel["task"], str(sel["variant"]), str(sel.get("arm", "*")), sel.get("ratio")
        if not tree.declares_run(task, variant, arm, ratio):
            out.append(f"{task}/{variant}/{arm}/{'*' if ratio is None else ratio}")
    return out


# the analyses whose run-sheet labels name their folder and arm (heads.sheet.analysis_label), so an undeclared
# one is known: the others (a snapshot's step, a genre probe) are not judged by their labels
DECLARED_ANALYSES = frozenset({"ablation", "all_but_one", "curve", "mask", "redundancy", "roles", "shift", "speed"})


def _with_provenance(claim: Claim, tree: RunTree) -> Claim:
    """``claim`` with what its runs say of themselves in its note: seeds that are shards of one shipped model's
    test text (where claims.yaml does not already say what a seed is; their intervals then cover the text's
    sampling, not training) and what a shipped model's provenance means for the claim (heads.shipped)."""
    from heads.shipped import SHIPPED

    sources, shards = tree.baselines_of(claim.task)
    extra = [SHIPPED[s].caveat for s in sorted(sources) if s in SHIPPED and SHIPPED[s].caveat]
    note = "; ".join([claim.note or "", *extra]) if extra else claim.note
    seeds_are = claim.seeds_are
    if seeds_are is None and max(shards, default=1) > 1:
        models = ", ".join(sorted(sources))
        seeds_are = (f"disjoint shards of the held-out text ({max(shards)}, one per seed) scored by one model "
                     f"({models}) that has no training seeds: intervals cover the sampling of the text and the "
                     "random draws, not training")
    return replace(claim, note=note, seeds_are=seeds_are)


def evaluate(claim: Claim, tree: RunTree) -> ClaimResult:
    """One claim against the runs (never raises for missing or broken data).

    No seed is left out silently: one that could not be measured (missing, unpaired, an undefined ratio, a run
    that pruned nothing) makes the claim inconclusive with the reason, and the effect over the others is shown."""
    if claim.not_tested:
        return not_tested(claim)
    claim = _with_provenance(claim, tree)
    if tree.only is not None and claim.task not in tree.only:
        # the replication runs none of this task at this preset (the GPU visit trains translation only): no
        # model was made that could show the claim, which is neither a run that went missing (inconclusive) nor
        # a model too small for it (not tested at this scale). Its preconditions are not read: they are measured
        # on the claim's own models, and there are none.
        return ClaimResult(claim, NOT_RUN, note=f"{NO_TASK} {claim.task!r} models for {claim.replication} (its runs "
                           f"are on {sorted(tree.only)}), so nothing was measured", precondition="not run")
    precondition, blocked, guarded = guarded_preconditions(claim, tree)
    undeclared = _undeclared(claim, tree)
    if undeclared and blocked != NOT_TESTED:
        # an arm the preset's settings leave out is not a run that went missing (inconclusive): nothing was run
        # that could show the claim. A precondition the models that did run fail says more (not tested at this
        # scale: the arm would not have settled it either), so it stands.
        those = "that arm" if len(undeclared) == 1 else "those arms"
        return ClaimResult(claim, NOT_RUN, note=f"{NOT_DECLARED} {' or '.join(undeclared)} (the replication's "
                           f"settings at this preset leave {those} out), so nothing was measured",
                           precondition="not run")
    try:
        a = measure(tree, claim.a)
        b = measure(tree, claim.b) if claim.b is not None else None
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return ClaimResult(claim, INCONCLUSIVE, note=f"could not measure: {exc.__class__.__name__}: {exc}",
                           precondition=precondition)
    sides = [a] if b is None else [a, b]
    per_seed, unpaired = _combine(claim, a, b)
    idle = [msg for s in sides for _, msg in sorted(s.idle.items())]
    per_seed = {seed: v for seed, v in per_seed.items() if not any(seed in s.idle for s in sides)}
    est = _estimate(claim, per_seed, a, b)
    failed = [msg for s in sides for _, msg in sorted(s.failed.items())]
    unmeasured = [m for s in sides for m in s.missing] + unpaired
    notes = [n for s in sides for n in s.notes] + _stopped_early(tree, claim.task)
    if claim.seeds_of_a and b is not None and set(b.values) - set(a.values):
        notes.append(f"b's seeds {sorted(set(b.values) - set(a.values))} left out: the claim reads the seeds its a "
                     "side ran on (seeds_of_a)")
    decision, tested, resolved = Decision(INCONCLUSIVE), False, False
    # equal counts are tested over one seed's units only where the examples did not resample them (their spread
    # is the examples', units sharing one test set are not independent trials)
    binomial = _one_count(claim, per_seed, a, b) if est.n >= MIN_SEEDS and not (
        est.examples and est.spread) else None
    if binomial is not None:
        (k, n) = binomial
        low, high = clopper_pearson(k, n)
        est = replace(est, ci_low=low, ci_high=high)
        decision = decide_binomial(k, n, claim.direction, claim.threshold)
    elif claim.test == "exact" and est.n >= 1:
        decision = decide_exact(list(per_seed.values()), claim.holds, claim.condition())
        est = replace(est, ci_low=None, ci_high=None)  # a count has no interval: not a zero-width one
    elif est.n >= 2:
        def decide_one(e: Estimate) -> Decision:
            return (decide_equivalence(e, claim.null, claim.margin) if claim.test == "equivalence"
                    else decide(e, claim.direction, claim.threshold))

        brackets = _effect_brackets(claim, per_seed, a, b)
        if brackets is None:
            decision = decide_one(est)
        else:
            decision, est = at_resolution(per_seed, brackets, est, decide_one)
            resolved = True
    over = f"; effect over the {est.n} other seeds" if est.n else ""
    if blocked == NOT_TESTED:
        result, lead = NOT_TESTED, "the models do not meet the precondition (see its column)"
    elif failed:
        result, lead = FAILED, f"diverged: {_short(failed)}{over}"
    elif est.n == 0 and idle:
        result, lead = INCONCLUSIVE, f"nothing was pruned, so the claim was not put to the test: {_short(idle)}"
    elif est.n == 0:
        result, lead = INCONCLUSIVE, f"missing inputs: {_short(unmeasured) or 'no seeds with both sides'}"
        unmeasured = []
    elif blocked == INCONCLUSIVE:
        result, lead = INCONCLUSIVE, "a precondition could not be measured (see its column)"
    elif unmeasured or idle:
        result = INCONCLUSIVE
        lead = "not every seed could be measured: " + _short(unmeasured + [f"left out, nothing pruned: {m}"
                                                                           for m in idle]) + over
        unmeasured, idle = [], []
    elif est.n == 1 and claim.test != "exact":
        result, lead = INCONCLUSIVE, "one seed only: no interval"
    else:
        result, lead, tested = decision.verdict, decision.reason, True
    if tested and result in guarded:
        # a precondition that guards this verdict alone was not met (or not measured): the verdict is withheld
        result, tested = guarded[result], False
        lead = ("the models do not meet the precondition (see its column)" if result == NOT_TESTED
                else "a precondition could not be measured (see its column)")
    elif guarded and blocked is None:
        notes[:0] = [f"a precondition that guards '{v}' only was {'not met' if w == NOT_TESTED else 'not measured'} "
                     f"(see its column): it would have withheld '{v}', not the '{result}' the claim gave"
                     for v, w in sorted(guarded.items())]
    if idle and (est.n or failed):
        notes.append(f"left out, nothing pruned: {_short(idle)}")
    parts = [lead] + ([f"missing: {_short(unmeasured)}"] if unmeasured else []) + list(dict.fromkeys(notes))
    if claim.note:
        parts.append(fill(claim.note, claim.facts, tree, str(claim.task)))
    if claim.choice:
        parts.append(f"our choice: {fill(claim.choice, claim.facts, tree, str(claim.task))}")
    if claim.seeds_are:
        parts.append(f"seeds are {claim.seeds_are}")
    # a p-value only where its test decided the verdict (a blocked or unmeasured claim ran no test)
    return ClaimResult(claim, result, est, _effect_size(claim, est) if not binomial else None, per_seed,
                       "; ".join(p for p in parts if p), decision.p_value if tested else None, precondition,
                       method_used=METHOD_BINOMIAL if binomial else (
                           (METHOD_EXAMPLES if est.examples else METHOD)[claim.test] + AT_RESOLUTION
                           if resolved else ""))


def _stopped_early(tree: RunTree, task: str) -> list[str]:
    """The task's training runs that train.time_limit ended short of their steps (a GPU visit's baselines on a
    slow device): the claim's models trained less than their config says, which the ledger says."""
    stopped = [f"{r.name} after {r.summary.get('steps')} of {r.summary['stopped'].get('of_steps')}"
               for r in tree.runs if r.task == task and isinstance(r.summary.get("stopped"), dict)]
    return [f"stopped by train.time_limit short of their steps: {_short(stopped)}"] if stopped else []


def _effect_brackets(claim: Claim, per_seed: dict[int, float], a: SeedValues,
                     b: SeedValues | None) -> dict[int, tuple[float, float]] | None:
    """Per seed, the range of its effect over the corners of its sides' brackets (a side without one is exact);
    None unless some side is known only to its evaluation interval, or where a corner leaves the effect
    undefined."""
    sides = [a] if b is None else [a, b]
    if not any(s.brackets for s in sides):
        return None
    out = {}
    for seed, value in per_seed.items():
        ends = [s.brackets.get(seed, (s.values[seed], s.values[seed])) for s in sides]
        corners = [_effect(claim, x, y) for x in ends[0] for y in (ends[1] if b is not None else (None,))]
        if any(c is None or not np.isfinite(c) for c in corners):
            return None
        out[seed] = (min(corners + [value]), max(corners + [value]))
    return out


def at_resolution(per_seed: dict[int, float], brackets: dict[int, tuple[float, float]], est: Estimate,
                  decide_one) -> tuple[Decision, Estimate]:
    """The decision and interval of a claim on counts known to their evaluation interval: the test at both ends
    of every seed's bracket (:func:`heads.report.stats.decide_at_resolution`), the interval from the low end's
    lower bound to the high end's upper bound. Seeds that all give one value (all reached the target at the
    same evaluation) have no spread to test, but are not a zero-width interval either: the brackets' span is."""
    seeds = sorted(per_seed)
    lows, highs = [brackets[s][0] for s in seeds], [brackets[s][1] for s in seeds]
    values = [per_seed[s] for s in seeds]
    if max(values) == min(values):
        span = replace(est, ci_low=min(lows), ci_high=max(highs))
        return Decision(INCONCLUSIVE, None, f"every seed gives {values[0]:.4g}, so there is no spread to test; at the "
                                            f"evaluation interval's resolution it lies in [{min(lows):.4g}, "
                                            f"{max(highs):.4g}]"), span
    low, high = estimate(lows), estimate(highs)
    widened = replace(est, ci_low=min(est.ci_low, low.ci_low), ci_high=max(est.ci_high, high.ci_high))
    return decide_at_resolution(low, high, decide_one), widened


def _effect_size(claim: Claim, est: Estimate) -> float | None:
    """Standardised distance from the claim's threshold (Cohen's d_z for paired differences): the same yardstick
    for every kind of claim, where the null alone would measure a ratio against 0."""
    return effect_size(est, claim.threshold if claim.test == "directional" else claim.null)


def adjust(results: Sequence[ClaimResult]) -> None:
    """Holm's adjustment (:func:`heads.report.stats.holm`) over each family's tests, in place: a family is the
    claims of one replication (or of one ``family`` within it, :attr:`Claim.family`) whose test ran (those with a
    p-value). A verdict its own test made definite that the adjusted p no longer carries becomes *inconclusive*,
    saying so."""
    families: dict[tuple[str, str], list[ClaimResult]] = {}
    for r in results:
        if r.p_value is not None:
            families.setdefault((r.claim.replication, r.claim.family or r.claim.replication), []).append(r)
    for (replication, name), family in families.items():
        # the default family is the replication, said as it always was
        which = (f"replication {replication}" if name == replication
                 else f"family {name!r} of replication {replication}")
        for r, p in zip(family, holm([r.p_value for r in family]), strict=True):
            r.p_adjusted = p
            if r.verdict in (SUPPORTED, NOT_SUPPORTED) and p >= ALPHA:
                r.note = "; ".join(x for x in (
                    f"{r.verdict} by its own test (p {r.p_value:.2g}) but not after Holm's adjustment over the "
                    f"{len(family)} tests of {which} (adjusted p {p:.2g} >= {ALPHA:g})",
                    r.note) if x)
                r.verdict = INCONCLUSIVE


def _one_count(claim: Claim, per_seed: dict[int, float], a: SeedValues, b: SeedValues | None) -> tuple[int, int] | None:
    """``(k, n)`` when the claim is a directional one on a share of units and every seed counted the same ``k``
    of the same ``n`` (a spread of zero, which no interval over seeds can use); else None."""
    if claim.kind != "value" or claim.test != "directional" or b is not None or claim.relative or not per_seed:
        return None
    counts = {a.counts.get(seed) for seed in per_seed}
    if len(counts) != 1 or None in counts:
        return None
    return counts.pop()


def evaluate_all(claims: Sequence[Claim], tree: RunTree,
                 measurement: dict | list[dict] | None = None) -> list[ClaimResult]:
    """Every claim; ``measurement`` (one or several :func:`heads.report.robustness.load`) says which verdicts are
    fragile."""
    results = [evaluate(c, tree) for c in claims]
    adjust(results)
    for r in results:
        r.robustness = robustness(r.claim.id, r.verdict, measurement, r.estimate.mean)
    return results


def ledger_table(results: Sequence[ClaimResult]) -> Table:
    """The ledger as a table: the CSV's required columns first, then the extras."""
    rows = []
    for r in results:
        e, c = r.estimate, r.claim
        per_seed = " ".join(f"{k}:{v:.4f}" for k, v in sorted(r.per_seed.items()))
        rows.append([c.id, c.replication, r.verdict, e.mean, e.ci_low, e.ci_high, fmt(c.paper_value, "g"), e.n,
                     r.method, r.p_value, r.p_adjusted, r.precondition, c.task, c.quantity(),
                     "" if c.not_tested else c.condition(), r.effect_size, per_seed, r.note, r.robustness])
    return Table("claims", CSV_COLUMNS + EXTRA_COLUMNS, rows, formats={"effect_size": ".2f", "p_value": ".2g",
                                                                        "p_adjusted": ".2g"})


# the ledger as data beside claims.csv: what the whole ledger merges, every number at full precision
LEDGER_JSON = "claims.json"


LEDGER_FORMAT = 1  # claims.json's layout; a reader refuses another


def _finite(value: Any) -> Any:
    """A value for strict JSON: a non-finite float as null (the report never means anything by NaN)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def ledger_records(results: Sequence[ClaimResult]) -> dict:
    """``claims.json``: each result's fields as they are (its claim by id), for :mod:`heads.report.ledger`."""
    return {"format": LEDGER_FORMAT, "results": [
        {"claim": r.claim.id, "replication": r.claim.replication, "verdict": r.verdict,
         "estimate": {k: _finite(v) for k, v in asdict(r.estimate).items()}, "effect_size": _finite(r.effect_size),
         "per_seed": {str(seed): _finite(v) for seed, v in sorted(r.per_seed.items())}, "note": r.note,
         "p_value": _finite(r.p_value), "p_adjusted": _finite(r.p_adjusted), "precondition": r.precondition,
         "robustness": r.robustness, "method_used": r.method_used} for r in results]}


def _interval(e: Estimate, exact: bool = False) -> str:
    if e.mean is None:
        return "–"
    if exact:
        return f"{e.mean:+.4f} (exact)"
    if e.ci_low is None:
        return f"{e.mean:+.4f} (one value)"
    return f"{e.mean:+.4f} [{e.ci_low:+.4f}, {e.ci_high:+.4f}]"


def ledger_markdown(results: Sequence[ClaimResult], title: str = "Claims ledger",
                    environments: str | None = None) -> str:
    """``CLAIMS.md``: counts per verdict, the rule, then one row per claim."""
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS if v not in (NOT_RUN, NOT_YET)}
    not_run, not_yet = (sum(r.verdict == v for r in results) for v in (NOT_RUN, NOT_YET))
    if not_yet:  # said only where a merged ledger lacks a replication's rows (its target has not run yet)
        counts[NOT_YET] = not_yet
    if not_run:  # said only where a merged ledger has claims its preset does not run
        counts[NOT_RUN] = not_run
    design = _design_rules(results)
    lines = [
        f"# {title}",
        "",
        ", ".join(f"{v}: {n}" for v, n in counts.items()),
        "",
        *([engineering_line(results), ""] if any(r.claim.about == "engineering" for r in results) else []),
        f"Effect: mean over seeds of the claim's quantity (paired by seed where it compares two arms), with a "
        f"{LEVEL:.0%} Student-t interval over the seeds; where the runs kept their evaluation's example-level "
        "values, a two-level interval that also counts the test examples' sampling (the seeds' and the examples' "
        "half-widths in quadrature, examples resampled alike for every seed and arm; the method column says "
        "which). A directional claim is *supported* when the whole interval lies on the "
        "claimed side of the threshold (null + tolerance; a one-sided t-test at 2.5 %) and *not supported* when it "
        "lies wholly on the other side; an equivalence claim (\"no noticeable loss\") is *supported* when the "
        "interval lies inside null ± margin (two one-sided tests) and *not supported* when it lies wholly outside. "
        "Both tests are one-sided at 2.5 % per side (the equivalence test's two one-sided tests each at 2.5 %). "
        "The p column is the p-value that decided the verdict: the one-sided test of the side the verdict names "
        "(the claimed side for *supported*, the other side for *not supported*, the smaller of the two for "
        "*inconclusive*). Multiplicity: each replication's tested claims (those with a p) are one family, "
        "adjusted by Holm's step-down method (p adjusted); a verdict stands only where its adjusted p is under "
        "2.5 %, else it is *inconclusive*, saying so. "
        "A share of significant heads is recomputed on the same example resamples (every head's test redone: the "
        "heads share one test set, so they are not independent trials) where the ablation kept its per-example "
        "values; otherwise a share of units (heads, sites) that every seed counted alike has no spread over seeds "
        "and is tested by the exact binomial over one seed's units (Clopper-Pearson interval; the method column "
        "says so). "
        "A count to a target (steps or seconds) is known only to its evaluation interval: it is judged with every "
        "seed at the low and at the high end of its bracket (the evaluation before and the one that reached it), "
        "definite only where both ends give the verdict, the interval spanning both (the method column says so); "
        "seeds that all reached the target at one evaluation show the brackets' span. "
        f"Otherwise, with fewer than {MIN_SEEDS} seeds, with every seed giving the same value, or with a seed that "
        "could not be measured, *inconclusive*. An *exact* claim is a count the model's shapes fix (bytes): no "
        "interval, every seed must give the same value and meet the condition. *failed*: a run the claim needs "
        "diverged. *not tested at this scale*: the models do not meet the claim's precondition (what they must "
        "reach for the claim to apply), "
        "with the measured numbers"
        + ("; *not run yet*: the claim's replication runs at this preset, but its target has not run since the "
           "claim was declared, so nothing was measured (the note names the target)" if not_yet else "")
        + _not_run_rule(results)
        + ". A verdict marked *(fragile)* changed when benchmarks/bench_perturbation.py "
        "re-ran its runs under another kernel instruction set and thread count (results/bench/perturbation.md). "
        "Paper values are in the paper's own units (see each replication's reference.yaml).",
        "",
        *([" ".join(design), ""] if design else []),
        *([f"**Environments differ:** {environments}.", ""] if environments else []),
        "| claim | replication | task | claim text | quantity | our effect [95 % CI] | claimed | n seeds "
        "| p | p adjusted | paper | verdict | precondition | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r.claim
        paper = " ".join(x for x in (fmt(c.paper_value, "g"), f"({c.paper})" if c.paper else "") if x)
        cells = [c.id, c.replication, c.task or "–", c.text, f"`{c.quantity()}`" if c.quantity() else "–",
                 _interval(r.estimate, c.test == "exact"), "–" if c.not_tested else c.condition(),
                 str(r.estimate.n), fmt(r.p_value, ".2g", "–"), fmt(r.p_adjusted, ".2g", "–"),
                 paper or "–", f"**{r.verdict}**" + (" (fragile)" if r.fragile else ""),
                 r.precondition or "–", "; ".join(x for x in (r.note, r.robustness if r.fragile else "") if x) or "–"]
        lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def _not_run_rule(results: Sequence[ClaimResult]) -> str:
    """The rule's words on *not run at this preset*, for the reasons the ledger's rows have: a replication whose
    settings are null at this preset (:func:`heads.report.ledger.merge_results`), one that runs none of the
    claim's task there (:data:`NO_TASK`), an arm its settings leave out (:data:`NOT_DECLARED`); none without such
    a row, so a ledger without the second or third reads as it always did."""
    reasons = {not_run_reason(r.note) for r in results if r.verdict == NOT_RUN}
    why = [*(["does not run at this preset (its settings say null)"] if "null" in reasons else []),
           *(["runs at this preset but none of the claim's task (its settings at this preset make models of other "
              "tasks only; the note names them)"] if "task" in reasons else []),
           *(["runs at this preset but not an arm the claim reads (its settings at this preset leave that arm out; "
              "the note names it)"] if "arm" in reasons else [])]
    return (f"; *not run at this preset*: the claim's replication {', or '.join(why)}, so nothing was measured"
            if why else "")


def not_run_reason(note: str | None) -> str:
    """Why a *not run at this preset* row was not run, from its note: ``task`` (:data:`NO_TASK`), ``arm``
    (:data:`NOT_DECLARED`), else ``null`` (its replication's settings at this preset)."""
    note = note or ""
    return "task" if note.startswith(NO_TASK) else "arm" if note.startswith(NOT_DECLARED) else "null"


def engineering_line(results: Sequence[ClaimResult]) -> str:
    """How many of each verdict are engineering claims (speed, time, memory, bytes): facts of the implementation
    and the machine, which bear on no claim about what heads do."""
    mine = [r for r in results if r.claim.about == "engineering"]
    tally = ", ".join(f"{v}: {n}" for v in VERDICTS if (n := sum(r.verdict == v for r in mine)))
    return (f"Of these, {len(mine)} are engineering claims (speed, time, memory, bytes: facts of the implementation "
            f"and the machine, not of what heads do): {tally}.")


def _design_rules(results: Sequence[ClaimResult]) -> list[str]:
    """The rule's sentences on the claims.yaml keys that only some claims use (``family``, ``guards``,
    ``common_test``): said where a ledger's claims use them, so a ledger that uses none reads as it always did."""
    claims = [r.claim for r in results]
    rules = []
    if any(c.family and c.family != c.replication for c in claims):
        rules.append("Claims that name a family (one source's claims within a replication) are adjusted over "
                     "that family alone, not over every claim of the replication.")
    if any(p.guards for c in claims for p in c.requires):
        rules.append("A precondition that guards one verdict only (low power can only hide an effect, so a power "
                     "check guards the verdict that says there is none) withholds that verdict alone: where the "
                     "claim's test gives it and the precondition is not met, *not tested at this scale* (not "
                     "measured: *inconclusive*); any other result stands, its note saying what the precondition "
                     "would have withheld.")
    if any(c.common_test for c in claims):
        rules.append("Where every seed of a claim was scored on one common test set (replicates of a procedure, "
                     "not shards of the text), the two-level interval also counts that set's sampling although "
                     "the seeds are not training seeds.")
    return rules


def write_ledger(results: Sequence[ClaimResult], out: str | Path, environments: str | None = None,
                 tree: RunTree | None = None, baselines: Table | None = None, title: str = "Claims ledger",
                 page: str = "CLAIMS.md") -> list[Path]:
    """``out/CLAIMS.md`` (``page``), ``out/claims.csv`` and ``out/claims.json`` (the same results as data: what a
    whole ledger merges) (atomic; identical inputs give identical bytes);
    ``environments`` (:meth:`RunTree.environment_note`) is said under the rule when the runs come from different
    environments. ``baselines`` (or, with the run ``tree``, its :func:`baselines_table`) goes to
    ``out/baselines.csv`` and ``.md``: what the preconditions read, per task."""
    out = Path(out)
    written = [write_text(out / page, ledger_markdown(results, title=title, environments=environments)),
               write_text(out / "claims.csv", ledger_table(results).to_csv()),
               write_json(out / LEDGER_JSON, ledger_records(results), allow_nan=False)]
    if baselines is None and tree is not None:
        baselines = baselines_table(tree, (p for r in results for p in r.claim.requires))
    if baselines is not None:
        written += baselines.write(out, "baselines")
    return written
