"""The findings of README.md and docs/RESULTS.md are rendered from the committed ledgers, and docs/GUIDE.md's
paper cost from `heads plan`: a block between markers is re-rendered by `python -m tools.readme` (the repository's
logistics, outside the library), and the committed files must be current (a hand-edited or stale number fails
here); their links must resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import refused

from heads.cli.common import UserError
from heads.plan import plan, table
from tools.readme import FILES, ReadmeError, block, cost, counts, main, refresh

ROOT = Path(__file__).resolve().parents[1]
HEADER = ("claim,replication,verdict,effect,ci_low,ci_high,paper_value,n_seeds,method,p_value,p_adjusted,precondition,"
          "task,quantity,condition,effect_size,per_seed,note,robustness\n")


def _ledger(path: Path) -> Path:
    path.write_text(HEADER + 'A1-x,r,supported,0.0123,0.01,0.0146,1,4,m,0.001,0.002,met,lm,(a - b) / |b|,< +0.033,,,,'
                    '\nB1-x,r,not tested at this scale,,,,,0,,,,not met,lm,share,< +0.2,,,,\n')
    return path


def test_a_block_is_the_ledgers_verdicts_with_their_intervals(tmp_path):
    text = block(_ledger(tmp_path / "claims.csv"))
    assert "2 claims: 1 supported, 1 not tested at this scale" in text
    assert "| A1-x | supported | 0.0123 [0.01, 0.0146] | 4 | `(a - b) / \\|b\\|` < +0.033 |" in text
    assert "| B1-x | not tested at this scale | - | 0 |" in text


def test_a_brief_block_names_the_untested_claims_in_one_line(tmp_path):
    text = block(_ledger(tmp_path / "claims.csv"), brief=True)
    assert "| A1-x | supported |" in text and "| B1-x |" not in text
    assert text.endswith("Not tested at this scale (the ledger says why): B1-x.")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: claims.csv brief -->\n<!-- /ledger -->\n")
    assert "| B1-x |" not in refresh(readme) and "B1-x." in refresh(readme)


def test_a_brief_block_says_why_claims_are_not_run_at_this_preset(tmp_path):
    """A replication null at the preset, or a task or an arm its settings leave out (the ledger's note names it):
    the line says each reason only where a row has it."""
    from heads.report.claims import NOT_DECLARED

    ledger = tmp_path / "claims.csv"
    null = "C1-x,r,not run at this preset,,,,,0,,,,not run,lm,,,,,replication 'r' does not run at preset 's',\n"
    ledger.write_text(HEADER + null)
    assert block(ledger, brief=True).endswith(
        "Not run at this preset (their replication runs at another preset): C1-x.")
    ledger.write_text(HEADER + null + f"C2-x,q,not run at this preset,,,,,0,,,,not run,lm,,,,,{NOT_DECLARED} "
                      "lm/scratch/uniform/0.5 (its settings),\n")
    assert block(ledger, brief=True).endswith(
        "Not run at this preset (their replication runs at another preset, or this preset leaves out an arm they "
        "read, which the ledger's note names): C1-x, C2-x.")
    # a task its replication runs none of at this preset (the GPU visit's cls claims): said as such, alone or not
    task = "C3-x,q,not run at this preset,,,,,0,,,,not run,cls,,,,,this preset runs no 'cls' models for q (x),\n"
    ledger.write_text(HEADER + task)
    assert block(ledger, brief=True).endswith(
        "Not run at this preset (this preset runs none of their task, which the ledger's note names): C3-x.")
    ledger.write_text(HEADER + null + task)
    assert block(ledger, brief=True).endswith(
        "Not run at this preset (their replication runs at another preset, or this preset runs none of their task, "
        "which the ledger's note names): C1-x, C3-x.")


def test_a_ledger_judged_by_older_rules_is_refused(tmp_path):
    """A ledger written before the p_adjusted column (Holm, scale gates) is not shown as a current one."""
    old = tmp_path / "claims.csv"
    lines = _ledger(old).read_text().splitlines()
    cut = lines[0].split(",").index("p_adjusted")
    old.write_text("\n".join(",".join(x for i, x in enumerate(line.split(",")) if i != cut) for line in lines) + "\n")
    for render in (block, lambda path: counts([(path, "claims.csv")])):
        with pytest.raises(ReadmeError, match="claims.csv: judged by the rules before multiplicity"):
            render(old)
    assert "| A1-x | supported | 0.0123 [0.01, 0.0146] | 4 |" in block(_ledger(tmp_path / "new.csv"))


def test_refresh_replaces_only_what_lies_between_the_markers(tmp_path):
    _ledger(tmp_path / "claims.csv")
    readme = tmp_path / "README.md"
    readme.write_text("# t\nbefore\n<!-- ledger: claims.csv -->\nA1-x supported 0.99 (typed by hand)\n"
                      "<!-- /ledger -->\nafter\n")
    text = refresh(readme)
    assert text.startswith("# t\nbefore\n<!-- ledger: claims.csv -->\n") and text.endswith("<!-- /ledger -->\nafter\n")
    assert "typed by hand" not in text and "0.0123 [0.01, 0.0146]" in text
    readme.write_text(text)
    assert refresh(readme) == text  # rendering is a fixed point
    assert main([str(readme), "--check"]) == 0
    readme.write_text(text.replace("0.0123", "0.0124"))
    assert main([str(readme), "--check"]) == 1
    assert main([str(readme)]) == 0 and readme.read_text() == text


def test_an_unclosed_block_or_a_missing_ledger_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: claims.csv -->\nno end\n")
    with pytest.raises(ReadmeError, match="no closing"):
        refresh(readme)
    readme.write_text("<!-- ledger: nowhere.csv -->\n<!-- /ledger -->\n")
    with pytest.raises(UserError):
        main([str(readme)])


def test_the_committed_readme_and_results_quote_the_committed_ledgers():
    """Every findings block of README.md and docs/RESULTS.md equals what its ledger renders, and docs/GUIDE.md's
    paper cost what `heads plan` says: `python -m tools.readme`."""
    assert [f.as_posix() for f in FILES] == ["README.md", "docs/RESULTS.md", "docs/GUIDE.md"]
    for name in FILES:
        path = ROOT / name
        assert "<!-- ledger: " in path.read_text() or "<!-- plan: " in path.read_text(), name
        assert refresh(path) == path.read_text(), f"{name}'s rendered blocks are stale: run `python -m tools.readme`"
    assert "<!-- plan: paper -->" in (ROOT / "docs/GUIDE.md").read_text()


def test_a_plan_block_is_the_presets_cost_from_the_repositorys_sheet(tmp_path):
    """A plan block holds `heads plan`'s table for its preset, costed from the replications/ folder of the
    repository holding the file (found from a subfolder too); a typed number is replaced, and rendering is a
    fixed point."""
    rows = table(plan("smoke", root=ROOT / "replications"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "replications").symlink_to(ROOT / "replications")
    guide = docs / "GUIDE.md"
    guide.write_text("# cost\n<!-- plan: smoke -->\n| lm | 42 | typed by hand |\n<!-- /plan -->\nafter\n")
    text = refresh(guide)
    assert "typed by hand" not in text and text.endswith("<!-- /plan -->\nafter\n")
    assert all(row in text for row in rows) and "% model-FLOPs utilisation:" in text and "% of the compute" in text
    rendered = cost("smoke", tmp_path / "replications")
    assert text == f"# cost\n<!-- plan: smoke -->\n\n{rendered}\n\n<!-- /plan -->\nafter\n"
    guide.write_text(text)
    assert refresh(guide) == text


def test_a_plan_block_for_no_preset_or_outside_a_repository_is_refused(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "replications").symlink_to(ROOT / "replications")
    guide = tmp_path / "repo" / "GUIDE.md"
    guide.write_text("<!-- plan: huge -->\n<!-- /plan -->\n")
    with pytest.raises(ReadmeError, match="plan block: preset 'huge' is not one of"):
        refresh(guide)
    guide.write_text("<!-- plan: smoke -->\nno end\n")
    with pytest.raises(ReadmeError, match="has no closing '<!-- /plan -->'"):
        refresh(guide)
    lone = tmp_path / "elsewhere"
    lone.mkdir()
    (lone / "GUIDE.md").write_text("<!-- plan: smoke -->\n<!-- /plan -->\n")
    with pytest.raises(ReadmeError, match="no replications/ folder"):  # tmp_path lies outside any repository
        refresh(lone / "GUIDE.md")


def test_a_counts_block_is_one_row_per_ledger(tmp_path):
    """`counts` takes several ledgers (paths relative to the file) and counts each one's verdicts; several ledgers
    in any other form are refused."""
    _ledger(tmp_path / "a.csv")
    old = tmp_path / "old" / "claims.csv"
    old.parent.mkdir()
    old.write_text("claim,replication,verdict,effect,ci_low,ci_high,n_seeds,p_adjusted\nC1,r,inconclusive,1,0,2,2,\n")
    text = counts([(tmp_path / "a.csv", "a.csv"), (old, "old/claims.csv")])
    assert "| ledger | claims | supported | not supported | inconclusive | failed | not tested at this scale |" in text
    assert "| `a.csv` | 2 | 1 | 0 | 0 | 0 | 1 |" in text and "| `old/claims.csv` | 1 | 0 | 0 | 1 | 0 | 0 |" in text
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "RESULTS.md").write_text("<!-- ledger: ../a.csv ../old/claims.csv counts -->\n<!-- /ledger -->\n")
    assert "| `../a.csv` | 2 |" in refresh(docs / "RESULTS.md")
    (docs / "RESULTS.md").write_text("<!-- ledger: ../a.csv ../old/claims.csv brief -->\n<!-- /ledger -->\n")
    with pytest.raises(ReadmeError, match="only a `counts` block"):
        refresh(docs / "RESULTS.md")


def test_the_command_renders_readme_and_results_by_default(tmp_path, monkeypatch):
    _ledger(tmp_path / "claims.csv")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- ledger: claims.csv counts -->\n<!-- /ledger -->\n")
    (tmp_path / "docs" / "RESULTS.md").write_text("<!-- ledger: ../claims.csv -->\n<!-- /ledger -->\n")
    (tmp_path / "docs" / "GUIDE.md").write_text("# guide\nno block\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--check"]) == 1
    assert main([]) == 0 and main(["--check"]) == 0
    assert "| `claims.csv` | 2 |" in (tmp_path / "README.md").read_text()
    assert "(`../claims.csv`)" in (tmp_path / "docs" / "RESULTS.md").read_text()


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", markdown, flags=re.M)}


def test_the_links_of_readme_and_its_docs_resolve():
    """A newcomer's links (README.md, docs/RESULTS.md, docs/REPRODUCIBILITY.md) name files that exist, and
    headings that exist where they name one."""
    for name in ("README.md", "docs/RESULTS.md", "docs/REPRODUCIBILITY.md"):
        source = ROOT / name
        prose = re.sub(r"`[^`\n]*`", "", source.read_text())  # a code span is no link (a ledger's quantity)
        links = re.findall(r"\]\(([^)\s]+)\)", prose)
        assert links, name
        for link in links:
            if "://" in link:
                continue
            target, _, anchor = link.partition("#")
            path = (source.parent / target).resolve() if target else source
            assert path.exists(), f"{name}: {link} names no file"
            if anchor:
                assert anchor in _anchors(path.read_text()), f"{name}: {link} names no heading"


def test_the_block_is_the_same_from_any_working_directory(tmp_path, monkeypatch):
    """The tally names the ledger as the README does, so a relative or absolute README path renders alike."""
    _ledger(tmp_path / "claims.csv")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: claims.csv -->\n<!-- /ledger -->\n")
    absolute = refresh(readme)
    monkeypatch.chdir(tmp_path)
    assert refresh(Path("README.md")) == absolute and "(`claims.csv`)" in absolute


def test_a_folder_where_a_file_belongs_is_not_called_missing(tmp_path, capsys):
    refused([str(tmp_path)], capsys, f"tools.readme: {tmp_path}: a folder, not a file", main=main)


def test_a_readme_or_ledger_that_is_not_utf8_is_named(tmp_path, capsys):
    """A file saved by another tool is refused in one line naming it and its first bad byte."""
    bad = b"\xff\xfe"  # never UTF-8
    readme = tmp_path / "README.md"
    readme.write_bytes(b"# Title\n" + bad)
    refused([str(readme), "--check"], capsys, f"{readme}: not UTF-8 text (byte 8: b'\\xff')", main=main)
    ledger = _ledger(tmp_path / "claims.csv")
    ledger.write_bytes(b"\xef\xbb\xbf" + ledger.read_bytes() + bad)  # behind a byte-order mark: a file offset
    readme.write_text("<!-- ledger: claims.csv -->\n<!-- /ledger -->\n")
    size = ledger.stat().st_size - len(bad)
    refused([str(readme), "--check"], capsys, f"{ledger}: not UTF-8 text (byte {size}: b'\\xff')", main=main)


def test_readme_rendering_lives_outside_the_library():
    """README rendering is this repository's logistics (tools/), not the library's: heads has no readme module
    and no `heads readme` command, and `python -m tools.readme --help` runs from the repository root. The
    ledger's reading of a robustness measurement stays in heads/report (the ledger's own column:
    heads/report/robustness.py)."""
    from heads.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert "readme" not in commands and "claims" in commands
    done = subprocess.run([sys.executable, "-m", "tools.readme", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "usage: python -m tools.readme" in done.stdout and "--check" in done.stdout


def test_a_wall_block_is_the_benchmarks_measured_time_and_refuses_an_unmeasured_one(tmp_path):
    """README states the default run's time from results/bench/summary.json (benchmarks/bench_dag.py), never typed:
    a wall block holds the entry's time, target and conditions; an entry the benchmarks never recorded is refused."""
    import json

    (tmp_path / "results" / "bench").mkdir(parents=True)
    entry = {"measured": 81.5, "unit": "minutes on 2 cores", "target": 90, "met": True, "conditions": "from nothing"}
    (tmp_path / "results" / "bench" / "summary.json").write_text(json.dumps({"dag.quick.wall_min": entry}))
    readme = tmp_path / "README.md"
    readme.write_text("in\n<!-- wall: dag.quick.wall_min -->\n42 minutes, typed\n<!-- /wall -->\nafter\n")
    text = refresh(readme)
    assert text == ("in\n<!-- wall: dag.quick.wall_min -->\n\n81.5 minutes on 2 cores (target 90): from nothing.\n\n"
                    "<!-- /wall -->\nafter\n")
    readme.write_text(text)
    assert refresh(readme) == text
    readme.write_text("<!-- wall: dag.huge.wall_min -->\n<!-- /wall -->\n")
    with pytest.raises(ReadmeError, match="holds no entry 'dag.huge.wall_min'"):
        refresh(readme)
