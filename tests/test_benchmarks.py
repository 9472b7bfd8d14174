"""Every benchmark script runs end to end at a minimal setting and writes its table and summary keys.

Nothing here asserts a timing: the numbers at these sizes mean nothing, the
point is that the scripts work (``snakemake bench`` runs them for real). The
scripts run in this process as ``__main__`` (as ``python benchmarks/x.py``
would, benchmarks/ on sys.path) on the smoke presets, which saves the seconds
of importing torch and transformers per script.
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
FAST = ["--steps", "1", "--warmup", "0", "--preset", "smoke"]

# script -> (extra arguments, summary keys it must write)
CASES = {
    "bench_pruned_step": (
        # --profile always: the op-breakdown code the other scripts share runs here, once.
        [*FAST, "--profile", "always", "--batches", "1", "32", "--prune", "0.5", "--masked", "0.5"],
        [
            f"pruned_step.{t}.{m}.b32.pruned50.realised_over_theoretical"
            for t in ("lm", "mt")
            for m in ("train", "infer")
        ],
    ),
    "bench_ablation": (
        [*FAST, "--profile", "never", "--batches", "1", "--chunks", "2", "8"],
        ["ablation.lm.b1.speedup", "ablation.mt.b1.speedup"],
    ),
    "bench_importance": (
        [*FAST, "--profile", "never", "--batch", "2"],
        ["importance.lm.cost_vs_train_step", "importance.mt.cost_vs_train_step"],
    ),
    "bench_memory": (
        # One task: the profiler's memory timeline takes about a second per phase to analyse.
        [*FAST, "--batch", "2", "--tasks", "mt"],
        [
            f"memory.mt.{k}"
            for k in (
                "param_bytes.before",
                "param_bytes.after",
                "optimizer_state_bytes.before",
                "optimizer_state_bytes.after",
                "peak_step_bytes",
            )
        ],
    ),
    "bench_engine": (
        [*FAST, "--no-stock"],
        ["engine.lm.throughput_ratio", "engine.mt.throughput_ratio"],
    ),
}


@pytest.fixture(autouse=True)
def benchmarks_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def run_script(name: str, *args: str, monkeypatch) -> str:
    monkeypatch.setattr(sys, "argv", [str(BENCH / f"{name}.py"), *args])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(BENCH / f"{name}.py"), run_name="__main__")
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(CASES))
def test_script_runs_and_writes_its_table_and_keys(name, tmp_path, monkeypatch, data_root):
    args, keys = CASES[name]
    if name == "bench_engine":
        args = [*args, "--data-root", str(data_root)]
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"other.key": {"measured": 1, "target": 1, "met": True, "unit": "x"}}))
    out = tmp_path / f"{name}.md"
    printed = run_script(name, *args, "--out", str(out), "--summary", str(summary), monkeypatch=monkeypatch)
    table = out.read_text()
    assert table.startswith("# ") and "|---|" in table and "Load average" in table
    assert table in printed
    data = json.loads(summary.read_text())
    assert "other.key" in data, "another script's key was lost"
    for key in keys:
        assert key in data, key
        assert set(data[key]) >= {"measured", "target", "met", "unit"}
        assert isinstance(data[key]["met"], bool)
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob(".summary.json.*"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_help(name, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_script(name, "--help", monkeypatch=monkeypatch)
    assert exit_.value.code == 0


def test_summary_merge_keeps_other_keys(tmp_path, monkeypatch):
    import common

    path = tmp_path / "summary.json"
    common.update_summary(path, {"a": common.at_least(2.0, 1.0, "x")})
    common.update_summary(path, {"b": common.at_most(2.0, 1.0, "x"), "a": common.at_least(0.5, 1.0, "x")})
    data = json.loads(path.read_text())
    assert data["a"]["met"] is False and data["b"]["met"] is False and set(data) == {"a", "b"}


def _merge_many(path: str, worker: int) -> None:
    import common

    for i in range(10):
        common.update_summary(Path(path), {f"w{worker}.k{i}": common.entry(i, None, None, "n")})


def test_concurrent_merges_lose_no_key(tmp_path):
    import multiprocessing

    path = tmp_path / "summary.json"
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_merge_many, args=(str(path), w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert len(json.loads(path.read_text())) == 40


def test_perturbation_compares_two_run_trees_and_marks_fragile_verdicts(tmp_path, monkeypatch):
    """--compare-only on two synthetic run trees: the moved numbers are counted, a verdict the perturbation
    flips is recorded, and the ledger reads the record back as fragile."""
    from test_report import make_tree

    from heads.report.robustness import NOT_MEASURED, load, robustness

    base, other = make_tree(tmp_path / "base"), make_tree(tmp_path / "other")
    for seed in (0, 1, 2):  # the perturbed dropout-0.1 runs find almost no redundant heads: D5 flips
        events = other / "lm" / "during" / "dropout0.1" / "0.4" / f"seed{seed}" / "events.jsonl"
        rows = [json.loads(line) for line in events.read_text().splitlines()]
        for row in rows:
            if row["event"] == "redundancy":
                row["redundancy_ratio"] = 0.01 * seed
        events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "perturbation.md"
    run_script("bench_perturbation", "--compare-only", "--base", str(base), "--runs-out", str(other.parent),
               "--out", str(out), monkeypatch=monkeypatch)
    data = load(out.with_suffix(".json"))
    assert data["claims"]["D5-lm"] == {**data["claims"]["D5-lm"], "base": "supported", "perturbed": "not supported"}
    assert data["claims"]["D5-lm-later"]["base"] == data["claims"]["D5-lm-later"]["perturbed"] == "supported"
    assert set(data["claims"]) == {c for c in data["claims"] if c.startswith("D")}  # training_time only
    moved = {(m["task"], m["field"]): m for m in data["runs"]}
    assert moved[("lm", "redundancy_ratio")]["moved"] == 3 and moved[("lm", "value")]["moved"] == 0
    assert data["runs_identical"] == data["runs_compared"] - 3
    assert "D5-lm | supported | not supported **(changed)**" in out.read_text()
    assert robustness("D5-lm", "supported", data).startswith("fragile: not supported under kernels at default")
    assert robustness("D5-lm-later", "supported", data).startswith("same verdict under")
    assert robustness("D5-lm-later", "inconclusive", data).startswith(f"{NOT_MEASURED} for this verdict")
    assert robustness("B5-cls", "supported", data) == robustness("B5-cls", "supported", None) == NOT_MEASURED
    # the measurement is of the runs whose effect it compared: a ledger of other runs (another preset) is not
    d1 = data["claims"]["D5-lm-later"]["effect_base"]
    assert robustness("D5-lm-later", "supported", data, d1).startswith("same verdict under")
    assert robustness("D5-lm-later", "supported", data, d1 + 0.5).startswith(f"{NOT_MEASURED} on these runs")
    assert robustness("D5-lm-later", "supported", data, None).startswith(f"{NOT_MEASURED} on these runs")
    for nothing in (0.0, 3e-5, float("nan")):  # what any runs may give, to the ledger's 4 decimals
        assert "cannot show" in robustness("D5-lm-later", "supported", data, nothing)
    assert robustness("D5-lm-later", "supported", data, round(d1, 4)).startswith("same verdict under")  # read back
    legacy = {**data, "claims": {"D5-lm-later": {"base": "supported", "perturbed": "supported"}}}  # no effect kept
    assert robustness("D5-lm-later", "supported", legacy, d1 + 0.5).startswith("same verdict under")


def _results(folder: Path, verdict: str, bleu: str, seconds: str) -> Path:
    """A rendered results folder: a ledger and one replication's table."""
    (folder / "michel2019").mkdir(parents=True)
    (folder / "claims.csv").write_text("claim,replication,verdict,effect\n"
                                       f"B1-mt,michel2019,{verdict},0.25\nA1-lm,overprovisioning,inconclusive,\n")
    (folder / "michel2019" / "curve.csv").write_text(
        "task,scorer,ratio,mean,train_seconds\n"
        f"mt,importance,0.000,{bleu},{seconds}\nmt,importance,0.500,0.0400,9.0\nlm,random,0.500,12.5,3.0\n")
    # a text cell that is a measurement (seeds significant) and the interval of a clock ratio
    seeds = "2/3" if verdict == "supported" else "1/3"
    (folder / "michel2019" / "speed.csv").write_text(
        f"task,ratio,batch,speedup,ci_low,significant_seeds\ncls,0.500,32,1.2,{seconds},{seeds}\n")
    (folder / "smoke").mkdir()  # another preset's results are not this comparison's
    (folder / "smoke" / "claims.csv").write_text("claim,verdict\n")
    return folder


