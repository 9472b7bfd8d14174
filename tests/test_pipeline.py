"""The whole DAG at smoke scale, end to end, in a fresh copy of the repository (slow: minutes).

Checks every table, figure and the claims ledger appear; a second invocation does nothing; deleting
one figure regenerates just that figure; `snakemake --report` builds the HTML report.
"""

import csv
from pathlib import Path

import pytest
from smoke_dag import SNAKEMAKE, snakemake

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed (pip install -e '.[test]')"),
]


@pytest.fixture(scope="module")
def repo(smoke_run) -> Path:
    return smoke_run


def planned_jobs(text: str) -> dict[str, int]:
    """The "Job stats" table of a dry run: rule -> count."""
    lines = text[text.index("Job stats:") :].splitlines()[3:]
    jobs = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def test_every_table_figure_and_the_ledger_exist(repo):
    out = repo / "results/smoke"
    for replication, figures in {
        "michel2019": ["curves", "ablation", "curve_at", "speed"],
        "voita2019": ["l0", "roles"],
        "overprovisioning": ["pruned_vs_scratch"],
        "training_time": ["quality_vs_time", "time_to_target", "redundancy"],
    }.items():
        for figure in figures:
            png = out / replication / f"{figure}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert (out / replication / "claims.md").exists()
        assert list((out / replication).glob("*.csv")) and list((out / replication).glob("*.md"))
    with (out / "claims.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0][:8] == ["claim", "replication", "verdict", "effect", "ci_low", "ci_high", "paper_value", "n_seeds"]
    assert len(rows) > 20
    verdicts = {r[2] for r in rows[1:]}
    assert verdicts <= {"supported", "not supported", "inconclusive", "failed", "not tested"}
    assert "# Claims ledger" in (out / "CLAIMS.md").read_text()


def test_a_second_run_does_nothing(repo):
    run = snakemake(repo, "-n")
    assert run.returncode == 0
    assert "Nothing to be done" in run.stdout + run.stderr


def test_deleting_one_figure_regenerates_just_that_figure(repo):
    figure = repo / "results/smoke/michel2019/curves.png"
    before = figure.read_bytes()
    figure.unlink()
    plan = snakemake(repo, "-n")
    out = plan.stdout + plan.stderr
    assert "figure" in out and "train " not in out
    assert (
        "total                 1" in out.replace("total                   1", "total                 1")
        or out.count("rule figure:") + out.count("localrule figure:") == 1
    )
    run = snakemake(repo, "--cores", "1")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert figure.read_bytes() == before  # same inputs, same picture


def test_html_report_builds(repo):
    run = snakemake(repo, "--report", "report.html")  # bench rules take threads lazily: no --cores needed
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    html = (repo / "report.html").read_text(errors="replace")
    assert "pruning" in html.lower()
