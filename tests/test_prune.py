"""Physical pruning: a closed gate and a removed head are the same model."""

import copy

import pytest
import torch
from conftest import batch_for, build, logits

from heads.surgery import (
    GroupedQueryError,
    apply_layout,
    head_layout,
    install,
    ones_gates,
    prune_heads,
    set_gates,
    sites,
)


def mask_and_prune(model, remove: dict[str, list[int]], inputs: dict):
    """Logits with ``remove`` closed by gates, and with ``remove`` physically pruned."""
    install(model)
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    set_gates(model, g)
    masked = logits(model, inputs)
    set_gates(model, {name: None for name in g})
    pruned = copy.deepcopy(model)
    prune_heads(pruned, remove)
    return masked, logits(pruned, inputs), pruned


@pytest.mark.parametrize("kind", ["self", "causal", "cross"])
def test_masked_equals_pruned_per_site_kind(kind):
    family = {"self": "bert", "causal": "llama", "cross": "marian"}[kind]
    model = build(family)
    inputs = batch_for(family)
    targets = [s for s in sites(model) if s.kind == kind]
    remove = {s.name: [0, 2] for s in targets}
    masked, pruned, small = mask_and_prune(model, remove, inputs)
    assert torch.allclose(masked, pruned, atol=1e-5)
    assert all(head_layout(small)[s.name] == [1, 3] for s in targets)


def test_masked_equals_pruned_everywhere_including_empty_sites(family):
    model = build(family)
    inputs = batch_for(family)
    names = [s.name for s in sites(model)]
    remove = {name: [1, 3] for name in names}
    remove[names[0]] = [0, 1, 2, 3]  # a site that loses every head
    if family == "marian":
        remove[names[3]] = [0, 1, 2, 3]  # and a cross-attention site
    masked, pruned, small = mask_and_prune(model, remove, inputs)
    assert torch.allclose(masked, pruned, atol=1e-5)
    assert head_layout(small)[names[0]] == []
    # The empty site still trains: gradients reach the output bias and beyond.
    small.train()
    small(**inputs).loss.backward()


def test_pruned_model_is_smaller():
    model = build("llama", heads=8, d=64)
    before = sum(p.numel() for p in model.parameters())
    prune_heads(model, {s.name: range(4) for s in sites(model)})
    after = sum(p.numel() for p in model.parameters())
    # per layer: q, k, v lose 4 of 8 heads' rows and o loses as many columns (no biases)
    assert before - after == len(sites(model)) * 4 * 64 * 32


def test_pruning_in_steps_equals_pruning_at_once(family):
    model = build(family)
    inputs = batch_for(family)
    names = [s.name for s in sites(model)]
    once = copy.deepcopy(model)
    prune_heads(once, {n: [0, 3] for n in names})
    prune_heads(model, {n: [3] for n in names})
    prune_heads(model, {n: [0] for n in names})
    assert head_layout(model) == head_layout(once)
    assert torch.equal(logits(model, inputs), logits(once, inputs))


def test_apply_layout_keeps_named_heads():
    model = build("marian")
    name = sites(model)[1].name
    layout = apply_layout(model, {name: [3, 1]})
    assert layout[name] == [1, 3]
    with pytest.raises(ValueError, match="already pruned"):
        apply_layout(model, {name: [0]})


def test_bad_requests_are_named():
    model = build("llama")
    name = sites(model)[0].name
    with pytest.raises(KeyError, match="unknown site"):
        prune_heads(model, {"model.layers.9.self_attn": [0]})
    with pytest.raises(ValueError, match="not present"):
        prune_heads(model, {name: [7]})


def test_grouped_query_masks_per_query_head_and_prunes_whole_groups():
    model = build("llama", heads=8, kv_heads=2, d=64)
    inputs = batch_for("llama")
    name = sites(model)[0].name
    install(model)
    g = ones_gates(model)
    g[name][5] = 0.0  # one query head of group 1: maskable
    set_gates(model, g)
    assert not torch.allclose(logits(model, inputs), logits(install(build("llama", heads=8, kv_heads=2, d=64)), inputs))
    set_gates(model, {n: None for n in g})
    with pytest.raises(GroupedQueryError, match="whole groups of 4"):
        prune_heads(copy.deepcopy(model), {name: [5]})
    masked, pruned, small = mask_and_prune(model, {name: [4, 5, 6, 7]}, inputs)
    assert torch.allclose(masked, pruned, atol=1e-5)
    attn = small.get_submodule(name)
    assert attn.k_proj.out_features == 8 and attn.q_proj.out_features == 32


def test_generation_with_empty_sites_matches_masked():
    """Beam search through a key/value cache: a headless site keeps cache lengths right."""
    model = build("marian")
    names = [s.name for s in sites(model)]
    remove = {names[0]: [0, 1, 2, 3], names[2]: [0, 1, 2, 3], names[3]: [0, 1, 2, 3], names[4]: [1]}
    inputs = batch_for("marian")
    source = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    install(model)
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    set_gates(model, g)
    settings = dict(num_beams=3, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    masked = model.generate(**source, **settings)
    set_gates(model, {n: None for n in g})
    prune_heads(model, remove)
    assert torch.equal(model.generate(**source, **settings), masked)


def test_llama_generation_with_empty_first_layer():
    model = build("llama")
    names = [s.name for s in sites(model)]
    prompt = torch.tensor([[5, 9, 13, 2, 7]])
    install(model)
    g = ones_gates(model)
    g[names[0]][:] = 0.0
    set_gates(model, g)
    masked = model.generate(prompt, max_new_tokens=6, do_sample=False)
    set_gates(model, {n: None for n in g})
    prune_heads(model, {names[0]: [0, 1, 2, 3]})
    assert torch.equal(model.generate(prompt, max_new_tokens=6, do_sample=False), masked)