def test_machines_compares_two_rendered_results_and_the_ledger_reads_it(tmp_path, monkeypatch):
    """bench_machines on two results folders: the numbers that moved are counted by table (clock columns
    apart), a verdict the other machine gave differently is recorded, and robustness combines it with another
    measurement: fragile if any flipped."""
    from heads.report.robustness import NOT_MEASURED, load, robustness

    here = _results(tmp_path / "here", "supported", "0.0500", "10.0")
    other = _results(tmp_path / "other", "inconclusive", "0.0510", "12.0")
    out = tmp_path / "machines.md"
    run_script("bench_machines", "--results", str(here), "--other", str(other), "--other-label", "an AVX512 box",
               "--out", str(out), monkeypatch=monkeypatch)
    data = load(out.with_suffix(".json"))
    assert data["claims"]["B1-mt"] == {"base": "supported", "perturbed": "inconclusive", "effect_base": 0.25,
                                       "effect_perturbed": 0.25}
    assert data["claims"]["A1-lm"]["effect_base"] is None
    table, speed = data["tables"]
    assert table["table"] == "michel2019/curve.csv" and table["rows"] == 3 and not data["unmatched"]
    assert (table["cells"], table["moved"], table["clock_cells"], table["clock_moved"]) == (3, 1, 3, 1)
    assert table["max_rel"] == pytest.approx(0.001 / 0.051)
    assert "mt, importance, 0.000 mean: 0.0510 (there) -> 0.0500 (here)" in table["where"]
    # the speed-up's interval is a clock reading; a changed count of significant seeds is a move of a measurement
    assert (speed["cells"], speed["moved"], speed["clock_cells"], speed["clock_moved"]) == (1, 1, 2, 1)
    assert "significant_seeds: 1/3 (there) -> 2/3 (here)" in speed["where"]
    assert data["tasks"]["lm"] == {"cells": 1, "moved": 0, "max_rel": 0.0, "where": ""}
    assert (data["tasks"]["mt"]["cells"], data["tasks"]["mt"]["moved"]) == (2, 1)
    assert (data["tasks"]["cls"]["cells"], data["tasks"]["cls"]["moved"]) == (1, 1)
    text = out.read_text()
    assert "Verdicts changed: 1 of 2 (B1-mt)" in text and "| michel2019/curve.csv | 3 | 3 | 1 |" in text
    assert text.startswith("# Another run: the whole tiny DAG, the same code on both sides")
    run_script("bench_machines", "--results", str(here), "--other", str(other), "--other-label", "the first run",
               "--what", "the pretrained DAG", "--out", str(out), monkeypatch=monkeypatch)  # a rerun, not the tiny DAG
    assert out.read_text().startswith("# Another run: the pretrained DAG, the same code on both sides")
    assert "The pretrained DAG on both" in out.read_text() and load(out.with_suffix(".json")) == {
        **data, "perturbation": {**data["perturbation"], "label": "the first run", "what": "the pretrained DAG"}}
    assert robustness("B1-mt", "supported", data) == "fragile: inconclusive under an AVX512 box"
    # two real machines are symmetric: rendered from the other side's results, the verdict is just as fragile
    assert robustness("B1-mt", "inconclusive", data).startswith("fragile: supported under kernels at")
    # ... rendered from either side's results, so the ledger's effect may be either side's
    sides = {**data, "claims": {"B1-mt": {**data["claims"]["B1-mt"], "effect_perturbed": 0.4}}}
    assert robustness("B1-mt", "inconclusive", sides, 0.4).startswith("fragile: supported under")
    assert robustness("B1-mt", "supported", sides, 0.25) == "fragile: inconclusive under an AVX512 box"
    assert robustness("B1-mt", "supported", sides, 0.9).startswith(f"{NOT_MEASURED} on these runs")
    imitated = {"perturbation": {"label": "kernels at default"}, "claims": {
        "B1-mt": {"base": "supported", "perturbed": "supported"},
        "A1-lm": {"base": "inconclusive", "perturbed": "inconclusive"}}}
    assert robustness("B1-mt", "supported", [imitated, data]) == "fragile: inconclusive under an AVX512 box"
    assert robustness("A1-lm", "inconclusive", [imitated, data]) == (
        "same verdict under kernels at default; an AVX512 box")
    assert robustness("A1-lm", "supported", [data]).startswith(f"{NOT_MEASURED} for this verdict")
    assert robustness("X9", "supported", []) == NOT_MEASURED


