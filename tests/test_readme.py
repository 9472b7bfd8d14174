"""README's findings are rendered from the committed ledgers: a block between markers is re-rendered by
`heads readme`, and the committed README must be current (a hand-edited or stale number fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from heads.cli import main
from heads.cli.common import UserError
from heads.report.readme import ReadmeError, block, refresh

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


def test_a_ledger_judged_by_older_rules_says_so(tmp_path):
    """A ledger written before the p_adjusted column (Holm, scale gates) is shown, but not as a current one."""
    old = tmp_path / "claims.csv"
    lines = _ledger(old).read_text().splitlines()
    cut = lines[0].split(",").index("p_adjusted")
    old.write_text("\n".join(",".join(x for i, x in enumerate(line.split(",")) if i != cut) for line in lines) + "\n")
    text = block(old)
    assert "**Judged by the rules before multiplicity and scale gates** (this ledger has no `p_adjusted`" in text
    assert "| A1-x | supported | 0.0123 [0.01, 0.0146] | 4 |" in text
    assert "Judged by the rules before" not in block(_ledger(tmp_path / "new.csv"))


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
    assert main(["readme", str(readme), "--check"]) == 0
    readme.write_text(text.replace("0.0123", "0.0124"))
    assert main(["readme", str(readme), "--check"]) == 1
    assert main(["readme", str(readme)]) == 0 and readme.read_text() == text


def test_an_unclosed_block_or_a_missing_ledger_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: claims.csv -->\nno end\n")
    with pytest.raises(ReadmeError, match="no closing"):
        refresh(readme)
    readme.write_text("<!-- ledger: nowhere.csv -->\n<!-- /ledger -->\n")
    with pytest.raises(UserError):
        main(["readme", str(readme)])


def test_the_committed_readme_quotes_the_committed_ledgers():
    """Every findings block of README.md equals what its ledger renders: re-render with `heads readme`."""
    readme = ROOT / "README.md"
    assert "<!-- ledger: " in readme.read_text()
    assert refresh(readme) == readme.read_text(), "README's ledger blocks are stale: run `heads readme`"


def test_the_block_is_the_same_from_any_working_directory(tmp_path, monkeypatch):
    """The tally names the ledger as the README does, so a relative or absolute README path renders alike."""
    _ledger(tmp_path / "claims.csv")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ledger: claims.csv -->\n<!-- /ledger -->\n")
    absolute = refresh(readme)
    monkeypatch.chdir(tmp_path)
    assert refresh(Path("README.md")) == absolute and "(`claims.csv`)" in absolute
