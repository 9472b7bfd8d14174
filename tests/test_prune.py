"""Physical pruning: a closed gate and a removed head are the same model."""

import copy

import pytest
import torch
from conftest import GENERATIVE_KINDS, TINY, batch_for, build, build_with_biases, heads_to_remove, logits

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
from heads.surgery.families import FAMILIES


def test_every_registered_family_has_a_tiny_config():
    """The surgery guarantees below run on TINY: a model type head surgery supports must have its line there."""
    assert sorted(TINY) == sorted(FAMILIES), "give the new model type a tiny config in TINY (tests/conftest.py)"
    assert all(build(name).config.model_type == name for name in TINY)


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


def test_masked_equals_pruned_everywhere_including_empty_sites(every_family):
    model = build_with_biases(every_family)
    inputs = batch_for(every_family)
    remove = heads_to_remove(model)
    masked, pruned, small = mask_and_prune(model, remove, inputs)
    assert torch.allclose(masked, pruned, atol=1e-5)
    assert head_layout(small) == {s: [h for h in kept if h not in remove[s]] for s, kept in head_layout(model).items()}
    assert [] in head_layout(small).values()
    # The empty site still trains: gradients reach the output bias and beyond.
    small.train()
    small(**inputs).loss.backward()


GENERATIVE = [name for name, (_, kind) in sorted(TINY.items()) if kind in GENERATIVE_KINDS]


@pytest.mark.parametrize("family", GENERATIVE)
def test_generation_through_the_cache_masked_equals_pruned(family):
    """Decoding reuses keys and values from a cache: a pruned site (a headless one too) keeps its lengths right."""
    model = build_with_biases(family)
    inputs = batch_for(family)
    if TINY[family][1] == "seq2seq":  # beam search over the encoded (padded) source
        prompt = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
        settings = dict(num_beams=3, max_new_tokens=8, min_new_tokens=8, do_sample=False, use_cache=True)
    else:  # greedy continuation of unpadded prompts
        prompt = {"input_ids": inputs["input_ids"][:2, :5]}
        settings = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False, use_cache=True)
    remove = heads_to_remove(model)
    install(model)
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    set_gates(model, g)
    masked = model.generate(**prompt, **settings)
    set_gates(model, {n: None for n in g})
    prune_heads(model, remove)
    assert torch.equal(model.generate(**prompt, **settings), masked)


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