def test_small_sizing_reads_curves_from_runs_stopped_at_the_budget(tmp_path):
    """bench_small_sizing's pieces without training: a run stopped at the budget keeps its snapshots and a torn
    metrics line; rows come from the validation losses and each evaluated model, merge with another call's
    rows, and draw."""
    sizing = runpy.run_path(str(BENCH / "bench_small_sizing.py"))
    runs = tmp_path / "runs"
    mt = runs / "mt-2x128"
    (runs / "mt-2x128.eval").mkdir(parents=True)
    (mt / "snapshots" / "step-250").mkdir(parents=True)
    (mt / "snapshots" / "step-500").mkdir(parents=True)
    (mt / "metrics.jsonl").write_text(
        json.dumps({"step": 0, "val_loss": 8.0, "train_seconds": 0.0}) + "\n"
        + json.dumps({"step": 250, "val_loss": 5.0, "train_seconds": 60.0}) + "\n"
        + json.dumps({"step": 500, "val_loss": 4.0, "train_seconds": 121.0}) + "\n" + '{"step": 5')
    for step, bleu in ((250, 1.5), (500, 4.25)):  # already evaluated: curve() reads them back
        (runs / "mt-2x128.eval" / f"step-{step}.json").write_text(json.dumps({"bleu": bleu, "loss": 9 - step / 100}))
    rows = sizing["curve"]("mt-2x128", runs, "unused", 10)
    assert [(r["step"], r["metric"]) for r in rows] == [(0, ""), (250, ""), (500, ""), (250, "bleu"), (500, "bleu")]
    assert rows[-1] == {"candidate": "mt-2x128", "task": "mt", "step": 500, "train_seconds": 121.0,
                        "val_loss": 4.0, "metric": "bleu", "value": 4.25}
    out = tmp_path / "sizing.csv"
    out.write_text("candidate,task,step,train_seconds,val_loss,metric,value\n"
                   "lm-4x128-1200,lm,1200,300.0,4.1,perplexity,60.3\nmt-2x128,mt,100,1.0,9.0,,\n")
    merged = sizing["merge"](out, rows, {"mt-2x128"})
    assert [r["candidate"] for r in merged] == ["lm-4x128-1200"] + ["mt-2x128"] * 5  # the stale mt row replaced
    sizing["figure"](merged, tmp_path / "sizing.png")
    assert (tmp_path / "sizing.png").stat().st_size > 0
    # a candidate trained once is not trained again: its recorded stop is returned as it was
    record = {"candidate": "lm-4x128-1200", "status": "stopped at the budget", "budget_s": 60.0, "seconds": 60.2}
    (runs / "lm-4x128-1200.train.json").write_text(json.dumps(record))
    assert sizing["train"]("lm-4x128-1200", runs, 0.1, str(tmp_path / "data")) == record
    # every candidate's overrides resolve over the tiny preset (a typo would cost a whole budget to find)
    from heads.resolve import resolve

    for name, (task, _) in sizing["CANDIDATES"].items():
        cfg = resolve(task, "tiny", None, sizing["overrides_of"](name))
        assert cfg.train.steps >= 500 and (task != "mt" or cfg.train.schedule == "inverse_sqrt"), name
    # the notes on each call's conditions outlive the next call (it measures other candidates)
    notes = tmp_path / "sizing_notes.md"
    assert sizing["kept_notes"](notes, ["first call: beside the tests."]) == ["first call: beside the tests."]
    assert sizing["kept_notes"](notes, []) == ["first call: beside the tests."]
    assert sizing["kept_notes"](notes, ["second call: alone.", "first call: beside the tests."]) == [
        "first call: beside the tests.", "second call: alone."]
    assert "second call: alone." in sizing["summary_markdown"](merged, runs, 1, sizing["kept_notes"](notes, []))


