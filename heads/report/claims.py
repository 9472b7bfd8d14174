"""Evaluate the claims of ``replications/*/claims.yaml`` against a run tree: ``OUT/CLAIMS.md`` and ``OUT/claims.csv``.

One row per claim, always: a claim whose experiments are missing is
*inconclusive* with the reason, one whose runs diverged is *failed*, one the
tiny scale cannot address is *not tested*; nothing in the data crashes the
ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from heads.io import write_text
from heads.report.collect import RunTree
from heads.report.fmt import Table, fmt
from heads.report.measures import Series, measure
from heads.report.spec import Claim
from heads.report.stats import (
    FAILED,
    INCONCLUSIVE,
    LEVEL,
    NOT_TESTED,
    RESAMPLES,
    VERDICTS,
    Estimate,
    effect_size,
    estimate,
    verdict,
)

CSV_COLUMNS = ["claim", "replication", "verdict", "effect", "ci_low", "ci_high", "paper_value", "n_seeds"]
EXTRA_COLUMNS = ["task", "quantity", "condition", "effect_size", "per_seed", "note"]
MAX_REASONS = 3


@dataclass
class ClaimResult:
    """A claim's verdict with the estimate behind it."""

    claim: Claim
    verdict: str
    estimate: Estimate = field(default_factory=lambda: Estimate(0, None, None, None, None))
    effect_size: float | None = None
    per_seed: dict[int, float] = field(default_factory=dict)
    note: str = ""


def _combine(claim: Claim, a: Series, b: Series | None) -> tuple[dict[int, float], list[str]]:
    """Per-seed effect: a alone, a - b (optionally relative to |b|) or a / b, paired by seed."""
    if b is None:
        return dict(a.values), []
    notes = []
    only_a, only_b = sorted(set(a.values) - set(b.values)), sorted(set(b.values) - set(a.values))
    if only_a:
        notes.append(f"seeds {only_a} only in a")
    if only_b:
        notes.append(f"seeds {only_b} only in b")
    out = {}
    for key in sorted(set(a.values) & set(b.values)):
        x, y = a.values[key], b.values[key]
        if claim.kind == "paired_ratio" or claim.relative:
            if y == 0:
                notes.append(f"seed {key}: b is 0, no ratio")
                continue
            out[key] = x / y if claim.kind == "paired_ratio" else (x - y) / abs(y)
        else:
            out[key] = x - y
    return out, notes


def _short(reasons: Sequence[str]) -> str:
    unique = list(dict.fromkeys(reasons))
    text = "; ".join(unique[:MAX_REASONS])
    return text + (f" (+{len(unique) - MAX_REASONS} more)" if len(unique) > MAX_REASONS else "")


def evaluate(claim: Claim, tree: RunTree) -> ClaimResult:
    """One claim against the runs (never raises for missing or broken data)."""
    if claim.not_tested:
        return ClaimResult(claim, NOT_TESTED, note=f"not testable at this scale: {claim.not_tested}")
    try:
        a = measure(tree, claim.a)
        b = measure(tree, claim.b) if claim.b is not None else None
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return ClaimResult(claim, INCONCLUSIVE, note=f"could not measure: {exc.__class__.__name__}: {exc}")
    sides = [a] if b is None else [a, b]
    per_seed, pairing = _combine(claim, a, b)
    idle = [msg for s in sides for _, msg in sorted(s.idle.items())]
    per_seed = {seed: v for seed, v in per_seed.items() if not any(seed in s.idle for s in sides)}
    est = estimate(list(per_seed.values()))
    failed = [msg for s in sides for _, msg in sorted(s.failed.items())]
    missing = [m for s in sides for m in s.missing]
    notes = [n for s in sides for n in s.notes] + pairing
    if failed:
        result, lead = FAILED, f"diverged: {_short(failed)}" + (f"; effect over the {est.n} other seeds"
                                                                  if est.n else "")
    elif est.n == 0 and idle:
        result, lead = INCONCLUSIVE, f"nothing was pruned, so the claim was not put to the test: {_short(idle)}"
    elif est.n == 0:
        result, lead = INCONCLUSIVE, f"missing inputs: {_short(missing) or 'no seeds with both sides'}"
        missing = []
    elif est.n == 1:
        result, lead = INCONCLUSIVE, "one seed only: no interval"
    else:
        result = verdict(est, claim.direction, claim.threshold)
        lead = f"the interval reaches the threshold {claim.threshold:+.4g}" if result == INCONCLUSIVE else ""
    if idle and (est.n or failed):  # otherwise the lead already says it
        notes.append(f"left out, nothing pruned: {_short(idle)}")
    parts = [lead] + ([f"missing: {_short(missing)}"] if missing else []) + notes
    if claim.note:
        parts.append(claim.note)
    return ClaimResult(claim, result, est, effect_size(est, claim.null), per_seed, "; ".join(p for p in parts if p))


