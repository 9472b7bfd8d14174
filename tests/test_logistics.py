"""The repository's logistics (tools/: the GPU visit, the CPU-minute calibration, ``python -m tools.plan``) stay
outside the library: no module under heads/ imports them, at module level or inside a function, and the package
that ``pip install`` builds holds none of them."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGISTICS = {"tools", "benchmarks"}  # the top-level names of the repository's non-library code


def imported(path: Path) -> set[str]:
    """The top-level names every import in ``path`` reaches (relative imports stay inside heads)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_library_imports_no_logistics():
    offenders = {str(p.relative_to(ROOT)): sorted(imported(p) & LOGISTICS) for p in (ROOT / "heads").rglob("*.py")}
    assert {p: names for p, names in offenders.items() if names} == {}


def test_the_finder_sees_an_import_inside_a_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from tools.visit import CAPS\n    import tools.cpu_cost\n    from . import x\n")
    assert imported(source) == {"tools"}


def test_the_moved_modules_are_gone_from_the_library():
    assert not [n for n in ("visit.py", "cpu_cost.py", "gpus.py", "report/readme.py", "sheet.py")
                if (ROOT / "heads" / n).exists()]
    assert all((ROOT / "tools" / n).is_file()
               for n in ("__init__.py", "visit.py", "cpu_cost.py", "plan.py", "readme.py"))


def test_the_run_sheet_is_one_module_per_job():
    """heads/sheet/ declares runs, merges a preset's settings, takes custom entries, assembles the checked sheet
    and renders commands, each in its own module; the package re-exports the names replications import."""
    import heads.sheet as sheet

    modules = sorted(p.stem for p in (ROOT / "heads" / "sheet").glob("*.py"))
    assert modules == ["__init__", "assemble", "commands", "custom_entries", "declare", "settings"]
    exported = {"RunSpec", "run_label", "baseline", "preset_settings", "build", "command_line", "custom"}
    assert exported <= set(sheet.__all__)
    assert sheet.RunSpec.__module__ == "heads.sheet.declare" and sheet.command_line.__module__ == "heads.sheet.commands"
    # no module shares a name with a function the package exports (`import heads.sheet.x as m` would be the function)
    assert not set(modules) & set(sheet.__all__)


def test_the_installed_package_holds_heads_only():
    """setuptools finds ``heads*`` only: ``pip install`` never puts a top-level ``tools`` beside it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["heads*"]
    assert "." in project["tool"]["pytest"]["ini_options"]["pythonpath"]  # the tests import tools/ from the root