# -- the prepared GPU check (benchmarks/gpu_check.sh and gpu_check.py): its CPU-safe parts ------------------

GPU_SECTIONS = {
    "environment": {"heads", "nvidia_smi_l", "torch", "cuda_available", "device_name"},
    "masked_vs_pruned": {"results", "pass", "tolerance_rule", "heads_removed_per_site"},
    "pruned_speedup": {"model", "rows", "target"},
    "ablation": {"results", "rows", "target"},
    "throughput": {"model", "rows", "tokens_per_step"},
}


def test_gpu_check_shell_script_parses():
    import subprocess

    subprocess.run(["bash", "-n", str(BENCH / "gpu_check.sh")], check=True)


def test_gpu_check_small_on_cpu_writes_every_section(tmp_path, monkeypatch):
    """The GPU check's code at --scale small on the CPU: every section ok with its keys, masked == pruned
    within the fp32 tolerance (no timing asserted)."""
    out = tmp_path / "gpu.json"
    with pytest.raises(SystemExit) as exit_:
        run_script("gpu_check", "--device", "cpu", "--scale", "small", "--out", str(out), monkeypatch=monkeypatch)
    assert exit_.value.code == 0
    data = json.loads(out.read_text())
    assert (data["device"], data["scale"]) == ("cpu", "small")
    for name, keys in GPU_SECTIONS.items():
        section = data["sections"][name]
        assert section["status"] == "ok", section.get("error")
        assert keys <= set(section), (name, keys - set(section))
    masked = data["sections"]["masked_vs_pruned"]["results"]
    assert set(masked) == {"fp32", "bf16"}
    assert masked["fp32"]["pass"] and masked["fp32"]["max_abs_diff"] <= masked["fp32"]["tolerance"]
    assert masked["fp32"]["masked_vs_full_max_abs_diff"] > masked["fp32"]["tolerance"]  # the gates did something
    rows = data["sections"]["pruned_speedup"]["rows"]
    assert {(r["precision"], r["mode"], r["variant"]) for r in rows} == {
        (p, m, f"pruned {f}%") for p in ("fp32", "bf16") for m in ("train", "infer") for f in (25, 50, 75)
    }
    assert all(r["theoretical"] > 1 and r["realised"] > 0 for r in rows)
    assert {(r["task"], r["batch"][0]) for r in data["sections"]["ablation"]["results"]} == {
        ("lm", 1),
        ("lm", 8),
        ("mt", 1),
        ("mt", 8),
    }
    assert all(r["agree"] for r in data["sections"]["ablation"]["results"])
    assert {r["precision"] for r in data["sections"]["throughput"]["rows"]} == {"fp32", "bf16"}
    table = out.with_suffix(".md").read_text()
    assert table.startswith("# GPU check") and "## Masked == pruned" in table and "## Training throughput" in table


