"""``python -m tools.readme``: the findings in README.md and docs/RESULTS.md rendered from the committed ledgers,
and a preset's cost in docs/GUIDE.md rendered from ``heads plan``: numbers in the docs are never typed by hand.
This repository's documents are its own logistics, not the library's: ``heads`` imports none of it.

A block starts at a line ``<!-- ledger: PATH [FORM] -->`` and ends at ``<!-- /ledger -->``; :func:`refresh`
replaces what lies between with the ledger's verdicts, so a number in the file cannot drift from the ledger it came
from. PATH is a ``claims.csv``, relative to the file that holds the block (README.md names
``results/tiny/claims.csv``, docs/RESULTS.md ``../results/tiny/claims.csv``), and the block names it as written there.
FORM is one of:

- none: every claim as a row, with its effect, 95 % interval, n and what was measured;
- ``brief``: rows only for the claims that were tested, without the quantity; the untested ones named in one line;
- ``counts``: one line per ledger, how many claims it holds by verdict; only this form takes several PATHs
  (``<!-- ledger: A/claims.csv B/claims.csv counts -->``), a table of one row each.

A block ``<!-- plan: PRESET -->`` ... ``<!-- /plan -->`` holds :func:`heads.plan.plan`'s table for the preset at
the default GPU class and MFU, with the task that costs most: the replications it costs are the ``replications/``
folder of the repository holding the file.

A block ``<!-- wall: KEY -->`` ... ``<!-- /wall -->`` holds one whole-DAG wall-clock that
benchmarks/bench_dag.py measured (``results/bench/summary.json``'s entry KEY: the time, its target, how it was
measured), so a run's time stated in README is the benchmark's, never typed.

A ledger judged by the rules before the multiplicity and scale gates (no ``p_adjusted`` column) is refused, not
shown as a current one. ``python -m tools.readme`` re-renders :data:`FILES` (or the files named), from the
repository root; ``--check`` says whether they are current, which a test asserts for the committed ones.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from heads.cli.common import UserError, claim_out, one_line
from heads.io import no_file
from heads.outpath import FILE, writes_outputs
from heads.report.collect import ENCODING

START = re.compile(r"^<!-- ledger: (?P<paths>\S+(?: \S+)*?)(?: (?P<form>brief|counts))? -->$")
END = "<!-- /ledger -->"
PLAN, PLAN_END = re.compile(r"^<!-- plan: (?P<preset>\S+) -->$"), "<!-- /plan -->"
WALL, WALL_END = re.compile(r"^<!-- wall: (?P<key>\S+) -->$"), "<!-- /wall -->"
SUMMARY = Path("results/bench/summary.json")  # the benchmarks' measurements, from the repository root
# what `python -m tools.readme` renders, from the repository root
FILES = (Path("README.md"), Path("docs/RESULTS.md"), Path("docs/GUIDE.md"))
UNTESTED = "not tested at this scale"
NOT_RUN = "not run at this preset"
NOT_YET = "not run yet"
ORDER = ("supported", "not supported", "inconclusive", "failed", "not tested at this scale", NOT_YET, NOT_RUN)


class ReadmeError(ValueError):
    """A file whose ledger blocks are not well formed (an unclosed block, a missing ledger)."""


def _number(text: str) -> str:
    try:
        return f"{float(text):.3g}"
    except ValueError:
        return ""


def _read(ledger: Path) -> list[dict[str, str]]:
    """A ledger's rows; one judged by the rules before multiplicity and scale gates is refused."""
    if not ledger.is_file():
        raise ReadmeError(f"{ledger}: no such ledger (render it first: heads report / heads claims)")
    # a ledger saved with a byte-order mark reads the same
    reader = csv.DictReader(io.StringIO(_text(ledger, ENCODING), newline=""))
    rows = list(reader)
    if "p_adjusted" not in (reader.fieldnames or []):
        raise ReadmeError(f"{ledger}: judged by the rules before multiplicity and scale gates (no p_adjusted "
                          "column): re-render it from its runs")
    return rows


