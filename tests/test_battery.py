"""The battery on a model of the user's choosing (`--config preset=pretrained model=NAME`): only the battery runs,
under a results folder named for the model, and nothing of the preset's committed results is written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from battery_plan import plan_shipped
from test_workflow import needs_snakemake

from heads.battery import BATTERY, for_model, model_slug
from heads.sheet import SheetError, build, preset_settings

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"


def llama_folder(where: Path) -> Path:
    """A tiny Llama saved as a user's checkpoint would be: config, weights and its tokenizer."""
    from conftest import build as build_model
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    build_model("llama", layers=3).save_pretrained(where)
    words = ["<unk>", "<pad>", "<eos>"] + [f"w{i}" for i in range(253)]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", pad_token="<pad>",
                            eos_token="<eos>").save_pretrained(where)
    return where


def test_a_model_is_kept_under_a_name_of_its_own(tmp_path):
    (tmp_path / "My Llama").mkdir()
    assert model_slug("smollm2") == "smollm2"
    assert model_slug(str(tmp_path / "My Llama")) == "My_Llama"
    assert model_slug("HuggingFaceTB/SmolLM2-360M") == "HuggingFaceTB--SmolLM2-360M"


def test_the_battery_alone_runs_on_the_named_model(tmp_path):
    folder = llama_folder(tmp_path / "my-llama")
    dag, slug = for_model(preset_settings(REPLICATIONS, "pretrained"), str(folder), REPLICATIONS)
    assert slug == "my-llama"
    sheet = build(REPLICATIONS, dag)
    assert set(sheet.of) == {BATTERY}
    trains = [e for e in sheet.runs.values() if e.command == "train"]
    assert trains and all(e.config["model"]["source"] == str(folder) for e in trains)


@pytest.mark.parametrize("preset, source, message", [
    ("tiny", "smollm2", "runs at preset 'pretrained' only"),
    ("pretrained", "no-such-thing", "neither a shipped checkpoint"),
    ("pretrained", "EMPTY", "holds no config.json"),
])
def test_a_model_the_battery_cannot_take_is_refused_in_one_line(tmp_path, preset, source, message):
    (tmp_path / "empty").mkdir()
    source = str(tmp_path / "empty") if source == "EMPTY" else source
    with pytest.raises(SheetError, match=message):
        for_model(preset_settings(REPLICATIONS, preset), source, REPLICATIONS)


def test_a_model_named_twice_or_named_as_an_output_folder_is_refused(tmp_path):
    other = {"tasks": {"lm": {"model": {"source": "HuggingFaceTB/SmolLM2-360M"}}}}
    with pytest.raises(SheetError, match="give the model once"):
        for_model(preset_settings(REPLICATIONS, "pretrained", other), "smollm2", REPLICATIONS)
    clash = llama_folder(tmp_path / "michel2019")
    with pytest.raises(SheetError, match="one the preset's outputs use"):
        for_model(preset_settings(REPLICATIONS, "pretrained"), str(clash), REPLICATIONS)


@needs_snakemake
def test_the_battery_on_a_local_llama_plans_under_its_own_folder_and_leaves_the_committed_results(tmp_path):
    out, outputs, unchanged = plan_shipped(tmp_path, str(llama_folder(tmp_path / "my-llama")), "my-llama")
    assert outputs and all(p.startswith("results/pretrained/my-llama/")
                           or p == "resources/data/.ready-lm-pretrained-my-llama" for p in outputs), outputs
    assert "results/pretrained/my-llama/pretrained/claims.md" in outputs
    # its own row of the cross-model table, which the preset's table reads later without loading the model again
    assert "results/pretrained/my-llama/models.csv" in outputs
    assert re.search(r"heads models --model \S+my-llama=results/pretrained/my-llama/pretrained ", out)
    assert unchanged  # the committed SmolLM2 results, byte for byte
    # the sample of layers follows the model (3 layers here), resolved by the command on the model it loads
    assert re.search(r"heads ablate .*--spread-layers 6", out)


def test_a_job_asks_for_the_memory_its_model_trains_in(tmp_path):
    """16 bytes a parameter (fp32 weights, gradients, two AdamW moments), activations, slack and the runtime."""
    from heads.flops import count_params
    from heads.plan import job_memory_mb, shape
    from heads.resolve import resolve

    folder = llama_folder(tmp_path / "my-llama")
    cfg = resolve("lm", "pretrained", None, [f"model.source={folder}"])
    params = count_params(shape(cfg).config, architecture=shape(cfg).architecture)
    mb = job_memory_mb(cfg)
    assert mb > 16 * params / 2**20 + 1024
    assert job_memory_mb(resolve("lm", "pretrained", None, [f"model.source={folder}", "data.batch_size=64"])) > mb


def test_a_model_that_is_no_causal_lm_is_refused_before_any_job(tmp_path):
    """An encoder (BERT here; the shipped MPNet alike) cannot be read as an LM: refused when the plan is made."""
    from conftest import build as build_model

    from heads.battery import check_task
    from heads.resolve import resolve

    encoder = tmp_path / "encoder"
    build_model("bert").save_pretrained(encoder)
    with pytest.raises(SheetError, match="the battery reads a causal LM.*cannot do task 'lm'"):
        check_task(resolve("lm", "pretrained", None, [f"model.source={encoder}"]))
    check_task(resolve("lm", "pretrained", None, [f"model.source={llama_folder(tmp_path / 'lm')}"]))