def test_gpu_check_records_a_killed_part_and_the_smoke_dag(tmp_path, monkeypatch):
    """--mark (what gpu_check.sh calls after each part): a part killed by timeout is recorded as timed out
    with its log's tail, and the smoke DAG's runs are counted by the device they name."""
    out, log = tmp_path / "gpu.json", tmp_path / "part.log"
    log.write_text("step 1\nstep 2\n")
    runs = tmp_path / "runs" / "lm" / "seed0"
    runs.mkdir(parents=True)
    (runs / "summary.json").write_text(json.dumps({"environment": {"device": "cuda:0"}}))
    mark = ["--out", str(out), "--log", str(log), "--cap", "45"]
    parts = (
        ["--mark", "throughput", "--rc", "124", "--seconds", "50"],
        ["--mark", "smoke_dag", "--rc", "0", "--seconds", "120", "--runs", str(tmp_path / "runs")],
    )
    for args in parts:
        with pytest.raises(SystemExit) as exit_:
            run_script("gpu_check", *mark, *args, monkeypatch=monkeypatch)
        assert exit_.value.code == 0
    sections = json.loads(out.read_text())["sections"]
    assert sections["throughput"] == {**sections["throughput"], "status": "timed out", "rc": 124, "wall_s": 50.0}
    assert "step 2" in sections["throughput"]["log_tail"]
    assert sections["smoke_dag"]["status"] == "ok" and sections["smoke_dag"]["runs_by_device"] == {"cuda:0": 1}
    table = out.with_suffix(".md").read_text()
    assert "| throughput | timed out |" in table and "runs by device: {'cuda:0': 1}" in table