def block(ledger: Path, shown: str | None = None, brief: bool = False) -> str:
    """The verdict counts and one row per claim of a ledger: its effect with the 95 % interval and n (``shown``:
    the ledger's path as the file names it, so the text does not depend on where it is rendered from).
    ``brief``: rows only for the claims that were tested, without the quantity (the ledger's page has it); the
    untested ones are named in one line."""
    rows = _read(ledger)
    counts = Counter(r["verdict"] for r in rows)
    tally = ", ".join(f"{counts[v]} {v}" for v in ORDER if counts[v])
    about = _about(ledger)
    engineering = Counter(r["verdict"] for r in rows if about.get(r["claim"]) == "engineering")
    said = ", ".join(f"{engineering[v]} {v}" for v in ORDER if engineering[v])
    lines = [f"{len(rows)} claims: {tally} (`{shown or ledger.as_posix()}`)."
             + (f" Of these, {sum(engineering.values())} are engineering claims (speed, time, memory, bytes: facts "
                f"of the implementation and the machine, not of what heads do): {said}." if said else ""), "",
             *(["| claim | verdict | effect [95 % CI] | n |", "| --- | --- | --- | --- |"] if brief else
               ["| claim | verdict | effect [95 % CI] | n | measured |", "| --- | --- | --- | --- | --- |"])]
    untested = [r["claim"] for r in rows if r["verdict"] == UNTESTED] if brief else []
    not_run = [r["claim"] for r in rows if r["verdict"] == NOT_RUN] if brief else []
    not_yet = [r["claim"] for r in rows if r["verdict"] == NOT_YET] if brief else []
    for r in rows:
        if r["claim"] in untested or r["claim"] in not_run or r["claim"] in not_yet:
            continue
        effect = _number(r["effect"])
        if effect and _number(r["ci_low"]) and _number(r["ci_high"]):
            effect += f" [{_number(r['ci_low'])}, {_number(r['ci_high'])}]"
        quantity = r.get("quantity", "").replace("|", "\\|")  # a table cell: GitHub reads \| as a bar
        measured = f"`{quantity}` {r.get('condition', '')}".strip() if quantity else "-"
        row = f"| {r['claim']} | {r['verdict']} | {effect or '-'} | {r['n_seeds'] or '-'} |"
        lines.append(row if brief else f"{row} {measured} |")
    if untested:
        lines += ["", f"{UNTESTED.capitalize()} (the ledger says why): {', '.join(untested)}."]
    if not_yet:
        lines += ["", f"{NOT_YET.capitalize()} (their replication's target has not run since they were declared): "
                      f"{', '.join(not_yet)}."]
    if not_run:
        from heads.report.claims import not_run_reason

        # each reason is said only where a row has it: a task or an arm the preset leaves out, the note says which
        reasons = {not_run_reason(r.get("note")) for r in rows if r["claim"] in not_run}
        why = ", or ".join([*(["their replication runs at another preset"] if "null" in reasons else []),
                            *(["this preset runs none of their task"] if "task" in reasons else []),
                            *(["this preset leaves out an arm they read"] if "arm" in reasons else [])])
        why += ", which the ledger's note names" if reasons & {"task", "arm"} else ""
        lines += ["", f"{NOT_RUN.capitalize()} ({why}): {', '.join(not_run)}."]
    return "\n".join(lines)


def _about(ledger: Path) -> dict[str, str]:
    """Claim id -> what it is about (science, engineering), from the claims.yaml files of the repository that
    holds ``ledger`` (none found: every claim is taken as science)."""
    from heads.report.spec import load_claims

    for folder in ledger.resolve().parents:
        if (folder / "replications").is_dir():
            return {c.id: c.about for path in sorted((folder / "replications").glob("*/claims.yaml"))
                    for c in load_claims(path)}
    return {}


def counts(ledgers: list[tuple[Path, str]]) -> str:
    """One table row per ledger (a path, and the path as the file names it): its claims counted by verdict."""
    lines = ["| ledger | claims | " + " | ".join(ORDER) + " |", "| --- |" + " --: |" * (len(ORDER) + 1)]
    for ledger, shown in ledgers:
        tally = Counter(r["verdict"] for r in _read(ledger))
        lines.append(f"| `{shown}` | {sum(tally.values())} | " + " | ".join(str(tally[v]) for v in ORDER) + " |")
    return "\n".join(lines)


def cost(preset: str, replications: Path) -> str:
    """What ``heads plan --preset PRESET`` costs at the default GPU class and MFU: the GPU, the table, the task
    that costs most."""
    from heads.plan import PlanError, plan, share, table

    try:
        p = plan(preset, root=replications)
    except PlanError as exc:
        raise ReadmeError(f"plan block: {exc}") from None
    g = p.gpu
    return "\n".join([f"On an {g.name} ({g.tflops:g} TFLOP/s dense bf16, datasheet) at an assumed "
                      f"{p.mfu * 100:g} % model-FLOPs utilisation:", "", *table(p), "", share(p)])


def wall(key: str, summary: Path) -> str:
    """The wall-clock benchmarks/bench_dag.py recorded under ``key`` in ``summary``, as one sentence."""
    import json

    try:
        entry = json.loads(_text(summary))[key]
    except (FileNotFoundError, KeyError, ValueError):
        raise ReadmeError(f"wall block: {summary} holds no entry {key!r} (benchmarks/bench_dag.py records it)") \
            from None
    target = f" (target {entry['target']})" if entry.get("target") is not None else ""
    said = f": {entry['conditions']}" if entry.get("conditions") else ""
    return f"{entry['measured']} {entry['unit']}{target}{said}."


def _above(readme: Path, name: str = "replications", what: str = "a plan block") -> Path:
    """``name`` (the replications folder, the benchmarks' summary) in the repository that holds ``readme``: in its
    folder or one above."""
    for folder in readme.resolve().parents:  # its own folder first
        if (folder / name).exists():
            return folder / name
    shown = f"{name}/ folder" if name == "replications" else name
    raise ReadmeError(f"{readme}: {what}, but no {shown} in or above its folder")


