"""The library's "a model for a task" (heads.loading): refusals are library errors, which the command line words
as its own one-line errors; no library module imports the command line."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from heads.io import InputError, OutputConflict
from heads.loading import LoadError, model_for_task, resolve_source, run_config
from heads.surgery.persist import check_pruned_out

HEADS = Path(__file__).resolve().parents[1] / "heads"


def test_a_bad_source_is_a_library_error_not_an_exit(tmp_path):
    with pytest.raises(LoadError, match="neither a checkpoint folder.*nor one of the shipped models") as caught:
        model_for_task(str(tmp_path / "nothing"), "lm", "smoke")
    assert isinstance(caught.value, InputError) and not isinstance(caught.value, SystemExit)
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    with pytest.raises(LoadError, match="the run has not finished"):  # a run folder before its model/ exists
        resolve_source(str(run))


def test_a_run_folders_own_config_wins_over_a_task_that_says_otherwise(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"task": "lm", "preset": "smoke"}))
    with pytest.raises(LoadError, match=r"--task mt: .* is a run with its own config.json \(task 'lm'\)"):
        run_config("mt", run_dir=tmp_path)
    with pytest.raises(LoadError, match="--task is required unless the source is a run folder"):
        run_config(None, "smoke")


def test_the_command_line_words_a_library_refusal_as_its_own_error(tmp_path, capsys):
    from heads.cli import main

    missing = str(tmp_path / "nothing")
    with pytest.raises(LoadError) as library:
        resolve_source(missing)
    with pytest.raises(SystemExit) as cli:
        main(["inspect", missing])
    assert cli.value.code == 2
    assert capsys.readouterr().err.strip() == str(cli.value) == f"heads: {library.value}"


def test_prune_never_writes_over_its_source_nor_a_folder_it_did_not_write(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    with pytest.raises(OutputConflict, match="is or holds the source it reads"):
        check_pruned_out(tmp_path, source, overwrite=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    with pytest.raises(OutputConflict, match="holds notes.txt, which prune did not write"):
        check_pruned_out(mine, source, overwrite=False)
    check_pruned_out(mine, source, overwrite=True)  # --overwrite: the user's say
    check_pruned_out(tmp_path / "new", source, overwrite=False)


def _imports(tree: ast.AST, module: str) -> list[str]:
    """Every module ``tree`` imports, at module level or inside a function (relative imports resolved)."""
    package = module.split(".")[:-1]  # heads/x/__init__.py is heads.x.__init__: its package is heads.x
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from .x import y: x in the package, one level up per extra dot
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return found


def test_no_library_module_imports_the_command_line():
    """The library is usable without its command line: only heads/cli/ itself and ``python -m heads`` (the
    entry point, heads/__main__.py) import heads.cli."""
    offenders = []
    for path in sorted(HEADS.rglob("*.py")):
        rel = path.relative_to(HEADS.parent)
        if rel.parts[1] == "cli" or rel == Path("heads/__main__.py"):
            continue
        module = ".".join(rel.with_suffix("").parts)
        for name in _imports(ast.parse(path.read_text(), str(path)), module):
            if name == "heads.cli" or name.startswith("heads.cli."):
                offenders.append(f"{rel}: {name}")
    assert offenders == []
    assert _imports(ast.parse("from .cli import common"), "heads.x") == ["heads.cli", "heads.cli.common"]