def test_perturbation_carries_an_earlier_measurement_of_replications_it_does_not_rerun(tmp_path, monkeypatch):
    """--carry keeps the claims and run moves of the replications this call did not re-run, naming the earlier
    perturbation they were measured under; those of the replications it did re-run are replaced."""
    from test_report import make_tree

    from heads.report.robustness import load, robustness

    base, other = make_tree(tmp_path / "base"), make_tree(tmp_path / "other")
    old = {"perturbation": {"label": "kernels at default instead of AVX2, 1 thread per job", "seconds": 600.0,
                            "replications": ["training_time", "michel2019"]},
           "runs_compared": 21, "runs_identical": 0,
           "runs": [{"task": "lm", "field": "final_val_loss", "runs": 21, "moved": 21, "max_rel": 2e-5,
                     "where": "lm/during/oneshot/0.25/seed0: 4.2 -> 4.2001"}],
           "claims": {"D5-lm": {"base": "supported", "perturbed": "not supported", "effect_base": 0.2,
                                "effect_perturbed": 0.01},
                      "B5-cls-gain": {"base": "inconclusive", "perturbed": "inconclusive", "effect_base": 1.0,
                                      "effect_perturbed": 1.0}}}
    carried = tmp_path / "old.json"
    carried.write_text(json.dumps(old))
    out = tmp_path / "perturbation.md"
    run_script("bench_perturbation", "--compare-only", "--base", str(base), "--runs-out", str(other.parent),
               "--replications", "michel2019", "--carry", str(carried), "--out", str(out), monkeypatch=monkeypatch)
    data = load(out.with_suffix(".json"))
    assert data["carried"]["replications"] == ["training_time"]
    assert data["claims"]["D5-lm"]["under"] == old["perturbation"]["label"]  # carried, with its own label
    assert data["claims"]["B5-cls-gain"]["base"] != "inconclusive"  # re-measured, not carried
    assert robustness("D5-lm", "supported", data) == f"fragile: not supported under {old['perturbation']['label']}"
    moved = {(m["task"], m["field"]): m for m in data["runs"]}
    assert moved[("lm", "final_val_loss")]["moved"] == 21  # the re-run replication's tree has no lm runs moved
    assert data["runs_compared"] > 21 and "Carried from an earlier measurement" in out.read_text()


def test_bench_dag_times_no_op_only_on_a_tree_with_nothing_to_do(tmp_path, monkeypatch):
    # timed on a tree with work to do, the "no-op" call once ran the whole tiny DAG over a checkout's results
    (tmp_path / "Snakefile").write_text('rule all:\n    output: "done"\n    shell: "touch {output}"\n')
    summary, out = tmp_path / "summary.json", tmp_path / "dag.md"
    argv = ["--no-smoke", "--tiny-noop", "--tree", str(tmp_path), "--summary", str(summary), "--out", str(out)]
    with pytest.raises(SystemExit, match="not up to date"):
        run_script("bench_dag", *argv, monkeypatch=monkeypatch)
    assert not (tmp_path / "done").exists() and not summary.exists()
    (tmp_path / "done").touch()
    run_script("bench_dag", *argv, monkeypatch=monkeypatch)
    assert json.loads(summary.read_text())["dag.tiny.noop_rerun_s"]["measured"] > 0


def test_bench_dag_records_the_default_run_and_where_its_time_went(tmp_path, monkeypatch):
    """README's first command, timed by hand from a fresh clone, is recorded against its 90-minute target, and the
    run's job benchmark files say where the time went: one row per job kind, its shards or replicates together."""
    bench = tmp_path / "logs" / "quick" / "benchmarks"
    for path, seconds in (("runs/lm/analysis/curve/random/seed0.tsv", 120.0),
                          ("runs/lm/analysis/curve/random/seed1.tsv", 180.0), ("data/lm.tsv", 30.0)):
        (bench / path).parent.mkdir(parents=True, exist_ok=True)
        (bench / path).write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:00\t1.0\n")
    summary, out = tmp_path / "summary.json", tmp_path / "dag.md"
    run_script("bench_dag", "--no-smoke", "--default", "6000", "--jobs", str(bench), "--conditions", "as measured",
               "--summary", str(summary), "--out", str(out), monkeypatch=monkeypatch)
    entry = json.loads(summary.read_text())["dag.quick.wall_min"]
    assert (entry["measured"], entry["target"], entry["met"], entry["conditions"]) == (100.0, 90, False, "as measured")
    assert "quick, the default run from a fresh clone" in out.read_text()
    jobs = (tmp_path / "dag_jobs_quick.md").read_text()
    assert "3 jobs, 5.5 minutes of a core in all. as measured" in jobs
    assert jobs.index("`runs/lm/analysis/curve/random` | 2 | 5.0 | 2.5 | 3.0 | 91 |") < jobs.index("`data/lm` | 1 |")