def _ledger_block(readme: Path, line: str, paths: list[str], form: str | None) -> str:
    """What a ledger block (``line``, in ``readme``) holds: its ledgers' verdicts in its form."""
    if form == "counts":
        return counts([(readme.parent / p, p) for p in paths])
    if len(paths) > 1:
        raise ReadmeError(f"{readme}: the block '{line}' names several ledgers; only a `counts` block takes more "
                          "than one")
    return block(readme.parent / paths[0], paths[0], form == "brief")


def current(readme: Path) -> str:
    """The file's text exactly as stored (a byte-order mark, CRLF line ends and a missing final newline kept), which
    :func:`refresh` returns unchanged outside its blocks."""
    return _text(readme)


def _text(path: Path, encoding: str = "utf-8") -> str:
    """The file's text; one that is not UTF-8 is refused naming its first bad byte (saved by another tool)."""
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        try:  # the offset in the file: a byte-order mark is valid UTF-8, so plain UTF-8 finds the same byte
            data.decode("utf-8")
            start = 0
        except UnicodeDecodeError as exc:
            start = exc.start
        raise ReadmeError(f"{path}: not UTF-8 text (byte {start}: {data[start:start + 1]!r}); save it as UTF-8") \
            from None


def refresh(readme: Path) -> str:
    """The file's text with every ledger block re-rendered (ledger paths relative to the file's folder), and
    every plan and wall block. Only what lies between a block's lines changes: every other byte (line ends, CRLF or LF,
    a byte-order mark, a last line without a newline) is kept as it is, and a block's lines take its opening
    line's line end."""
    text = current(readme)
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    lines = text[len(bom):].splitlines(keepends=True)
    out, i = [bom], 0
    while i < len(lines):
        out.append(lines[i])
        line = lines[i].strip()
        m, planned, timed = START.match(line), PLAN.match(line), WALL.match(line)
        i += 1
        if not (m or planned or timed):
            continue
        closing = END if m else PLAN_END if planned else WALL_END
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == closing), None)
        if end is None:
            raise ReadmeError(f"{readme}: the block '{line}' has no closing '{closing}'")
        if planned:
            body = cost(planned.group("preset"), _above(readme))
        elif timed:
            body = wall(timed.group("key"), _above(readme, str(SUMMARY), "a wall block"))
        else:
            body = _ledger_block(readme, line, m.group("paths").split(), m.group("form"))
        newline = lines[i - 1][len(lines[i - 1].rstrip("\r\n")):] or "\n"
        out += [newline, body.replace("\n", newline), newline, newline, lines[end]]
        i = end + 1
    return "".join(out)


# -- the command ------------------------------------------------------------------------------------------------
PROG = "python -m tools.readme"


def fail(message: str) -> UserError:
    """A one-line refusal (exit status 2), naming this command."""
    return UserError(f"tools.readme: {message}")


@writes_outputs
def run(args: argparse.Namespace) -> int:
    """Re-render (or, with ``--check``, compare) each file's blocks; 1 where ``--check`` finds one stale."""
    from heads.io import write_text

    stale = 0
    for readme in args.readme or FILES:
        if not readme.is_file():
            raise fail(f"{readme}: {no_file(readme)}")
        if not args.check:  # the files it rewrites are outputs too: the same rule, one writer each
            claim_out(readme, "tools.readme", FILE)
    for readme in args.readme or FILES:
        try:
            text = refresh(readme)
        except ReadmeError as exc:
            raise fail(str(exc)) from None
        if text == current(readme):
            print(f"{readme}: its rendered blocks are current")
        elif args.check:
            print(f"{readme}: its rendered blocks differ from their sources; run: {PROG} {readme}")
            stale = 1
        else:
            write_text(readme, text)
            print(f"{readme}: rendered blocks re-rendered")
    return stale


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="re-render the findings blocks (<!-- ledger: PATH --> ... "
                                "<!-- /ledger -->) of README.md and docs/RESULTS.md from the committed ledgers, "
                                "and the cost blocks (<!-- plan: PRESET --> ... <!-- /plan -->) of docs/GUIDE.md "
                                "from heads plan (run from the repository root)")
    p.add_argument("readme", type=Path, nargs="*", metavar="FILE",
                   help="the files to render (default: README.md docs/RESULTS.md docs/GUIDE.md, from the "
                   "repository root)")
    p.add_argument("--check", action="store_true", help="only say whether the blocks are current (exit 1 if not)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run, and turn a bad input into one line on stderr and exit status 2, as ``heads`` does."""
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(one_line(exc), file=sys.stderr)
        raise
    except OSError as exc:  # a file it reads or writes unreadable: the path and why
        message = f"tools.readme: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}"
        print(message, file=sys.stderr)
        raise UserError(message) from None


if __name__ == "__main__":
    sys.exit(main())
