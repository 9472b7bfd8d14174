#!/usr/bin/env python3
"""Refresh constraints.txt, the locked environment: `python .ci/lock.py` from the repository root, in a venv
with pip >= 22.2 on Python 3.11. pip's own resolver resolves `-e .[workflow,test]` afresh (ignoring what is
installed, downloading nothing it need not) and the exact versions it picks are written, one per package.

Why pip and not pip-compile/uv: the resolution is the one `pip install` makes with the same index
configuration, no extra tool to install. Why no hashes: pip refuses hash-checking beside an editable install
(`pip install -e .`: "there is no single file to hash"), and torch's file depends on the machine (the local
CPU wheel here, a CUDA build from PyPI elsewhere) while the release is the same; exact versions are what
every machine can honour.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "constraints.txt"
EXTRAS = "workflow,test"

HEADER = f"""\
# The locked environment: the exact version of every package `pip install -e '.[{EXTRAS}]'` resolves to
# (resolved on Python {{python}}, {{platform}}). README's commands, .ci/run and environment.yml install with
# `-c constraints.txt`; pyproject.toml keeps open ranges for people who install heads as a library.
# Refresh (then commit): python .ci/lock.py
# Checked by tests/test_env.py (installed versions equal these); every record's environment says whether they did.
# No hashes: pip refuses them beside the editable install of heads, and torch's file differs by machine.
"""


def resolve() -> dict:
    """pip's report of what it would install into an empty environment."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
             "--report", str(report), "-e", f".[{EXTRAS}]"],
            cwd=ROOT, check=True,
        )
        return json.loads(report.read_text())


def main() -> int:
    report = resolve()
    env = report["environment"]
    lines = []
    for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if name == "heads":
            continue
        release, _, label = version.partition("+")
        # A local label (+cpu) names a build, not a release: `==2.13.0` accepts 2.13.0+cpu here and the
        # CUDA build of 2.13.0 on a GPU machine, while `==2.13.0+cpu` exists on no public index.
        note = f"  # installed here as {version}" if label else ""
        lines.append(f"{name}=={release}{note}")
    text = HEADER.format(python=env["python_full_version"], platform=f"{env['sys_platform']} {env['platform_machine']}")
    OUT.write_text(text + "\n".join(lines) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(lines)} packages pinned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
