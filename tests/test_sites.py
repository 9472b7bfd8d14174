import pytest
from conftest import build

from heads import models
from heads.surgery import full_layout, head_layout, sites


def test_llama_sites_are_causal_per_layer():
    found = sites(build("llama", layers=3, heads=4))
    assert [(s.layer, s.kind, s.num_heads) for s in found] == [(0, "causal", 4), (1, "causal", 4), (2, "causal", 4)]
    assert found[0].name == "model.layers.0.self_attn"


def test_marian_has_encoder_self_decoder_causal_and_cross():
    kinds = [(s.stack, s.layer, s.kind) for s in sites(build("marian", layers=2))]
    assert kinds == [
        ("encoder", 0, "self"), ("encoder", 1, "self"),
        ("decoder", 0, "causal"), ("decoder", 0, "cross"),
        ("decoder", 1, "causal"), ("decoder", 1, "cross"),
    ]


def test_bert_sites_and_labels():
    found = sites(build("bert", layers=2, heads=4))
    assert [s.label for s in found] == ["enc0.self", "enc1.self"]
    assert found[0].name.endswith("encoder.layer.0.attention.self")


def test_pretrained_minilm_is_bert_6x12():
    model = models.minilm()
    found = sites(model)
    assert len(found) == 6 and {s.num_heads for s in found} == {12} and {s.head_dim for s in found} == {32}
    assert head_layout(model) == full_layout(model)


def test_grouped_query_counts():
    site = sites(build("llama", heads=8, kv_heads=2, d=64))[0]
    assert (site.num_heads, site.num_kv_heads, site.group_size, site.head_dim) == (8, 2, 4, 8)


def test_unsupported_family_is_named():
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(T5Config(vocab_size=50, d_model=32, d_kv=8, d_ff=32, num_layers=1, num_heads=2))
    with pytest.raises(ValueError, match=r"'t5'.*supported families.*ADDING_A_FAMILY"):
        sites(model)
