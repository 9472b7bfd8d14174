"""Gemma 3 (text): Llama's projections with QK-norm, sliding-window and global layers, the attention scale from
``query_pre_attn_scalar``, and multi-query attention in the 270M (4 query heads, 1 key/value head).

The family-wide guarantees run on a grouped-query tiny Gemma 3 through TINY in conftest (masked == pruned with
headless sites, generation through the cache, save/load, AdamW slicing, L0 folding); here: what Gemma 3 adds. The
sliding window must reach the gated attention (its mask comes from the mask function registered with it), q/k
norms hold no head, and under multi-query attention removing the one key/value group removes every head of the
layer: the site becomes headless (its output zero, as all gates closed make it), and a single query head is
refused physically (gates close it).
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from conftest import batch_for, build, build_with_biases, logits
from transformers import AutoModelForCausalLM

from heads.flops import count_params, flops_per_token
from heads.surgery import (
    GroupedQueryError,
    apply_layout,
    head_layout,
    install,
    load,
    ones_gates,
    prune_heads,
    save,
    set_gates,
    sites,
)
from heads.surgery.families import FAMILIES, family_of
from heads.surgery.gates import gates
from heads.surgery.stock import MARK, REFUSED_TYPE

TYPE = "gemma3_text"
WINDOW = 4  # the tiny model's sliding window, shorter than its batches (9 tokens)


def mqa(**kw):
    """The tiny Gemma 3 as the 270M is laid out: 4 query heads sharing one key/value head."""
    return build_with_biases(TYPE, kv_heads=1, **kw)


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_registered_with_its_sites_and_layer_types():
    model = build(TYPE)
    assert family_of(model) is FAMILIES[TYPE] and FAMILIES[TYPE].name == "gemma3"
    assert model.config.layer_types == ["sliding_attention", "full_attention"]
    assert [(s.name, s.kind, s.num_heads, s.num_kv_heads, s.head_dim) for s in sites(mqa())] == [
        (f"model.layers.{i}.self_attn", "causal", 4, 1, 16) for i in range(2)]


def test_open_gates_equal_stock_and_a_closed_gate_changes_the_output():
    """query_pre_attn_scalar (24) is not the head size (16): the gated functions take the module's own scale."""
    model = build(TYPE)
    inputs = batch_for(TYPE)
    stock = logits(model, inputs)
    model.set_attn_implementation("eager")
    stock_eager = logits(model, inputs)
    install(model)
    set_gates(model, ones_gates(model))
    assert torch.equal(logits(model, inputs), stock)
    install(model, eager=True)
    assert torch.allclose(logits(model, inputs), stock_eager, atol=1e-5)
    g = ones_gates(model)
    g["model.layers.1.self_attn"][2] = 0.0
    set_gates(model, g)
    assert not torch.allclose(logits(model, inputs), stock_eager, atol=1e-3)


@pytest.mark.parametrize("eager", [False, True])
def test_the_sliding_window_reaches_the_gated_attention(eager):
    """One sliding layer: a token more than WINDOW positions back changes nothing. Without the mask function
    registered for the gated attention the model would get no mask and attend to everything."""
    model = install(build(TYPE, layers=1), eager=eager)
    ids = torch.randint(2, 256, (1, 9), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[0, 0] = 7 if ids[0, 0] != 7 else 8
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, model(input_ids=changed).logits
    assert torch.equal(a[0, WINDOW:], b[0, WINDOW:])  # position WINDOW sees positions 1..WINDOW
    assert not torch.allclose(a[0, :WINDOW], b[0, :WINDOW])


def test_mqa_masked_equals_pruned_and_the_emptied_layer_is_headless():
    model = mqa()
    inputs = batch_for(TYPE)
    install(model)
    remove = {"model.layers.0.self_attn": [0, 1, 2, 3]}  # the one key/value group: every head of the layer
    g = ones_gates(model)
    g["model.layers.0.self_attn"][:] = 0.0
    with gates(model, g):
        masked = logits(model, inputs)
    norms = {k: v.clone() for k, v in model.state_dict().items() if "q_norm" in k or "k_norm" in k}
    pruned = copy.deepcopy(model)
    prune_heads(pruned, remove)
    assert torch.allclose(logits(pruned, inputs), masked, atol=1e-5)
    assert head_layout(pruned) == {"model.layers.0.self_attn": [], "model.layers.1.self_attn": [0, 1, 2, 3]}
    attn = pruned.model.layers[0].self_attn
    assert type(attn).__name__ == "HeadlessGemma3Attention"
    assert attn.q_proj.weight.shape == (0, 64) and attn.k_proj.weight.shape == (0, 64)
    assert attn.o_proj.weight.shape == (64, 0)
    # q/k norms act per head over head_dim with one weight for every head: nothing of them is cut
    assert all(torch.equal(pruned.state_dict()[k], v) for k, v in norms.items())
    pruned.train()
    pruned(**inputs).loss.backward()  # the headless layer still trains what is around it


def test_mqa_refuses_to_remove_part_of_its_one_group():
    with pytest.raises(GroupedQueryError, match="whole groups of 4"):
        prune_heads(mqa(), {"model.layers.1.self_attn": [1]})


def test_generation_with_the_cache_equals_without_after_mqa_pruning():
    """A prompt and continuation longer than the window: the sliding layer's cache drops old keys, and the
    headless layer keeps its cache entry's lengths right."""
    model = mqa()
    prune_heads(model, {"model.layers.0.self_attn": [0, 1, 2, 3]})
    prompt = batch_for(TYPE)["input_ids"][:2, :6]
    settings = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False)
    cached = model.generate(input_ids=prompt, use_cache=True, **settings)
    assert torch.equal(cached, model.generate(input_ids=prompt, use_cache=False, **settings))


