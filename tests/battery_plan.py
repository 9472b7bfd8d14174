"""Dry runs of the head-level battery on one model, shared by the battery tests: what the plan writes, and whether
it leaves the committed results of every other model byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

from test_workflow import ROOT, snakemake, with_shipped_packages

from heads.battery import BATTERY


def digests(folder: Path, skip: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` outside ``skip``."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and skip not in p.parents}


def plan_shipped(tmp_path: Path, model: str, slug: str | None = None) -> tuple[str, list[str], bool]:
    """``snakemake -n -p pretrained --config preset=pretrained model=MODEL`` (a shipped name, or a local folder
    whose results go under ``slug``) in a copy of the repository with its committed results: the output, the
    planned outputs, and whether every result outside ``results/pretrained/SLUG`` is unchanged."""
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path / "repo", results=True)
    shipped = ROOT / "resources" / "data" / "shipped"
    if shipped.is_dir():  # the converted cache, read only (else the plan says "not checked" and goes on)
        (repo / "resources" / "data").mkdir(parents=True)
        (repo / "resources" / "data" / "shipped").symlink_to(shipped)
    mine = repo / "results" / "pretrained" / (slug or model)
    before = digests(repo / "results", mine)
    run = snakemake("-n", "-p", "--forceall", BATTERY, "--config", "preset=pretrained", f"model={model}",
                    cwd=repo, env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    outputs = [p.strip() for line in out.splitlines() if line.lstrip().startswith("output: ")
               for p in line.split("output: ", 1)[1].split(",")]
    return out, outputs, digests(repo / "results", mine) == before