def evaluate_all(claims: Sequence[Claim], tree: RunTree) -> list[ClaimResult]:
    return [evaluate(c, tree) for c in claims]


def _paper(value) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return fmt(value)


def ledger_table(results: Sequence[ClaimResult]) -> Table:
    """The ledger as a table: the CSV's required columns first, then the extras."""
    rows = []
    for r in results:
        e, c = r.estimate, r.claim
        per_seed = " ".join(f"{k}:{v:.4f}" for k, v in sorted(r.per_seed.items()))
        rows.append([c.id, c.replication, r.verdict, e.mean, e.ci_low, e.ci_high, _paper(c.paper_value), e.n,
                     c.task, c.quantity(), "" if c.not_tested else c.condition(), r.effect_size, per_seed, r.note])
    return Table("claims", CSV_COLUMNS + EXTRA_COLUMNS, rows, formats={"effect_size": ".2f"})


def _interval(e: Estimate) -> str:
    if e.mean is None:
        return "–"
    return f"{e.mean:+.4f} [{e.ci_low:+.4f}, {e.ci_high:+.4f}]"


def ledger_markdown(results: Sequence[ClaimResult], title: str = "Claims ledger",
                    environments: str | None = None) -> str:
    """``CLAIMS.md``: counts per verdict, the rule, then one row per claim."""
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    lines = [
        f"# {title}",
        "",
        ", ".join(f"{v}: {n}" for v, n in counts.items()),
        "",
        f"Effect: mean over seeds of the claim's quantity, with a {LEVEL:.0%} percentile bootstrap interval "
        f"({RESAMPLES:,} resamples of the seeds, fixed seed). *supported*: the whole interval lies on the "
        "claimed side of the threshold (null + tolerance); *not supported*: wholly on the other side; "
        "otherwise, or with one seed, *inconclusive*. *failed*: a run the claim needs diverged. Paper values "
        "are in the paper's own units (see each replication's reference.yaml).",
        "",
        *([f"**Environments differ:** {environments}.", ""] if environments else []),
        "| claim | replication | task | claim text | quantity | our effect [95 % CI] | claimed | n seeds "
        "| paper | verdict | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r.claim
        paper = " ".join(x for x in (_paper(c.paper_value), f"({c.paper})" if c.paper else "") if x)
        cells = [c.id, c.replication, c.task or "–", c.text, f"`{c.quantity()}`" if c.quantity() else "–",
                 _interval(r.estimate), "–" if c.not_tested else c.condition(), str(r.estimate.n), paper or "–",
                 f"**{r.verdict}**", r.note or "–"]
        lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def write_ledger(results: Sequence[ClaimResult], out: str | Path, environments: str | None = None) -> list[Path]:
    """``out/CLAIMS.md`` and ``out/claims.csv`` (atomic; identical inputs give identical bytes); ``environments``
    (:meth:`RunTree.environment_note`) is said under the rule when the runs come from different environments."""
    out = Path(out)
    return [write_text(out / "CLAIMS.md", ledger_markdown(results, environments=environments)),
            write_text(out / "claims.csv", ledger_table(results).to_csv())]
