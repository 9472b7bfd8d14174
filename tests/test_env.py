"""The environment behind every number: its fields, every record and analysis output carrying it, the lock
it should match, and the sentence that says when results come from different environments."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
import torch
from conftest import build
from packaging.requirements import Requirement

from heads import env
from heads.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {
    "heads", "git_commit", "git_dirty", "python", "platform", "packages", "matches_lock", "torch_build",
    "cpu_capability", "cpu_model", "cpu_count", "threads", "deterministic", "device", "precision",
    "matmul_precision", "variables",
}


def check_environment(record: dict) -> dict:
    e = record[env.KEY]
    assert set(e) == FIELDS
    assert set(e["packages"]) == set(env.PACKAGES) and e["packages"]["torch"] == torch.__version__
    assert e["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert e["torch_build"]["version"] == torch.__version__ and e["torch_build"]["blas"]
    assert e["threads"] == torch.get_num_threads() and e["device"] == "cpu" and e["precision"] == "float32"
    assert e["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", e["git_commit"])
    return e


def test_environment_names_versions_build_cpu_threads_device_and_precision():
    model = build("llama").double()
    e = env.environment(model)
    assert e["precision"] == "float64" and e["device"] == "cpu" and e["heads"] == __import__("heads").__version__
    assert e["packages"]["numpy"] == importlib.metadata.version("numpy")
    assert e["threads"] == torch.get_num_threads() and isinstance(e["cpu_count"], int)
    json.dumps(e)  # it goes into JSON records as is


def test_git_commit_is_null_outside_a_checkout(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "_CHECKOUT", tmp_path)
    assert env._git() == (None, None)
    assert env.matches_lock() is None  # no lock beside a package that is not a checkout


def test_fix_threads_sets_the_count_and_deterministic_algorithms():
    before = torch.get_num_threads()
    try:
        env.fix_threads(1)
        assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
        assert env.environment()["threads"] == 1 and env.environment()["deterministic"] is True
    finally:
        torch.set_num_threads(before)
        torch.use_deterministic_algorithms(False)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """One smoke run and every analysis output written from it."""
    root = tmp_path_factory.mktemp("env")
    run, data = root / "run", f"data.root={root / 'data'}"

    def identity(label: str, kind: str, variant: str, arm: str = "none", ratio: float = 0.0) -> str:
        return json.dumps({"label": label, "kind": kind, "task": "lm", "seed": 0, "variant": variant, "arm": arm,
                           "ratio": ratio, "knob": None, "from_run": None})

    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), data, "train.progress=false",
                 "--run", identity("lm/baseline/none/0.0/seed0", "run", "baseline")]) == 0
    pruned = root / "pruned"
    commands = [
        ["prune", str(run), "--strategy", "posthoc", "--param", "ratio=0.5", "batches=1", "--evaluate", "--out",
         str(pruned), "--run", identity("lm/posthoc/importance/0.5/seed0", "run", "posthoc", "importance", 0.5)],
        ["ablate", str(run), "--batches", "1", "--out", str(root / "ablate.json")],
        ["curve", str(run), "--param", "step=0.5", "max_ratio=0.5", "batches=1", "--out", str(root / "curve.json")],
        ["score", str(run), "--scorer", "magnitude", "--batches", "1", "--out", str(root / "score.json")],
        ["roles", str(run), "--batches", "1", "--out", str(root / "roles.json")],
        ["speed", str(run), "--ratios", "0.5", "--batches", "2", "--repeats", "1", "--examples", "2", "--warmup", "0",
         "--out", str(root / "speed.json"), "--run", identity("lm/analysis/speed", "speed", "speed")],
        ["evaluate", str(run), "--out", str(root / "evaluate.json")],
    ]
    for argv in commands:
        assert main(argv) == 0, argv
    files = [run / "summary.json", pruned / "pruning.json", pruned / "eval.json", pruned / "summary.json"]
    files += [root / f"{name}.json" for name in ("ablate", "curve", "score", "roles", "speed", "evaluate")]
    return files


def test_every_record_and_analysis_output_names_its_environment(outputs):
    envs = [check_environment(json.loads(path.read_text())) for path in outputs]
    assert env.describe_mix(envs) is None  # one process, one environment
    assert json.loads(outputs[0].read_text())["environment"]["threads"] == 1  # the run's train.threads


def test_the_report_reads_records_with_an_environment_as_without(outputs, tmp_path):
    """The new key is no number: the collected records and speed rows equal those of the same files without
    it."""
    from heads.report.collect import RunTree
    from heads.report.rows import rows

    def tree(root: Path, strip: bool) -> RunTree:
        places = {0: "lm/baseline/none/0.0/seed0/summary.json", 3: "lm/posthoc/importance/0.5/seed0/summary.json",
                  -2: "lm/analysis/speed.json"}
        for index, rel in places.items():
            data = json.loads(outputs[index].read_text())
            if strip:
                data.pop(env.KEY)
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(json.dumps(data))
        return RunTree(root)

    with_env, without = tree(tmp_path / "a", False), tree(tmp_path / "b", True)
    assert [r.record for r in with_env.runs] == [r.record for r in without.runs] and len(with_env.runs) == 2
    assert rows(with_env, "speed") == rows(without, "speed") != []


def test_describe_mix_names_what_differs_and_how_often():
    a = {"packages": {"torch": "2.13.0", "numpy": "2.4.6"}, "cpu_capability": "AVX2", "threads": 1}
    b = {"packages": {"torch": "2.13.0", "numpy": "2.4.6"}, "cpu_capability": "AVX512", "threads": 1}
    assert env.describe_mix([a, a]) is None
    assert env.describe_mix([]) is None
    assert env.describe_mix([a, b, b]) == "3 records from different environments: cpu_capability AVX2 (1) vs AVX512 (2)"
    c = {**a, "packages": {"torch": "2.12.0", "numpy": "2.4.6"}}
    text = env.describe_mix([a, c, None])
    assert "packages.torch 2.12.0 (1) vs 2.13.0 (1)" in text and "1 of 3 records name no environment" in text
    assert "numpy" not in text and "threads" not in text


def test_read_lock_and_mismatches(tmp_path):
    lock = tmp_path / "constraints.txt"
    torch_release = torch.__version__.split("+")[0]
    lock.write_text(f"# comment\nTorch=={torch_release}  # local label ignored\nnumpy==0.0.1\nno-such-pkg==1.0\n")
    assert env.read_lock(lock) == {"torch": torch_release, "numpy": "0.0.1", "no-such-pkg": "1.0"}
    assert env.lock_mismatches(lock) == [f"numpy: locked 0.0.1, installed {importlib.metadata.version('numpy')}"]
    lock.write_text("numpy>=1\n")
    with pytest.raises(ValueError, match="NAME==VERSION"):
        env.read_lock(lock)


def test_installed_versions_are_the_lock():
    """README's commands install with -c constraints.txt: what is installed must be what is locked."""
    assert env.lock_mismatches() == [], "installed versions differ from constraints.txt (refresh: python .ci/lock.py)"


