"""MPNet (heads.embedding): sites, gates through its rewritten attention, the shared relative-position bias sliced
per kept head, exact sizes; the family-wide guarantees run on it through TINY (tests/conftest.py)."""

from __future__ import annotations

import torch
from conftest import batch_for, build, build_with_biases
from transformers import MPNetModel

from heads.embedding import MPNetForRetrieval, group_labels
from heads.flops import count_params
from heads.surgery import head_layout, install, load, ones_gates, prune_heads, save, set_gates, sites


def hidden(model, inputs):
    flat = {k: v.flatten(0, 1) for k, v in inputs.items() if k != "labels"}
    return model.mpnet(**flat).last_hidden_state, flat["attention_mask"].bool()


def test_sites_are_the_encoder_self_attentions():
    model = build("mpnet", layers=3)
    found = sites(model)
    assert [s.name for s in found] == [f"mpnet.encoder.layer.{i}.attention.attn" for i in range(3)]
    layouts = {(s.kind, s.stack, s.num_heads, s.num_kv_heads, s.head_dim) for s in found}
    assert layouts == {("self", "encoder", 4, 4, 16)}


def test_open_gates_equal_stock_mpnet_and_a_closed_gate_changes_the_output():
    model = build_with_biases("mpnet")
    stock = MPNetModel(model.config, add_pooling_layer=False).eval()
    stock.load_state_dict(model.mpnet.state_dict())
    inputs = batch_for("mpnet")
    flat = {k: v.flatten(0, 1) for k, v in inputs.items() if k != "labels"}
    real = flat["attention_mask"].bool()
    # stock MPNet derives positions from pad ids (1): no real token here has id 1, padding is masked anyway
    want = stock(input_ids=flat["input_ids"].masked_fill(~real, 1), attention_mask=flat["attention_mask"])
    install(model)
    assert model.config._attn_implementation == "heads_gated"
    set_gates(model, ones_gates(model))
    got, _ = hidden(model, inputs)
    assert torch.allclose(got[real], want.last_hidden_state[real], atol=1e-5)
    gates = ones_gates(model)
    gates[sites(model)[0].name][1] = 0.0
    set_gates(model, gates)
    closed, _ = hidden(model, inputs)
    assert (closed[real] - got[real]).abs().max() > 1e-3


def test_pruned_site_adds_only_its_own_heads_bias_columns():
    """Heads 0 and 2 of layer 0 go: the shared bias table keeps its 4 columns, layer 0 adds columns 1 and 3
    (a prefix slice would add 0 and 1 and differ from the masked model)."""
    model = install(build_with_biases("mpnet"))
    with torch.no_grad():  # a bias that differs per head, so the wrong columns show
        model.mpnet.encoder.relative_attention_bias.weight.normal_(0, 2.0, generator=torch.Generator().manual_seed(0))
    inputs = batch_for("mpnet")
    first = sites(model)[0].name
    gates = ones_gates(model)
    gates[first][[0, 2]] = 0.0
    set_gates(model, gates)
    masked = model(**inputs).logits
    set_gates(model, {first: None})
    prune_heads(model, {first: [0, 2]})
    assert model.get_submodule(first).heads_kept == [1, 3]
    assert model.mpnet.encoder.relative_attention_bias.weight.shape == (32, 4)
    assert torch.allclose(model(**inputs).logits, masked, atol=1e-5)


def test_pruned_model_is_smaller_and_counted_exactly(tmp_path):
    model = build("mpnet")
    before = sum(p.numel() for p in model.parameters())
    assert count_params(model.config, architecture="MPNetForRetrieval") == before
    layout = prune_heads(model, {s.name: [0, 3] for s in sites(model)})
    after = sum(p.numel() for p in model.parameters())
    assert after < before
    assert count_params(model.config, layout, architecture="MPNetForRetrieval") == after
    inputs = batch_for("mpnet")
    loaded = load(save(model, tmp_path / "m"))  # found by its class name (AutoModelForTextEncoding)
    assert isinstance(loaded, MPNetForRetrieval) and head_layout(loaded) == head_layout(model)
    assert torch.equal(loaded(**inputs).logits, model.eval()(**inputs).logits)


def test_grouped_logits_are_scaled_cosines_and_the_loss_ignores_padding_queries():
    model = build("mpnet")
    inputs = batch_for("mpnet")
    inputs["attention_mask"][0, 1] = 0  # group 0's second query is padding
    inputs["attention_mask"][0, 3] = 0  # and so is its match
    labels = group_labels(inputs["attention_mask"][:, :2].any(-1))
    out = model(**{**inputs, "labels": labels})
    assert out.logits.shape == (3, 2, 2)
    emb = model(input_ids=inputs["input_ids"][1], attention_mask=inputs["attention_mask"][1]).logits
    assert torch.allclose(out.logits[1], emb[:2] @ emb[2:].T / 0.05, atol=1e-4)
    assert labels[0].tolist() == [0, -100]
    assert out.logits[0, 0, 1] < -1e30  # a padding match is no candidate
    valid = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert torch.allclose(out.loss, valid)


def test_attention_weights_reach_the_capture_hooks_on_real_queries_only():
    """Roles and similarity read each site's weights from its return value on the eager path; grouped batches'
    padding rows are left out like any padding."""
    from heads.scoring.capture import attention_weights
    from heads.scoring.session import scoring_mode

    model = build("mpnet")
    inputs = batch_for("mpnet")
    rows: dict[str, list] = {}
    with scoring_mode(model, eager=True):
        attention_weights(model, [inputs], lambda name, p: rows.setdefault(name, []).append(p))
    real = int(inputs["attention_mask"].sum())
    assert sorted(rows) == sorted(s.name for s in sites(model))
    for (p,) in rows.values():
        assert p.shape == (real, 4, inputs["input_ids"].shape[-1])
        assert torch.allclose(p.sum(-1), torch.ones(real, 4), atol=1e-5)
