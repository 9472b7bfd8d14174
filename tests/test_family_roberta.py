"""RoBERTa and XLM-RoBERTa: BERT's adapter under another prefix (``roberta.encoder.layer.N.attention.self``).

Masked == pruned with headless sites, save/load and AdamW slicing run on both through TINY in conftest; here:
the sites are found under the ``roberta.`` prefix, gates apply, and parameter counts (no pooler in the
classifier, which has a dense layer of its own) match the pruned models.
"""

from __future__ import annotations

import pytest
import torch
from conftest import batch_for, build, logits
from transformers import (
    RobertaConfig,
    RobertaForSequenceClassification,
    RobertaModel,
    XLMRobertaConfig,
    XLMRobertaForSequenceClassification,
    XLMRobertaModel,
)

from heads.flops import count_params
from heads.surgery import head_layout, install, ones_gates, prune_heads, set_gates, sites
from heads.surgery.families import FAMILIES, family_of

TYPES = ["roberta", "xlm-roberta"]


@pytest.mark.parametrize("model_type", TYPES)
def test_bert_adapter_finds_the_roberta_sites(model_type):
    model = build(model_type)
    assert family_of(model) is FAMILIES["bert"]
    found = sites(model)
    assert [(s.name, s.kind, s.num_heads, s.head_dim) for s in found] == [
        (f"roberta.encoder.layer.{i}.attention.self", "self", 4, 16) for i in range(2)
    ]
    assert family_of(model).projections(model, found[0]).o is model.get_submodule(
        "roberta.encoder.layer.0.attention.output.dense"
    )


@pytest.mark.parametrize("model_type", TYPES)
def test_gates_apply_and_respect_padding(model_type):
    model = build(model_type)
    inputs = batch_for(model_type, batch=2)
    stock = logits(model, inputs)
    install(model)
    set_gates(model, ones_gates(model))
    assert torch.equal(logits(model, inputs), stock)
    g = ones_gates(model)
    g[sites(model)[0].name][1] = 0.0
    set_gates(model, g)
    closed = logits(model, inputs)
    assert not torch.allclose(closed, stock, atol=1e-4)
    install(model, eager=True)
    assert torch.allclose(logits(model, inputs), closed, atol=1e-5)
    garbage = {**inputs, "input_ids": inputs["input_ids"].clone()}
    padded = inputs["attention_mask"] == 0
    assert padded.any()
    garbage["input_ids"][padded] = 7
    assert torch.allclose(logits(model, garbage), logits(model, inputs), atol=1e-6)


def test_cross_attention_sites_of_a_roberta_decoder():
    model = build("roberta", is_decoder=True, add_cross_attention=True)
    assert [s.label for s in sites(model)] == ["enc0.causal", "enc0.cross", "enc1.causal", "enc1.cross"]


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


CLASSES = {
    "RobertaForSequenceClassification": (RobertaConfig, RobertaForSequenceClassification),
    "RobertaModel": (RobertaConfig, RobertaModel),
    "XLMRobertaForSequenceClassification": (XLMRobertaConfig, XLMRobertaForSequenceClassification),
    "XLMRobertaModel": (XLMRobertaConfig, XLMRobertaModel),
}


@pytest.mark.parametrize("spec", [{}, {0: [0, 2], 1: [3]}, {1: [0, 1, 2, 3]}], ids=["full", "partial", "emptied"])
@pytest.mark.parametrize("arch", list(CLASSES))
def test_param_count_equals_the_pruned_model(arch, spec):
    config_class, model_class = CLASSES[arch]
    config = config_class(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=40, max_position_embeddings=66, type_vocab_size=1, num_labels=3)
    model = model_class(config)
    assert count_params(model.config, architecture=arch) == numel(model)
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[i]: heads for i, heads in spec.items()})
    assert count_params(model.config, head_layout(model), architecture=arch) == numel(model)


def test_param_count_of_a_decoder_with_cross_attention():
    model = RobertaModel(RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=40, is_decoder=True, add_cross_attention=True))
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[0]: [1], names[3]: [0, 1, 2, 3]})
    assert count_params(model.config, head_layout(model), architecture="RobertaModel") == numel(model)
