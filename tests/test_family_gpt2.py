"""GPT-2: fused q/k/v in one Conv1D (``c_attn``, weight [d, 3 * H * head_dim]) and per-head rows of ``c_proj``.

The family-wide guarantees (masked == pruned with headless sites, generation through the cache, save/load) run
on GPT-2 through TINY in conftest; here are the checks its fused, transposed layout needs on top: what exactly is
cut, AdamW moments cut alike (computed here without the library), cross-attention, views and parameter counts.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from conftest import batch_for, build, build_with_biases, heads_to_remove, logits
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

from heads.flops import count_params
from heads.report.site_labels import site_label
from heads.surgery import (
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

D, H, HD = 64, 4, 16  # the tiny GPT-2 of conftest: 4 heads of 16


def tiny(seed: int = 0, **overrides) -> GPT2LMHeadModel:
    """A tiny GPT-2 with random biases; ``add_cross_attention=True`` gives every block a cross site."""
    return build_with_biases("gpt2", seed=seed, **overrides)


def cols(heads: list[int], block: int = 0, width: int = D) -> list[int]:
    """Columns of Conv1D output block ``block`` (of ``width``) holding ``heads``, computed without the library."""
    return [block * width + h * HD + i for h in heads for i in range(HD)]


def masked_and_pruned(model, remove: dict[str, list[int]], inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    install(model)
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    with gates(model, g):
        masked = logits(model, inputs)
    pruned = copy.deepcopy(model)
    prune_heads(pruned, remove)
    return masked, logits(pruned, inputs)


def cross_inputs(batch: int = 3, src: int = 5, seed: int = 0) -> dict:
    """A causal batch plus encoder states (with padding) for a GPT-2 built with cross-attention."""
    g = torch.Generator().manual_seed(seed)
    inputs = batch_for("gpt2", batch=batch)
    inputs["encoder_hidden_states"] = torch.randn(batch, src, D, generator=g)
    mask = torch.ones(batch, src, dtype=torch.long)
    mask[1, -2:] = 0
    inputs["encoder_attention_mask"] = mask
    return inputs


def test_registered_under_its_model_type():
    assert FAMILIES["gpt2"].name == "gpt2"
    assert family_of(build("gpt2")) is FAMILIES["gpt2"]


def test_sites_are_causal_blocks_and_cross_when_configured():
    found = sites(build("gpt2", layers=3))
    assert [(s.name, s.layer, s.kind, s.num_heads, s.head_dim) for s in found] == [
        (f"transformer.h.{i}.attn", i, "causal", H, HD) for i in range(3)
    ]
    cross = sites(build("gpt2", add_cross_attention=True))
    assert [s.label for s in cross] == ["L0.causal", "L0.cross", "L1.causal", "L1.cross"]
    # the report labels paths by the same patterns, with no model at hand
    assert [site_label(s.name) for s in cross] == [s.label for s in cross]


def test_gates_go_through_the_registered_attention_function():
    """GPT-2 dispatches through ALL_ATTENTION_FUNCTIONS: open gates change nothing, a closed one acts."""
    model = build("gpt2")
    inputs = batch_for("gpt2")
    stock = logits(model, inputs)
    install(model)
    assert torch.equal(logits(model, inputs), stock)
    g = ones_gates(model)
    set_gates(model, g)
    assert torch.equal(logits(model, inputs), stock)
    g[sites(model)[0].name][1] = 0.0
    set_gates(model, g)
    fast = logits(model, inputs)
    assert not torch.allclose(fast, stock, atol=1e-4)
    install(model, eager=True)
    assert torch.allclose(logits(model, inputs), fast, atol=1e-5)


def test_closed_gate_equals_zeroed_rows_of_c_proj():
    model = install(build("gpt2"))
    inputs = batch_for("gpt2")
    site = sites(model)[-1]
    g = ones_gates(model)
    g[site.name][2] = 0.0
    with gates(model, g):
        masked = logits(model, inputs)
    with torch.no_grad():
        model.get_submodule(site.name).c_proj.weight[2 * HD : 3 * HD] = 0  # Conv1D: input rows are per head
    assert torch.allclose(logits(model, inputs), masked, atol=1e-6)


def test_padding_is_respected():
    """Left padding (a causal model): garbage under the mask changes nothing at the real positions."""
    model = install(build("gpt2"))
    inputs = batch_for("gpt2", batch=2)
    inputs["attention_mask"][1] = 1
    inputs["attention_mask"][1, :4] = 0
    garbage = {**inputs, "input_ids": inputs["input_ids"].clone()}
    garbage["input_ids"][1, :4] = 7
    assert torch.allclose(logits(model, garbage)[1, 4:], logits(model, inputs)[1, 4:], atol=1e-6)


def test_pruning_cuts_the_three_blocks_of_c_attn_and_the_rows_of_c_proj():
    model = tiny()
    site = sites(model)[1]
    attn = model.get_submodule(site.name)
    w, b = attn.c_attn.weight.detach().clone(), attn.c_attn.bias.detach().clone()
    pw = attn.c_proj.weight.detach().clone()
    prune_heads(model, {site.name: [0, 2]})
    keep = [1, 3]
    want = cols(keep, 0) + cols(keep, 1) + cols(keep, 2)
    assert torch.equal(attn.c_attn.weight, w[:, want]) and torch.equal(attn.c_attn.bias, b[want])
    assert torch.equal(attn.c_proj.weight, pw[cols(keep)])
    assert attn.c_proj.bias.shape == (D,)  # the output bias is d_model wide whatever the heads
    # what the forward reads: Conv1D sizes, the chunk size q/k/v are split by, the head count
    assert (attn.c_attn.nx, attn.c_attn.nf, attn.c_proj.nx, attn.c_proj.nf) == (D, 3 * 2 * HD, 2 * HD, D)
    assert (attn.num_heads, attn.split_size, attn.head_dim) == (2, 2 * HD, HD)


def test_pruning_in_steps_equals_pruning_at_once():
    model = tiny()
    inputs = batch_for("gpt2")
    names = [s.name for s in sites(model)]
    once = copy.deepcopy(model)
    prune_heads(once, {n: [0, 3] for n in names})
    prune_heads(model, {n: [3] for n in names})
    prune_heads(model, {n: [0] for n in names})
    assert head_layout(model) == head_layout(once)
    assert torch.equal(logits(model, inputs), logits(once, inputs))


def test_cross_attention_masked_equals_pruned_with_headless_sites():
    model = tiny(add_cross_attention=True)
    inputs = cross_inputs()
    remove = heads_to_remove(model)  # the first site and the first cross site lose every head
    assert {s.kind for s in sites(model) if len(remove[s.name]) == H} == {"causal", "cross"}
    masked, pruned = masked_and_pruned(model, remove, inputs)
    assert torch.allclose(masked, pruned, atol=1e-5)


def test_cross_attention_decoding_through_the_cache_masked_equals_pruned():
    """Incremental decoding reuses cached cross keys: a headless cross site must keep the cache consistent."""
    model = tiny(add_cross_attention=True)
    inputs = cross_inputs(batch=2)
    ids, enc, enc_mask = inputs["input_ids"], inputs["encoder_hidden_states"], inputs["encoder_attention_mask"]

    def decode(m) -> torch.Tensor:
        first = m(input_ids=ids[:, :5], encoder_hidden_states=enc, encoder_attention_mask=enc_mask, use_cache=True)
        rest = m(input_ids=ids[:, 5:], encoder_hidden_states=enc, encoder_attention_mask=enc_mask,
                 past_key_values=first.past_key_values, use_cache=True)
        return torch.cat([first.logits, rest.logits], dim=1)

    remove = heads_to_remove(model)
    install(model)
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    with gates(model, g):
        masked = decode(model)
    prune_heads(model, remove)
    assert torch.allclose(decode(model), masked, atol=1e-5)


def test_cross_attention_cuts_q_attn_and_the_two_blocks_of_c_attn():
    model = tiny(add_cross_attention=True)
    site = next(s for s in sites(model) if s.kind == "cross")
    attn = model.get_submodule(site.name)
    q, kv = attn.q_attn.weight.detach().clone(), attn.c_attn.weight.detach().clone()
    prune_heads(model, {site.name: [1]})
    keep = [0, 2, 3]
    assert torch.equal(attn.q_attn.weight, q[:, cols(keep)])
    assert torch.equal(attn.c_attn.weight, kv[:, cols(keep, 0) + cols(keep, 1)])


def test_cross_attention_round_trip_is_exact(tmp_path):
    model = tiny(add_cross_attention=True)
    prune_heads(model, heads_to_remove(model))
    inputs = cross_inputs()
    save(model, tmp_path)
    back = load(tmp_path)
    assert head_layout(back) == head_layout(model)
    state, back_state = model.state_dict(), back.state_dict()
    assert state.keys() == back_state.keys() and all(torch.equal(state[k], back_state[k]) for k in state)
    assert torch.equal(logits(back, inputs), logits(model, inputs))


def no_dropout(model):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model.train()


def step(model, opt, inputs) -> None:
    opt.zero_grad()
    model(**inputs).loss.backward()
    opt.step()


def test_adamw_step_after_pruning_equals_step_of_model_born_pruned():
    """Moments of the fused c_attn are cut by the same three blocks of columns as its weight."""
    lr, decay = 1e-2, 0.1
    model = no_dropout(tiny())
    inputs = batch_for("gpt2")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=decay)
    for _ in range(3):
        step(model, opt, inputs)
    first, last = (s.name for s in sites(model))
    remove = {first: [1, 2], last: list(range(H))}  # the last site loses every head
    full = {n: p.detach().clone() for n, p in model.named_parameters()}
    moments = {n: {k: v.clone() for k, v in opt.state[p].items()} for n, p in model.named_parameters()}
    prune_heads(model, remove, optimizer=opt)

    # How each tensor of the full model maps to the pruned one, written out by hand.
    how: dict[str, tuple[int, list[int]]] = {}
    for site, keep in ((first, [0, 3]), (last, [])):
        how[f"{site}.c_attn.weight"] = (1, cols(keep, 0) + cols(keep, 1) + cols(keep, 2))
        how[f"{site}.c_attn.bias"] = (0, cols(keep, 0) + cols(keep, 1) + cols(keep, 2))
        how[f"{site}.c_proj.weight"] = (0, cols(keep))

    def cut(name: str, t: torch.Tensor) -> torch.Tensor:
        if name not in how:
            return t.clone()
        dim, index = how[name]
        return t.index_select(dim, torch.tensor(index, dtype=torch.long))

    born = no_dropout(tiny())
    prune_heads(born, remove)
    with torch.no_grad():
        for name, p in born.named_parameters():
            p.copy_(cut(name, full[name]))
    born_opt = torch.optim.AdamW(born.parameters(), lr=lr, weight_decay=decay)
    for name, p in born.named_parameters():
        born_opt.state[p] = {k: v.clone() if k == "step" else cut(name, v) for k, v in moments[name].items()}

    step(model, opt, inputs)
    step(born, born_opt, inputs)
    for (name, a), (_, b) in zip(model.named_parameters(), born.named_parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), name
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(opt.state[a][key], born_opt.state[b][key], atol=1e-7, rtol=1e-5), (name, key)


def test_projections_are_linear_views_that_write_through():
    """Scorers and strategies read q/k/v rows and o columns in Linear layout; for GPT-2 they are views."""
    model = build("gpt2")
    site = sites(model)[0]
    attn = model.get_submodule(site.name)
    proj = family_of(model).projections(model, site)
    assert torch.equal(proj.k.weight, attn.c_attn.weight[:, D : 2 * D].T)
    assert torch.equal(proj.v.bias, attn.c_attn.bias[2 * D :])
    assert torch.equal(proj.o.weight, attn.c_proj.weight.T)
    assert (proj.q.in_features, proj.q.out_features, proj.o.in_features) == (D, D, D)
    with torch.no_grad():
        proj.v.weight[HD : 2 * HD] = 0  # head 1's value rows
        proj.o.weight[:, :HD] *= 2  # head 0's output columns
    assert attn.c_attn.weight[:, 2 * D + HD : 2 * D + 2 * HD].abs().sum() == 0
    prune_heads(model, {site.name: [3]})
    assert proj.q.weight.shape == (3 * HD, D) and proj.o.weight.shape == (D, 3 * HD)  # views follow the cut


def test_output_view_hook_sees_linear_layout():
    model = build("gpt2")
    site = sites(model)[0]
    o = family_of(model).projections(model, site).o
    seen = []
    handle = o.register_forward_pre_hook(lambda module, args: seen.append((module.weight.shape, args[0].shape)))
    with torch.no_grad():
        logits(model, batch_for("gpt2"))
    handle.remove()
    assert seen == [((D, D), (3, 9, D))]


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "config,spec",
    [
        ({}, {}),
        ({}, {0: [1, 3], 1: [0]}),
        ({}, {0: [0, 1, 2, 3]}),  # a site emptied
        ({"tie_word_embeddings": False}, {1: [2]}),
        ({"add_cross_attention": True}, {0: [0], 1: [0, 1, 2, 3], 3: [2]}),
        ({"n_inner": 40}, {2: [1]}),
    ],
    ids=["full", "partial", "site emptied", "untied head", "cross", "n_inner"],
)
@pytest.mark.parametrize("model_class", [GPT2LMHeadModel, GPT2Model])
def test_param_count_equals_the_pruned_model(config, spec, model_class):
    model = model_class(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=40, **config))
    arch = model_class.__name__
    assert count_params(model.config, architecture=arch) == numel(model)
    names = [s.name for s in sites(model)]
    remove = {names[i]: heads for i, heads in spec.items() if i < len(names)}
    prune_heads(model, remove)
    assert count_params(model.config, head_layout(model), architecture=arch) == numel(model)


def test_unsupported_model_names_the_families_and_the_guide():
    with pytest.raises(ValueError, match=r"'t5'.*gpt2 \(gpt2\).*llama \(llama, mistral, qwen2\).*ADDING_A_FAMILY"):
        family_of(SimpleNamespace(config=SimpleNamespace(model_type="t5")))
