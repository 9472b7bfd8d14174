"""Save -> load of pruned models is exact; a checkpoint that does not match fails loudly."""

import json

import pytest
import torch
from conftest import batch_for, build, build_with_biases, heads_to_remove, logits

from heads import models
from heads.surgery import CheckpointError, head_layout, load, prune_heads, save, sites


def pruned(family: str):
    model = build(family)
    names = [s.name for s in sites(model)]
    remove = {n: [i % 4] for i, n in enumerate(names)}
    remove[names[-1]] = [0, 1, 2, 3]
    prune_heads(model, remove)
    return model


def test_round_trip_is_exact(every_family, tmp_path):
    model = build_with_biases(every_family)
    prune_heads(model, heads_to_remove(model))
    inputs = batch_for(every_family)
    save(model, tmp_path)
    back = load(tmp_path)
    assert type(back) is type(model)
    assert head_layout(back) == head_layout(model)
    state, back_state = model.state_dict(), back.state_dict()
    assert state.keys() == back_state.keys() and all(torch.equal(state[k], back_state[k]) for k in state)
    assert torch.equal(logits(back, inputs), logits(model, inputs))
    assert json.loads((tmp_path / "config.json").read_text())["head_layout"] == head_layout(model)


@pytest.mark.parametrize("prune", [False, True])
def test_save_load_save_writes_the_same_config(every_family, prune, tmp_path):
    # a resumed run saves a model that went through load(): its config.json must be the uninterrupted run's
    model = build(every_family)
    if prune:
        prune_heads(model, heads_to_remove(model))
    save(model, tmp_path / "a")
    save(load(tmp_path / "a"), tmp_path / "b")
    first, second = ((tmp_path / x / "config.json").read_text() for x in "ab")
    assert second == first
    assert ("head_layout" in json.loads(first)) == prune  # an unpruned model's config carries no layout key


def test_only_safetensors_are_read(tmp_path):
    save(pruned("llama"), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in {".bin", ".pt", ".pkl"}) == []
    (tmp_path / "model.safetensors").rename(tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="safetensors only"):
        load(tmp_path)


def test_layout_mismatch_fails_loudly(tmp_path):
    model = pruned("llama")
    save(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    first = next(iter(config["head_layout"]))
    config["head_layout"][first] = [0, 1, 2, 3]  # claims heads the weights no longer have
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"q_proj.weight: checkpoint \(48, 64\) vs model \(64, 64\)"):
        load(tmp_path)


def test_missing_layout_fails_loudly(tmp_path):
    save(pruned("marian"), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["head_layout"] = None
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="do not match"):
        load(tmp_path)


def test_corrupt_weights_are_reported_by_path(tmp_path):
    save(pruned("bert"), tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load(tmp_path)


def test_pretrained_minilm_pruned_round_trip(tmp_path):
    model = models.minilm().eval()
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[0]: [0, 5, 11], names[5]: list(range(12))})
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102, 0], [101, 7592, 102, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
    save(model, tmp_path)
    back = load(tmp_path)
    assert torch.equal(back(input_ids=ids, attention_mask=mask).last_hidden_state, expected)
    assert len(head_layout(back)[names[0]]) == 9


def test_shipped_minilm_loads_through_the_strict_loader():
    from transformers import BertModel

    stock = BertModel.from_pretrained(models.minilm_path(), local_files_only=True).eval()
    ours = load(models.minilm_path())
    ids = torch.tensor([[101, 2023, 2003, 102]])
    assert torch.equal(ours(input_ids=ids).last_hidden_state, stock(input_ids=ids).last_hidden_state)


def test_save_replaces_an_existing_checkpoint_whole(tmp_path):
    target = tmp_path / "ckpt"
    save(build("llama"), target)
    small = pruned("llama")
    save(small, target)
    assert head_layout(load(target)) == head_layout(small)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no temp folders left behind
