"""The Snakemake workflow: config validated, DAG resolvable, lint clean, CLI reachable."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = shutil.which("snakemake")
needs_snakemake = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed (pip install -e '.[test]')")


def snakemake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@needs_snakemake
def test_dry_run_resolves_the_default_dag():
    run = snakemake("-n", "--forceall")
    assert run.returncode == 0, run.stderr
    assert "surgery_table" in run.stdout + run.stderr


@needs_snakemake
def test_lint_is_clean():
    run = snakemake("--lint")
    assert run.returncode == 0 and "Congratulations" in run.stdout + run.stderr, run.stdout + run.stderr


@needs_snakemake
def test_bad_config_fails_before_any_job_naming_the_key():
    run = snakemake("-n", "--config", "preset=huge")
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "huge" in out and "preset" in out and "Building DAG" not in out


def test_cli_help_lists_commands():
    run = subprocess.run([sys.executable, "-m", "heads", "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    assert "inspect" in run.stdout and "prune" in run.stdout


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    run = subprocess.run([ruff, "check", "heads", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
