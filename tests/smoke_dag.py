"""Helpers for the slow end-to-end tests: a fresh copy of the repository, Snakemake at the smoke preset, and the
numbers of a finished run with every wall-clock measurement left out (those differ run to run by nature)."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = shutil.which("snakemake")
# Names of measured times, rates and memory, and the environment record (machine and versions, which say where
# a number came from, not what it is): every other number a run writes must repeat exactly.
TIMING = re.compile(r"seconds|wall|per_s|time|ttt_|throughput|speed|peak_mem|resumed|repeats|^environment$")


def copy_repo(dest: Path, results: bool = False) -> Path:
    """The project's files as a fresh clone would have them (tracked and new, never ignored outputs); the
    committed results/ only with ``results``."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        if (name.startswith("results/") and not results) or not (ROOT / name).is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    return dest


def snakemake_args(*args: str) -> list[str]:
    return [SNAKEMAKE, "--config", "preset=smoke", *args]


def snakemake(repo: Path, *args: str, timeout: int = 3000, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_args(*args), cwd=repo, capture_output=True, text=True, timeout=timeout, env=env)


def incomplete_outputs(repo: Path) -> set[Path]:
    """Outputs Snakemake has marked as being written (its markers: url-safe base64 of the path, split into
    ``@``-prefixed chunks at the file-name limit)."""
    marks = repo / ".snakemake" / "incomplete"
    out = set()
    for mark in marks.rglob("*") if marks.is_dir() else []:
        if mark.is_dir() or mark.name == "migration_underway":
            continue
        chunks = [part.lstrip("@") for part in mark.relative_to(marks).parts]
        out.add((repo / base64.urlsafe_b64decode("".join(chunks)).decode()).resolve())
    return out


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not TIMING.search(k)}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _table(path: Path) -> list[dict]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    # The ledger holds time-based claims beside the rest: their rows are measurements of the clock.
    return [_untimed(r) for r in rows if not TIMING.search(r.get("quantity", ""))]


def untimed_results(out: Path) -> dict[str, object]:
    """Every number under ``out`` (run records, tables, the ledger, model weights) except measured times."""
    found: dict[str, object] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if "speed" in rel or "clock" in rel:  # inference speed, training-step times: nothing but clock readings
            continue
        if rel.startswith(".settings/"):  # what the run sheet declared (the jobs' inputs), not what they measured
            continue
        if path.name == "environments.json":  # where the runs ran (a ledger's record: machine, versions, whether the
            continue                          # checkout had uncommitted edits), not what they measured
        if path.name == "claims.json":  # the ledger as data: its time-based claims are those of the CSV beside it
            timed = {r["claim"] for r in csv.DictReader(path.with_name("claims.csv").open())
                     if TIMING.search(r.get("quantity", ""))}
            doc = json.loads(path.read_text())
            found[rel] = _untimed({**doc, "results": [r for r in doc["results"] if r["claim"] not in timed]})
        elif path.suffix == ".json":
            found[rel] = _untimed(json.loads(path.read_text()))
        elif path.suffix == ".jsonl":
            found[rel] = [_untimed(json.loads(line)) for line in path.read_text().splitlines()]
        elif path.suffix == ".csv":
            found[rel] = _table(path)
        elif path.suffix == ".safetensors":
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
