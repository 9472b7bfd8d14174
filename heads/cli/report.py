"""``heads report`` (one replication's tables and figures), ``heads claims`` (the claims ledger) and ``heads rows``
(the tidy rows tables are declared over)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from heads.cli.common import claim_out, fail
from heads.io import no_file
from heads.outpath import FILE, FOLDER, writes_outputs


def _listed(text: str | None, flag: str, what: str) -> list[str] | None:
    """``--tasks lm,mt`` / ``--labels a,b`` as a list (tasks may come from plugins, so names are not checked
    against a registry; a task with nothing in the tree is warned about once the tree is read)."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise fail(f"report: {flag} {text!r} names no {what}")
    return names


def _tree(runs: Path, tasks: list[str] | None = None, labels: list[str] | None = None):
    from heads.report import RunTree
    from heads.report.collect import RunTreeError

    if not Path(runs).is_dir():
        raise fail(f"--runs {runs}: no such folder (the run tree a DAG writes is OUT/runs)")
    try:
        tree = RunTree(runs, tasks=tasks, labels=labels)
    except RunTreeError as exc:  # a record that contradicts itself is never averaged in
        raise fail(f"--runs {runs}: {exc}") from None
    if tree.empty:  # empty tables and figures from nothing would read as results
        chosen = " of the --tasks / --labels given" if tasks is not None or labels is not None else ""
        raise fail(f"--runs {runs}: no run or analysis{chosen} recorded there (an empty run tree: the DAG writes "
                   "OUT/runs; a run records what it is in its summary.json or config.json)")
    for task in sorted(set(tasks or ()) - set(tree.tasks)):
        print(f"heads: warning: no runs or analyses of task {task!r} under {runs}", file=sys.stderr)
    failed = [r for r in tree.runs if r.failed]
    if failed:
        print(
            f"{len(failed)} of {len(tree.runs)} runs not ok (kept and marked): "
            + ", ".join(f"{r.name} [{r.status}]" for r in failed[:5])
            + (" ..." if len(failed) > 5 else ""),
            file=sys.stderr,
        )
    return tree


def _warn(tree) -> None:
    """Files that could not be read (found while rendering: analyses are read on demand)."""
    for problem in tree.problems:
        print(f"heads: warning: {problem}", file=sys.stderr)


@writes_outputs
def cmd_report(args: argparse.Namespace) -> int:
    from heads.report import ClaimSpecError, render_replication, replications
    from heads.report.render import artefacts
    from heads.report.table_spec import TableSpecError

    known = replications(args.replications)
    if not known:  # run from elsewhere than the repository root: not "unknown", the folder is not there
        raise fail(f"report: --replications {args.replications}: holds no replication (a folder with a report.yaml);"
                   " run from the repository root or give --replications")
    if args.replication not in known:
        raise fail(f"report: unknown replication {args.replication!r}; known: {', '.join(known)} "
                   f"(folders of {args.replications} with a report.yaml)")
    try:  # the specs first: a wrong report.yaml is named before the run tree is read
        artefacts(args.replication, args.replications)
    except TableSpecError as exc:
        raise fail(f"report: {exc}") from None
    # one table or figure (the workflow renders them in parallel), or all figures: a part of the folder
    part = args.only or ("figures" if args.figures_only else None)
    out = claim_out(args.out, "report", FOLDER, part=None if part is None else f"report-{part}")
    tree = _tree(args.runs, _listed(args.tasks, "--tasks", "task"), _listed(args.labels, "--labels", "run"))
    try:
        written = render_replication(
            args.replication, tree, out, args.replications, args.figures_only, only=args.only
        )
    except (ClaimSpecError, TableSpecError) as exc:  # a render bug (a KeyError in the code) shows its traceback
        raise fail(f"report: {exc}") from None
    _warn(tree)
    for path in written:
        print(path)
    return 0


def _not_run_at(args: argparse.Namespace) -> dict[str, str]:
    """Replication -> why it does not run at ``--preset`` (its settings there are null), none without it."""
    if not getattr(args, "preset", None):
        return {}
    from heads.sheet.declare import SheetError
    from heads.sheet.settings import preset_settings, replications

    try:
        running = preset_settings(args.replications, args.preset)
    except (SheetError, KeyError, FileNotFoundError) as exc:
        raise fail(f"claims: --preset {args.preset}: {exc}") from None
    return {name: f"replication {name!r} does not run at preset {args.preset!r} (its settings.yaml sets it to null)"
            for name in replications(args.replications) if name not in running}


