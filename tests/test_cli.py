"""The command line end to end on a smoke run: list, score, prune by strategy, ablate, curve, evaluate;
and a strategy defined outside the package, registered through HEADS_PLUGINS."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from heads.cli import main
from heads.cli.common import UserError

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, data_root):
    root = tmp_path_factory.mktemp("cli")
    out = root / "run"
    assert (
        main(
            [
                "train",
                "--task",
                "lm",
                "--preset",
                "smoke",
                "--out",
                str(out),
                f"data.root={data_root}",
                "train.progress=false",
            ]
        )
        == 0
    )
    return out


def test_the_command_line_parses_without_importing_torch():
    # every DAG job pays its command's imports; the report, table and data jobs need no torch, so the parser
    # (every command's options and help) must not pull it in (heads plan's GPU table once did, ~5 s a job)
    code = ("import sys; from heads.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_what_the_workflow_reads_while_it_parses_imports_no_scipy_or_torch():
    # Snakemake imports these at every parse (every dry run, every cluster job's own parse): scipy's statistics
    # alone took 1.4 s of it; the report imports them where it computes an interval or a test
    code = ("import sys; import heads.report.render, heads.report.spec, heads.sheet, heads.freshness, heads.resolve; "
            "print(sorted(m for m in ('scipy', 'torch', 'transformers', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_list_names_every_registry(capsys):
    main(["list"])
    out = capsys.readouterr().out
    for name in (
        "lm",
        "mt",
        "cls",
        "importance",
        "ablation",
        "similarity",
        "js",
        "confidence",
        "magnitude",
        "random",
        "none",
        "scratch",
        "posthoc",
        "iterative",
        "oneshot",
        "curriculum",
        "dropout_regime",
        "l0",
        "early",
    ):
        assert f"  {name} " in out, name


def test_score_prune_evaluate(smoke_run, tmp_path, data_root):
    assert (
        main(["score", str(smoke_run), "--scorer", "importance", "--batches", "2", "--out", str(tmp_path / "s.json")])
        == 0
    )
    scores = json.loads((tmp_path / "s.json").read_text())["scores"]
    assert all(len(v["values"]) == 4 for v in scores.values())
    out = tmp_path / "pruned"
    assert (
        main(
            [
                "prune",
                str(smoke_run),
                "--strategy",
                "posthoc",
                "--param",
                "ratio=0.5",
                "batches=2",
                "--evaluate",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert sum(len(v) for v in json.loads((out / "config.json").read_text())["head_layout"].values()) == 4
    assert "perplexity" in json.loads((out / "eval.json").read_text())
    assert (
        main(
            [
                "evaluate",
                str(out),
                "--task",
                "lm",
                "--preset",
                "smoke",
                f"data.root={data_root}",
                "--out",
                str(tmp_path / "e.json"),
            ]
        )
        == 0
    )
    # the evaluations' example-level values beside their results (heads.examples), never inside them
    from heads.examples import ExampleValues

    for beside, result in ((out / "examples.json", out / "eval.json"), (tmp_path / "e.examples.json",
                                                                      tmp_path / "e.json")):
        values = ExampleValues.read(beside)
        assert values is not None and "per_example" not in json.loads(result.read_text())
        assert values.metric("perplexity") == pytest.approx(json.loads(result.read_text())["perplexity"], rel=1e-6)


def test_ablate_and_curve(smoke_run, tmp_path):
    assert main(["ablate", str(smoke_run), "--batches", "2", "--out", str(tmp_path / "a.json")]) == 0
    table = json.loads((tmp_path / "a.json").read_text())
    assert len(table["heads"]) == 8 and len(table["all_but_one"]) == 2
    # each head's per-example statistic beside it: the report redoes the tests on resampled examples, and on
    # all of them they give the p-values the table wrote
    from heads.paired import paired_ttests

    kept = json.loads((tmp_path / "a.examples.json").read_text())
    assert kept["units"] == table["examples"] and [tuple(h) for h in kept["heads"]] == [
        (r["site"], r["position"]) for r in table["heads"]]
    base = np.asarray([np.nan if v is None else v for v in kept["columns"]["base"]])
    ablated = np.asarray([[np.nan if v is None else v for v in row] for row in kept["columns"]["ablated"]])
    assert paired_ttests(base, ablated, kept["noise_tol"]) == pytest.approx([r["p_value"] for r in table["heads"]])
    assert (
        main(
            [
                "curve",
                str(smoke_run),
                "--param",
                "step=0.25",
                "max_ratio=0.75",
                "batches=2",
                "--out",
                str(tmp_path / "c.json"),
            ]
        )
        == 0
    )
    points = json.loads((tmp_path / "c.json").read_text())["points"]
    assert [p["pruned"] for p in points] == [0, 2, 4, 6]
    # a random baseline averages independent orders; each order is kept beside the mean
    argv = ["curve", str(smoke_run), "--param", "scorer=random", "step=0.25", "max_ratio=0.5", "batches=2", "seed=3"]
    assert main([*argv, "orders=3", "--out", str(tmp_path / "r.json")]) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    orders = record["per_order"]
    assert len(orders) == 3 and len({json.dumps([p["removed"] for p in o]) for o in orders}) > 1
    metric = record["metric"]
    for level, point in enumerate(record["points"]):
        assert point[metric] == pytest.approx(sum(o[level][metric] for o in orders) / 3)
    assert main([*argv, "--out", str(tmp_path / "r1.json")]) == 0  # one order: the curve of seed 3 itself
    single = json.loads((tmp_path / "r1.json").read_text())
    assert "per_order" not in single and single["points"] == orders[0]
    with pytest.raises(UserError, match="orders: must be >= 1, got 0"):
        main([*argv, "orders=0", "--out", str(tmp_path / "r0.json")])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["prune", "minilm", "--out", "x"], "exactly one of"),
        (["prune", "minilm", "--keep", "-1", "--out", "x"], "--keep must be >= 0"),
        (["inspect", "/nonexistent"], "neither a checkpoint folder"),
        (["train", "--task", "lm", "--preset", "huge", "--out", "x"], "preset: 'huge' is not one of"),
        (["train", "--task", "lm", "--out", "x", "strategy.name=magic"], "unknown strategy 'magic'"),
    ],
)
def test_clear_errors(argv, message):
    with pytest.raises(SystemExit, match=message):
        main(argv)


def test_a_strategy_from_outside_the_package_registers_and_runs(tmp_path, data_root):
    env = {
        **os.environ,
        "HEADS_PLUGINS": "my_strategy",
        "PYTHONPATH": f"{PLUGINS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    listed = subprocess.run([sys.executable, "-m", "heads", "list"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "last_layer_one_head  Keep one head in the last layer" in listed.stdout
    out = tmp_path / "run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "heads",
            "train",
            "--task",
            "lm",
            "--preset",
            "smoke",
            "--out",
            str(out),
            f"data.root={data_root}",
            "train.progress=false",
            "train.steps=10",
            "strategy.name=last_layer_one_head",
            "strategy.params.at_step=5",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    layout = json.loads((out / "summary.json").read_text())["head_layout"]
    assert [len(v) for v in layout.values()] == [4, 1]