def _dependencies(name: str, extras: tuple[str, ...] = ()) -> set[str]:
    """Installed distributions ``name`` needs (with ``extras``), transitively, by normalised name."""
    seen: set[str] = set()
    todo = [(name, extras)]
    while todo:
        dist, extra = todo.pop()
        for text in importlib.metadata.requires(dist) or []:
            req = Requirement(text)
            wanted = not req.marker or any(req.marker.evaluate({"extra": e}) for e in ("", *extra))
            key = env._normalise(req.name)
            if wanted and key not in seen:
                try:
                    importlib.metadata.version(req.name)
                except importlib.metadata.PackageNotFoundError:
                    continue  # an extra of the other install (e.g. the test tools beside the workflow)
                seen.add(key)
                todo.append((req.name, tuple(req.extras)))
    return seen


def test_the_lock_covers_every_dependency_of_heads():
    """A dependency added to pyproject.toml without refreshing the lock would install unpinned."""
    missing = sorted(_dependencies("heads", ("workflow", "test")) - set(env.read_lock()))
    assert not missing, f"not in constraints.txt: {missing} (refresh: python .ci/lock.py)"


def test_the_lock_honours_pyproject_ranges():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = env.read_lock()
    # the extras the lock resolves (.ci/lock.py): the pretrained extra's packages are the test extra's too
    locked_extras = __import__("runpy").run_path(str(ROOT / ".ci" / "lock.py"))["EXTRAS"].split(",")
    direct = project["dependencies"] + [d for name, ds in project["optional-dependencies"].items()
                                        if name in locked_extras for d in ds]
    bad = [d for d in map(Requirement, direct) if not d.specifier.contains(lock[env._normalise(d.name)], True)]
    assert not bad, f"locked versions outside pyproject's ranges: {bad}"


def test_readme_states_the_python_floor_pyproject_requires():
    """The floor a newcomer reads is the one pip enforces (the tests themselves need 3.11: tomllib)."""
    import re
    import tomllib

    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    stated = re.search(r"Python (\d+\.\d+)\+", (ROOT / "README.md").read_text())
    assert stated and floor == f">={stated.group(1)}", (floor, stated and stated.group(0))