@writes_outputs
def cmd_claims(args: argparse.Namespace) -> int:
    from collections import Counter

    from heads.report import ClaimSpecError, evaluate_all, load_all, write_ledger
    from heads.report.ledger import LedgerError, ledger_tasks, merge_baselines, merge_results, merged_environments

    out = claim_out(args.out, "claims", FOLDER, part="claims")  # beside the report's tables in the same folder
    try:  # merged: each replication's claims on the task its ledger judged them on (the battery's model's)
        claims = load_all(args.replications, tasks=ledger_tasks(args.ledgers) if args.ledgers else None)
    except ClaimSpecError as exc:
        raise fail(f"claims: {exc}") from None
    if not claims:
        raise fail(f"claims: no {args.replications}/*/claims.yaml found")
    from heads.report.robustness import load as load_measurement

    measurement = []
    for path in args.robustness or []:
        try:
            found = load_measurement(path)
        except ValueError as exc:
            raise fail(f"claims: --robustness {exc}") from None
        if found is None:
            raise fail(f"claims: --robustness {path}: no such file")
        measurement.append(found)
    if args.ledgers:
        ledgers = [Path(p) for p in args.ledgers]
        absent = [f"{p} ({no_file(p)})" for p in ledgers if not p.is_file()]
        if absent:
            raise fail(f"claims: --ledgers {', '.join(absent)}: not a ledger file (a replication's ledger is written "
                       "by `heads report --only claims`)")
        folders = [p.parent for p in ledgers]
        baselines = [f / "baselines.csv" for f in folders if (f / "baselines.csv").is_file()]
        try:
            results = merge_results(ledgers, claims, measurement, _not_run_at(args))
            table = merge_baselines(baselines)
        except (LedgerError, OSError) as exc:
            raise fail(f"claims: {exc}") from None
        written = write_ledger(results, out, merged_environments(folders), baselines=table)
    else:
        tree = _tree(args.runs)
        results = evaluate_all(claims, tree, measurement)
        _warn(tree)
        written = write_ledger(results, out, tree.environment_note(read_only=True), tree)
    for path in written:
        print(path)
    counts = Counter(r.verdict for r in results)
    print(", ".join(f"{v}: {n}" for v, n in sorted(counts.items())))
    return 0


@writes_outputs
def cmd_rows(args: argparse.Namespace) -> int:
    from heads.report.kinds import KINDS
    from heads.report.rows import frame

    if args.kind not in ("runs", *KINDS):
        raise fail(f"rows: unknown kind {args.kind!r}; known: {', '.join(['runs', *KINDS])}")
    if args.out is not None:
        claim_out(args.out, "rows", FILE)
    tree = _tree(args.runs, _listed(args.tasks, "--tasks", "task"))
    table = frame(tree, args.kind)
    _warn(tree)
    if args.out is None:
        print(table.to_csv(index=False), end="")
        return 0
    from heads.io import write_text

    print(write_text(args.out, table.to_csv(index=False)))
    return 0


def register(sub) -> None:
    p = sub.add_parser("report", help="render one replication's tables (CSV + Markdown) and figures (PNG)")
    p.add_argument("--runs", type=Path, required=True, help="the run tree, OUT/runs")
    p.add_argument("--replication", required=True, help="a folder of --replications with a report.yaml")
    p.add_argument("--out", type=Path, required=True, help="folder to write to, e.g. OUT/michel2019")
    p.add_argument(
        "--replications",
        type=Path,
        default=Path("replications"),
        help="folder of replications (report.yaml, claims.yaml, runs.py); the claims go to OUT/claims.md",
    )
    p.add_argument(
        "--tasks",
        metavar="T1,T2",
        help="read only these tasks' runs (the workflow passes the replication's own, so the tables never "
        "depend on which other runs happen to be finished; a claim on another task is not run at this preset)",
    )
    p.add_argument(
        "--labels",
        metavar="L1,L2",
        help="read only these run-sheet entries (the workflow passes the replication's own: its ledger and tables "
        "never read a run another replication declares, finished or not; a claim reading an arm none of them "
        "declares is not run at this preset)",
    )
    p.add_argument("--figures-only", action="store_true", help="render the figures only")
    p.add_argument(
        "--only", metavar="NAME", help="render just one table (NAME), figure (NAME.png) or the claims page (claims)"
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("claims", help="evaluate every replications/*/claims.yaml: OUT/CLAIMS.md, OUT/claims.csv, "
                       "OUT/claims.json (the same results as data) and OUT/baselines.csv (each task's baseline "
                       "beside its trivial ones)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", type=Path, help="the run tree, OUT/runs: evaluate every claim on it")
    source.add_argument("--ledgers", nargs="+", metavar="OUT/REP/claims.csv",
                        help="merge the replications' own ledgers (the claims.json, baselines.csv and "
                        "environments.json beside each; a ledger older than claims.json is read from its CSV) "
                        "instead: replications run apart make one ledger; a claim whose replication is not given "
                        "is inconclusive, saying it has not run")
    p.add_argument("--replications", type=Path, default=Path("replications"), help="folder of replication specs")
    p.add_argument("--out", type=Path, required=True, help="folder for CLAIMS.md and claims.csv, e.g. OUT")
    p.add_argument("--preset", help="with --ledgers: the preset the ledgers are of; the claims of a replication "
                   "that does not run at it (its settings.yaml says null) are not run at this preset, saying so")
    p.add_argument("--robustness", type=Path, nargs="+",
                   help="measurements of other machines (results/bench/perturbation.json, machines.json): the "
                   "ledger marks the verdicts any of them flipped as fragile")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("rows", help="the tidy rows of a run tree as CSV: what a report.yaml table spec filters, "
                       "groups and aggregates (one per run, or per head, site, curve level, model ... of an analysis)")
    p.add_argument("--runs", type=Path, required=True, help="the run tree, OUT/runs")
    p.add_argument("--kind", default="runs", help="runs (default), or a kind of analysis rows: ablation, curve, ...")
    p.add_argument("--tasks", metavar="T1,T2", help="only these tasks")
    p.add_argument("--out", type=Path, help="write the CSV here (default: print it)")
    p.set_defaults(func=cmd_rows)
