"""The Snakemake workflow: config validated before any job, DAGs resolvable for every preset and profile,
lint clean, and the report's artefact list in step with the library."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = shutil.which("snakemake")
needs_snakemake = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed (pip install -e '.[test]')")


def snakemake(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@needs_snakemake
@pytest.mark.parametrize("preset", ["smoke", "tiny", "paper"])
def test_dry_run_resolves_every_preset(preset):
    import re

    from heads.sheet import build, dag_for

    run = snakemake("-n", "--forceall", "--config", f"preset={preset}")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out, re.M)}
    sheet = build(ROOT / "replications", dag_for(ROOT / "replications", preset))
    # one job per entry of the run sheet, and every replication's tables, figures and ledger page
    assert counts["train"] == len(sheet.labels("train")) + len(sheet.labels("prune")), counts
    assert counts["analyse"] == len(sheet.runs) - counts["train"], counts
    assert counts["replication_claims"] == 4 and counts["claims"] == 1 and counts["prepare_data"] == 3, counts


@needs_snakemake
def test_a_fresh_clone_runs_the_whole_dag_despite_the_committed_results(tmp_path):
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path, results=True)
    assert (repo / "results" / "CLAIMS.md").exists() and not (repo / "results" / "runs").exists()
    run = snakemake("-n", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "Nothing to be done" not in out
    for rule in ("prepare_data", "train", "claims", "figure", "prune_uniform"):
        assert f"\n{rule} " in out, rule


@needs_snakemake
@pytest.mark.parametrize("profile", ["gpu", "slurm"])
def test_profiles_dry_run(profile):
    run = snakemake("-n", "--forceall", "--profile", f"workflow/profiles/{profile}", "--config", "preset=paper")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]


@needs_snakemake
@pytest.mark.parametrize("preset", ["smoke", "tiny", "paper"])
def test_lint_is_clean(preset):
    run = snakemake("--lint", "--config", f"preset={preset}")
    assert run.returncode == 0 and "Congratulations" in run.stdout + run.stderr, run.stdout + run.stderr


@needs_snakemake
@pytest.mark.parametrize(
    "config,named",
    [
        (["preset=huge"], ["huge", "preset"]),
        (["threads=0"], ["threads", "minimum"]),
        (["dag={'tiny': {'seeds': []}}"], ["seeds"]),
    ],
)
def test_bad_config_fails_before_any_job(config, named):
    run = snakemake("-n", "--config", *config)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert all(word in out for word in named), out[-2000:]
    assert "Building DAG" not in out


def test_every_replication_is_one_folder_the_workflow_and_the_report_discover():
    from heads.report.render import artefacts, replications
    from heads.sheet import replications as with_runs

    names = replications(ROOT / "replications")
    assert names == with_runs(ROOT / "replications") == ["michel2019", "overprovisioning", "training_time",
                                                           "voita2019"]
    for name in names:
        assert (ROOT / "replications" / name / "claims.yaml").is_file(), name
        kinds = artefacts(name, ROOT / "replications")  # every listed renderer exists
        assert kinds["tables"] and kinds["figures"], name


def test_cli_help_lists_commands():
    run = subprocess.run([sys.executable, "-m", "heads", "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    for command in ("inspect", "prune", "train", "evaluate", "score", "ablate", "curve", "report", "claims", "list"):
        assert command in run.stdout


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    run = subprocess.run([ruff, "check", "heads", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


@needs_snakemake
@pytest.mark.parametrize(
    "entry,named",
    [
        ("{label: mine, task: lm, strategy: magic}", "unknown strategy 'magic'"),
        ("{label: mine, task: lm, strategy: oneshot, params: {scorer: magic}}", "scorer: 'magic' is not one of"),
        ("{label: mine, task: lm, strategy: oneshot, params: {ratio: lots}}", "ratio: expected float"),
        # a ratio reaches the strategy as its ratio parameter: a strategy without one says so
        ("{label: mine, task: lm, strategy: curriculum, ratio: 0.5}", "has no parameters ['ratio']"),
    ],
)
def test_a_bad_custom_strategy_fails_before_any_job(tmp_path, entry, named):
    extra = tmp_path / "custom.yaml"
    extra.write_text(f"dag:\n  smoke:\n    custom:\n      - {entry}\n")
    run = snakemake("-n", "--config", "preset=smoke", "--configfile", str(extra))
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "custom, entry 'mine'" in out and named in out, out[-2000:]
    assert "Building DAG" not in out


@needs_snakemake
def test_a_custom_label_may_not_replace_a_built_in_run(tmp_path):
    extra = tmp_path / "custom.yaml"
    extra.write_text("dag:\n  smoke:\n    custom:\n      - {label: oneshot, task: lm, strategy: oneshot, ratio: 0.5}\n")
    run = snakemake("-n", "--config", "preset=smoke", "--configfile", str(extra))
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "built-in run" in out and "choose another" in out, out[-2000:]


@needs_snakemake
def test_a_new_replication_is_one_folder(tmp_path):
    """docs/ADDING_A_REPLICATION.md's worked example: its folder copied in, and nothing else, plans its runs,
    its tables, figures and ledger page."""
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path)
    shutil.copytree(ROOT / "docs" / "examples" / "scorers", repo / "replications" / "scorers")
    run = snakemake("-n", "--config", "preset=smoke", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    for path in ("runs/lm/posthoc/magnitude/0.5/seed1/summary.json", "runs/lm/posthoc/random/0.5/seed0/summary.json",
                 "scorers/pruned_vs_scratch.csv", "scorers/pruned_vs_scratch.png", "scorers/claims.md"):
        assert f"results/smoke/{path}" in out, path


@needs_snakemake
def test_paths_with_spaces_reach_every_command_whole():
    import shlex

    run = snakemake("-n", "-p", "--config", "preset=smoke", "data_root=my data", "out=my out")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    commands = [shlex.split(line.split("Shell command: ", 1)[1].split(" > ")[0])
                for line in out.splitlines() if line.startswith("Shell command: heads")]
    assert commands
    for argv in commands:
        for flag in ("--root", "--runs", "--out"):
            if flag in argv:
                assert argv[argv.index(flag) + 1].startswith(("my data", "my out")), argv
        assert all(not a.startswith(("data/", "out/")) for a in argv), argv  # no path split at its space
    trains = [a for a in commands if a[1] == "train"]
    assert all("data.root=my data" in a for a in trains), trains[0]
