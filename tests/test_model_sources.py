"""Bring your own model (issue 15): a local checkpoint of every supported family, with its own tokenizer, goes
through train, score, ablate and prune by config alone, getting the task's head whatever its ``architectures``
says; pruned checkpoints load with stock transformers where the family's config can say the shape, and stock
loading of any other pruned checkpoint stops with a message naming heads.surgery.load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tokenizers
import torch
import transformers
from conftest import smoke

from heads.cli import main
from heads.data.tokenizer import tokenizer as bpe
from heads.surgery import apply_layout, head_layout, load, prune_heads, save, sites
from heads.surgery.stock import MARK, REFUSED_TYPE
from heads.tasks import get_task
from heads.tasks.text import saved_tokenizer


def bpe_for(task: str, data_root: Path):
    cfg = smoke(task, data_root)
    return bpe(get_task(task).data_path(cfg), vocab_size=cfg.model.vocab)


def checkpoint(family: str, tok, folder: Path) -> Path:
    """A tiny checkpoint of ``family`` saved with ``save_pretrained`` beside its tokenizer, with a head other than
    the task's where the family has one (a pretraining or LM head), as a user's downloaded model would be."""
    v, pad, eos, bos = len(tok), tok.pad_token_id, tok.eos_token_id, tok.bos_token_id
    torch.manual_seed(0)
    if family == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=v, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, pad_token_id=pad, eos_token_id=eos, bos_token_id=bos))
    elif family in ("mistral", "qwen2"):  # Llama-style with grouped-query attention; Qwen2 has q/k/v biases
        cls, config = ((transformers.MistralForCausalLM, transformers.MistralConfig) if family == "mistral"
                       else (transformers.Qwen2ForCausalLM, transformers.Qwen2Config))
        model = cls(config(vocab_size=v, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, pad_token_id=pad, eos_token_id=eos,
                           bos_token_id=bos))
    elif family == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=v, n_embd=32, n_layer=2, n_head=4, n_positions=128, eos_token_id=eos, bos_token_id=bos))
    elif family == "bert":
        model = transformers.BertForPreTraining(transformers.BertConfig(
            vocab_size=v, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=128, pad_token_id=pad))
    elif family == "roberta":
        model = transformers.RobertaForMaskedLM(transformers.RobertaConfig(
            vocab_size=v, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=130, pad_token_id=pad, type_vocab_size=1))
    elif family in ("marian", "bart"):
        cls, config = ((transformers.MarianMTModel, transformers.MarianConfig) if family == "marian"
                       else (transformers.BartForConditionalGeneration, transformers.BartConfig))
        model = cls(config(vocab_size=v, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                           max_position_embeddings=128, pad_token_id=pad, eos_token_id=eos, bos_token_id=bos,
                           decoder_start_token_id=pad, forced_eos_token_id=eos))
    model.save_pretrained(folder)
    if family == "roberta":  # one segment embedding: its tokenizer feeds no token_type_ids
        tok.model_input_names = ["input_ids", "attention_mask"]
    tok.save_pretrained(folder)
    return folder


TASK_OF = {"llama": "lm", "mistral": "lm", "qwen2": "lm", "gpt2": "lm", "bert": "cls", "roberta": "cls",
           "marian": "mt", "bart": "mt"}


@pytest.mark.parametrize("family", sorted(TASK_OF))
def test_a_local_checkpoint_trains_scores_ablates_and_prunes_by_config_alone(family, data_root, tmp_path, capsys):
    task = TASK_OF[family]
    source = checkpoint(family, bpe_for(task, data_root), tmp_path / "source")
    run = tmp_path / "run"
    assert main(["train", "--task", task, "--preset", "smoke", "--out", str(run), f"data.root={data_root}",
                 "train.progress=false", f"model.source={source}", "train.steps=4", "train.eval_every=2"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    trained = load(run / "model")
    assert type(trained).__name__.endswith(get_task(task).model_heads)  # the task's head, not the checkpoint's
    assert trained.config.model_type == json.loads((source / "config.json").read_text())["model_type"]
    assert summary["status"] == "ok"
    # the run kept the checkpoint's own tokenizer (a fresh BPE would be another vocabulary)
    assert json.loads((run / "model/tokenizer.json").read_text()) == json.loads((source / "tokenizer.json").read_text())
    # and the analyses read it back as saved (AutoTokenizer rebuilds Qwen2's pipeline over a plain tokenizer.json)
    text = "In the beginning, God's 1234 words: 'Let there be light.'"
    exact = tokenizers.Tokenizer.from_file(str(source / "tokenizer.json")).encode(text).ids
    assert saved_tokenizer(run / "model")(text)["input_ids"] == exact
    assert main(["score", str(run), "--scorer", "importance", "--batches", "1", "--out", str(tmp_path / "s.json")]) == 0
    assert main(["ablate", str(run), "--batches", "1", "--out", str(tmp_path / "a.json")]) == 0
    assert main(["prune", str(run), "--strategy", "posthoc", "--param", "ratio=0.5", "batches=1",
                 "--out", str(tmp_path / "pruned")]) == 0
    pruned = load(tmp_path / "pruned")
    assert sum(map(len, head_layout(pruned).values())) < sum(map(len, head_layout(trained).values()))


def test_a_family_that_cannot_do_the_task_is_refused_naming_the_ones_that_can(data_root, tmp_path, capsys):
    source = checkpoint("gpt2", bpe_for("lm", data_root), tmp_path / "source")
    with pytest.raises(SystemExit):
        main(["train", "--task", "cls", "--preset", "smoke", "--out", str(tmp_path / "run"),
              f"data.root={data_root}", f"model.source={source}"])
    err = capsys.readouterr().err
    assert "GPT2LMHeadModel (gpt2 family) cannot do task 'cls'" in err and "['bert']" in err


def test_a_checkpoint_without_a_tokenizer_is_refused(data_root, tmp_path, capsys):
    source = checkpoint("llama", bpe_for("lm", data_root), tmp_path / "source")
    for f in source.glob("tokenizer*"):
        f.unlink()
    with pytest.raises(SystemExit):
        main(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "run"),
              f"data.root={data_root}", f"model.source={source}"])
    assert "never given a fresh BPE" in capsys.readouterr().err


def test_an_unreachable_hub_id_says_so_in_one_line(data_root, tmp_path, capsys, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the hub library read the variable when it was imported: without this it still tries the network and waits
    # out its timeouts here (about 45 s of the fast suite)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SystemExit):
        main(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "run"),
              f"data.root={data_root}", "model.source=nobody/no-such-model"])
    err = capsys.readouterr().err
    assert "nobody/no-such-model" in err and "not a local folder" in err


def _llama(kv: int = 4, tied: bool = False) -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv, tie_word_embeddings=tied))


# tied: SmolLM2's shape (grouped-query attention, the output layer tied to the input embedding)
@pytest.mark.parametrize(("kv", "tied"), [(4, False), (2, False), (2, True)])
def test_a_uniformly_pruned_llama_loads_with_stock_from_pretrained_and_the_same_logits(kv, tied, tmp_path):
    model = _llama(kv, tied)
    keep = {s.name: [0, 1] if kv == 2 else [1, 3] for s in sites(model)}  # kv=2: one whole group per site
    apply_layout(model, keep)
    save(model, tmp_path / "m")
    ids = torch.randint(0, 64, (2, 9))
    stock = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    ours = load(tmp_path / "m")
    with torch.no_grad():
        expected = model.eval()(input_ids=ids).logits
        assert torch.allclose(stock(input_ids=ids).logits, expected, atol=1e-5)
        assert torch.allclose(ours(input_ids=ids).logits, expected, atol=1e-5)
    assert stock.config.num_attention_heads == 2 and head_layout(ours) == keep


@pytest.mark.parametrize("what", ["uneven", "bert"])
def test_stock_loading_of_any_other_pruned_checkpoint_fails_naming_heads_load(what, tmp_path):
    if what == "uneven":
        model = _llama()
        first = sites(model)[0].name
        prune_heads(model, {first: [0]})
        auto = transformers.AutoModelForCausalLM
    else:
        from heads import models

        model = models.bert(vocab=64, d=32, heads=4, labels=2)
        apply_layout(model, {s.name: [0, 1] for s in sites(model)})
        auto = transformers.AutoModelForSequenceClassification
    save(model, tmp_path / "m")
    config = json.loads((tmp_path / "m/config.json").read_text())
    assert config["model_type"] == REFUSED_TYPE and MARK in config
    with pytest.raises((ValueError, KeyError, OSError), match="heads.surgery.load"):
        auto.from_pretrained(tmp_path / "m")
    back = load(tmp_path / "m")  # heads reads back the model it saved
    assert head_layout(back) == head_layout(model)
