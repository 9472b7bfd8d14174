"""The whole ledger as the union of the replications' own: ``OUT/<rep>/claims.csv`` -> ``OUT/claims.csv``.

Each replication's target writes its ledger page beside its tables (``claims.md``, ``claims.csv``, the same
results as data in ``claims.json``, ``baselines.{csv,md}`` and ``environments.json``: the environments its runs
name). The whole ledger merges those files (the results from ``claims.json``; a ledger written before that file
existed, from its CSV), so replications run apart (on other days, even other machines, as the ``small`` scale
does: one target per working day) still make one ledger, and a claim's numbers are the same bytes in its
replication's page and in the whole ledger. A claim whose replication has no ledger yet is *inconclusive*,
saying so.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from heads.env import describe_mix
from heads.io import write_json
from heads.report.baselines import COLUMNS as BASELINE_COLUMNS
from heads.report.baselines import baselines_caption
from heads.report.claims import (
    CSV_COLUMNS,
    EXTRA_COLUMNS,
    LEDGER_FORMAT,
    LEDGER_JSON,
    ClaimResult,
    not_tested,
)
from heads.report.collect import ENCODING
from heads.report.fmt import Table
from heads.report.robustness import robustness
from heads.report.spec import Claim
from heads.report.stats import METHOD, METHOD_EXAMPLES, NOT_RUN, NOT_YET, VERDICTS, Estimate

ENVIRONMENTS = "environments.json"


class LedgerError(ValueError):
    """A replication ledger that cannot be merged (unknown claim, missing column, duplicated claim, a verdict the
    rules do not give)."""


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _per_seed(text: str) -> dict[int, float]:
    """``"0:0.0153 1:0.0151"`` (the ledger's per_seed column) as ``{seed: value}``."""
    return {int(seed): float(value) for seed, _, value in (item.partition(":") for item in text.split())}


def _result(path: Path, row: Mapping[str, str], claim: Claim) -> ClaimResult:
    """One row of a ledger written before ``claims.json``, read back from its CSV text."""
    n = int(row["n_seeds"] or 0)
    # the method column is the only place the ledger says whether the interval counted the examples
    examples = row["method"].startswith(METHOD_EXAMPLES[claim.test]) and METHOD_EXAMPLES[claim.test] != METHOD[
        claim.test]
    est = Estimate(n, _float(row["effect"]), _float(row["ci_low"]), _float(row["ci_high"]), None,
                   examples=examples)
    verdict = _verdict(path, row["claim"], row["verdict"])
    return ClaimResult(claim, verdict, est, _float(row["effect_size"]), _per_seed(row["per_seed"]),
                       row["note"], _float(row["p_value"]), row["precondition"], row["robustness"],
                       method_used=row["method"] if row["method"] not in (
                           METHOD[claim.test], METHOD_EXAMPLES[claim.test]) else "",
                       p_adjusted=_float(row["p_adjusted"]))


def _verdict(path: Path, claim_id: Any, verdict: Any) -> str:
    """``verdict`` if the rules can give it; else an error naming the ledger, the claim and the verdicts there are
    (a hand-edited ``maybe`` must not pass into the merged ledger as if judged)."""
    if verdict not in VERDICTS:
        raise LedgerError(f"{path}: claim {claim_id}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}; "
                          "re-render it from its runs")
    return verdict


def _claim(path: Path, claim_id: Any, claims: Mapping[str, Claim]) -> Claim:
    """The spec of a ledger row's claim, or an error naming the ledger where no claims.yaml declares it."""
    claim = claims.get(claim_id)
    if claim is None:
        raise LedgerError(f"{path}: claim {claim_id!r} is declared by no replications/*/claims.yaml "
                          "(a ledger from another version of the specs? re-render it)")
    return claim


def _from_records(path: Path, claims: Mapping[str, Claim]) -> list[ClaimResult]:
    """A replication's ``claims.json`` (:func:`heads.report.claims.ledger_records`) as results."""
    try:
        doc = json.loads(path.read_text(encoding=ENCODING))
        if doc.get("format") != LEDGER_FORMAT:
            raise LedgerError(f"{path}: format {doc.get('format')!r}, not {LEDGER_FORMAT}: written by another "
                              "version of heads; re-render it")
        known = {f.name for f in fields(Estimate)}
        out = [ClaimResult(
            claim=_claim(path, item["claim"], claims), verdict=_verdict(path, item["claim"], item["verdict"]),
            estimate=Estimate(**{k: v for k, v in item["estimate"].items() if k in known}),
            effect_size=item["effect_size"], per_seed={int(seed): v for seed, v in item["per_seed"].items()},
            note=item["note"], p_value=item["p_value"], precondition=item["precondition"],
            robustness=item["robustness"], method_used=item["method_used"], p_adjusted=item["p_adjusted"])
            for item in doc["results"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LedgerError):
            raise
        raise LedgerError(f"{path}: not a ledger written by heads ({exc.__class__.__name__}: {exc})") from None
    _agrees_with_csv(path, out)
    return out


def _agrees_with_csv(path: Path, results: Sequence[ClaimResult]) -> None:
    """The claims and verdicts of ``claims.json`` are those of the ``claims.csv`` beside it: both are written by
    one render, so a difference means one was replaced since (by hand, or by another version): re-render."""
    beside = path.with_name("claims.csv")
    if not beside.is_file():
        return
    with beside.open(newline="", encoding=ENCODING) as f:  # a byte-order mark is no part of the first column
        listed = [(row.get("claim"), row.get("verdict")) for row in csv.DictReader(f)]
    mine = [(r.claim.id, r.verdict) for r in results]
    if listed != mine:
        first = next((a, b) for a, b in zip([*listed, None], [*mine, None], strict=False) if a != b)
        raise LedgerError(f"{path}: its claims and verdicts differ from {beside.name} beside it (first: "
                          f"{first[0]} there, {first[1]} here): one was replaced since the render; re-render it")


def read_ledger(path: str | Path, claims: Mapping[str, Claim]) -> list[ClaimResult]:
    """One replication's ledger as results, each bound to its claim's spec (``claims``: by id): from the
    ``claims.json`` beside its ``claims.csv`` (``path``: either), else, for a ledger written before that file
    existed, from the CSV's text."""
    path = Path(path)
    if path.with_name(LEDGER_JSON).is_file():
        return _from_records(path.with_name(LEDGER_JSON), claims)
    with path.open(newline="", encoding=ENCODING) as f:
        reader = csv.DictReader(f)
        missing = [c for c in CSV_COLUMNS + EXTRA_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:  # p_adjusted alone: judged by the rules before multiplicity and scale gates
            raise LedgerError(f"{path}: not a ledger written by this version of heads (no column "
                              f"{', '.join(missing)}): re-render it from its runs")
        rows = list(reader)
    out = []
    for row in rows:
        claim = _claim(path, row["claim"], claims)
        try:
            out.append(_result(path, row, claim))
        except ValueError as exc:
            raise LedgerError(f"{path}: claim {row['claim']}: {exc}") from None
    return out


def _missing(claim: Claim, merged: bool) -> ClaimResult:
    """A claim no merged ledger has: its replication's target has not run, or (``merged``) its ledger was
    written before the claim was declared."""
    if claim.not_tested:
        return not_tested(claim)
    why = (f"the merged ledger of replication {claim.replication!r} predates this claim (it has no row for it; "
           f"rerun `snakemake {claim.replication}` at this scale)" if merged else
           f"no ledger of replication {claim.replication!r} was merged (its target, `snakemake "
           f"{claim.replication}`, has not run at this scale)")
    return ClaimResult(claim, NOT_YET, note=f"not run: {why}", precondition="not measured")


def ledger_tasks(paths: Sequence[str | Path]) -> dict[str, str]:
    """Replication -> the one task its ledger's rows were judged on (``claims.csv``'s task column), for the
    replications whose rows name one task: what :func:`heads.report.spec.load_all` reads their claims on, so a
    merged ledger shows a battery run on another task's model as its own ledger did."""
    found: dict[str, set[str]] = {}
    for path in map(Path, paths):
        csv_path = path.with_name("claims.csv")
        if not csv_path.is_file():
            continue
        with csv_path.open(newline="", encoding=ENCODING) as f:
            for row in csv.DictReader(f):
                if row.get("task") not in (None, "", "–"):
                    found.setdefault(row.get("replication", ""), set()).add(row["task"])
    return {rep: next(iter(tasks)) for rep, tasks in found.items() if len(tasks) == 1}


def merge_results(paths: Sequence[str | Path], claims: Sequence[Claim],
                  measurement: dict | list[dict] | None = None,
                  not_run: Mapping[str, str] | None = None) -> list[ClaimResult]:
    """Every declared claim, in the specs' order: from the ledger that has it, else *not run yet* (its replication's
    target has not run since the claim was declared), or *not run at this preset* where its replication does not
    run at this preset (``not_run``: replication -> why). ``measurement`` marks fragile verdicts, as
    :func:`heads.report.claims.evaluate_all` does."""
    by_id = {c.id: c for c in claims}
    found: dict[str, tuple[ClaimResult, Path]] = {}
    for path in map(Path, paths):
        for r in read_ledger(path, by_id):
            if r.claim.id in found:
                raise LedgerError(f"claim {r.claim.id} is in both {found[r.claim.id][1]} and {path}")
            found[r.claim.id] = (r, path)
    merged = {r.claim.replication for r, _ in found.values()}
    not_run = not_run or {}

    def absent(c: Claim) -> ClaimResult:
        if c.replication in not_run:
            return ClaimResult(c, NOT_RUN, note=not_run[c.replication], precondition="not run")
        return _missing(c, c.replication in merged)

    results = [found[c.id][0] if c.id in found else absent(c) for c in claims]
    for r in results:
        r.robustness = robustness(r.claim.id, r.verdict, measurement, r.estimate.mean)
    return results


def _cell(column: str, text: str) -> Any:
    if column in ("value", "ci_low", "ci_high"):
        return _float(text)
    if column in ("n_seeds", "n_failed"):
        return int(text)
    return text


def merge_baselines(paths: Sequence[str | Path]) -> Table:
    """The replications' ``baselines.csv`` as one table, per task in name order. A baseline two replications
    share (the same task's trained model) appears once: the row over more seeds, else the first."""
    rows: dict[tuple, list] = {}
    for path in map(Path, paths):
        with path.open(newline="", encoding=ENCODING) as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != BASELINE_COLUMNS:
                raise LedgerError(f"{path}: columns {reader.fieldnames} are not the baselines' {BASELINE_COLUMNS}")
            for raw in reader:
                row = [_cell(c, raw[c]) for c in BASELINE_COLUMNS]
                key = (raw["task"], raw["model"], raw["metric"], raw["name"])
                if key not in rows or row[6] > rows[key][6]:
                    rows[key] = row
    ordered = sorted(rows.values(), key=lambda r: r[0])  # stable: each task keeps its file's row order
    return Table("Baselines", BASELINE_COLUMNS, ordered, caption=baselines_caption())


def write_environments(folder: str | Path, envs: Mapping[str, Mapping | None]) -> Path:
    """``environments.json``: the environment each record the ledger read names, by the record's path in the
    run tree (:meth:`RunTree.environments`)."""
    return write_json(Path(folder) / ENVIRONMENTS, {"records": dict(envs)})


def merged_environments(folders: Sequence[str | Path]) -> str | None:
    """What :meth:`RunTree.environment_note` says of all the replications' records together: a record two
    replications share (a baseline both read) counts once."""
    envs: dict[str, Any] = {}
    for folder in map(Path, folders):
        path = folder / ENVIRONMENTS
        if path.is_file():
            envs.update(json.loads(path.read_text(encoding=ENCODING)).get("records", {}))
    return describe_mix(list(envs.values())) if envs else None