def test_mqa_pruned_model_saves_and_loads_exactly(tmp_path):
    """Emptied sites are no stock shape: heads' loader reads it exactly, stock transformers is refused."""
    model = mqa()
    inputs = batch_for(TYPE)
    prune_heads(model, {"model.layers.0.self_attn": [0, 1, 2, 3]})
    save(model, tmp_path / "m")
    back = load(tmp_path / "m")
    assert head_layout(back) == head_layout(model)
    assert torch.equal(logits(back, inputs), logits(model, inputs))
    config = json.loads((tmp_path / "m/config.json").read_text())
    assert config["model_type"] == REFUSED_TYPE and config[MARK]["model_type"] == TYPE
    with pytest.raises((ValueError, KeyError, OSError), match="heads.surgery.load"):
        AutoModelForCausalLM.from_pretrained(tmp_path / "m")


def test_a_uniformly_pruned_gemma3_loads_with_stock_from_pretrained(tmp_path):
    """One of two key/value groups kept at every site: a stock Gemma 3 of 2 query heads and 1 key/value head."""
    model = build_with_biases(TYPE)
    inputs = batch_for(TYPE)
    keep = {s.name: [0, 1] for s in sites(model)}
    apply_layout(model, keep)
    save(model, tmp_path / "m")
    stock = AutoModelForCausalLM.from_pretrained(tmp_path / "m").eval()
    assert (stock.config.num_attention_heads, stock.config.num_key_value_heads) == (2, 1)
    expected = logits(model, inputs)
    assert torch.allclose(logits(stock, inputs), expected, atol=1e-5)
    assert torch.equal(logits(load(tmp_path / "m"), inputs), expected)


@pytest.mark.parametrize("spec", [{}, {1: [2, 3]}, {0: [0, 1, 2, 3]}], ids=["full", "group", "emptied"])
@pytest.mark.parametrize("kv", [1, 2])
def test_param_count_equals_the_pruned_model_and_pruning_shrinks_it(kv, spec):
    model = build(TYPE, kv_heads=kv)
    arch = "Gemma3ForCausalLM"
    before = numel(model)
    assert count_params(model.config, architecture=arch) == before
    if kv == 1 and spec.get(1):  # half of MQA's one group: refused (above); the whole group instead
        spec = {1: [0, 1, 2, 3]}
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[i]: heads for i, heads in spec.items()})
    assert count_params(model.config, head_layout(model), architecture=arch) == numel(model)
    assert (numel(model) < before) == bool(spec)


def test_flops_cap_sliding_layers_at_their_window():
    """The global layer's queries see (L + 1) / 2 keys on average, the sliding one's at most WINDOW each."""
    model = build(TYPE, layers=2)
    c, arch, n = model.config, "Gemma3ForCausalLM", 9
    full = flops_per_token(c, None, n, backward=False, architecture=arch).forward
    wide = copy.deepcopy(c)
    wide.sliding_window = 64  # wider than the text: the same as global attention
    unwindowed = flops_per_token(wide, None, n, backward=False, architecture=arch).forward
    keys = (WINDOW * (WINDOW + 1) / 2 + (n - WINDOW) * WINDOW) / n
    assert unwindowed - full == pytest.approx(4 * 4 * 16 * ((n + 1) / 2 - keys))


def test_the_plan_counts_a_logit_row_per_token():
    """Gemma 3's vocabulary (262144 in the 270M) makes the logits a large share of a batch's memory."""
    from heads.plan import activation_bytes

    config = build(TYPE).config
    wider = copy.deepcopy(config)
    wider.vocab_size += 1000
    tokens, batch = 9, 2
    assert activation_bytes(wider, tokens, batch) - activation_bytes(config, tokens, batch) == 4 * tokens * batch * 1000
