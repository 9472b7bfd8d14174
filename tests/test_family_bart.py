"""BART: Marian's adapter (encoder self, decoder causal self, cross attention under ``model.*.layers.N``).

Masked == pruned with headless sites, generation through the cache, save/load and AdamW slicing run on BART
through TINY in conftest; here: its sites, each site kind masked == pruned on its own, and parameter counts.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import batch_for, build, build_with_biases, logits
from transformers import BartConfig, BartForConditionalGeneration, BartModel

from heads.flops import count_params
from heads.surgery import head_layout, install, ones_gates, prune_heads, set_gates, sites
from heads.surgery.families import FAMILIES, family_of


def test_marian_adapter_finds_the_bart_sites():
    model = build("bart")
    assert family_of(model) is FAMILIES["marian"]
    assert [(s.name, s.kind) for s in sites(model)] == [
        ("model.encoder.layers.0.self_attn", "self"), ("model.encoder.layers.1.self_attn", "self"),
        ("model.decoder.layers.0.self_attn", "causal"), ("model.decoder.layers.0.encoder_attn", "cross"),
        ("model.decoder.layers.1.self_attn", "causal"), ("model.decoder.layers.1.encoder_attn", "cross"),
    ]


@pytest.mark.parametrize("kind", ["self", "causal", "cross"])
def test_masked_equals_pruned_per_site_kind(kind):
    model = install(build_with_biases("bart"))
    inputs = batch_for("bart")
    targets = [s.name for s in sites(model) if s.kind == kind]
    g = ones_gates(model)
    for name in targets:
        g[name][[0, 2]] = 0.0
    set_gates(model, g)
    masked = logits(model, inputs)
    set_gates(model, {name: None for name in g})
    pruned = copy.deepcopy(model)
    prune_heads(pruned, {name: [0, 2] for name in targets})
    assert torch.allclose(logits(pruned, inputs), masked, atol=1e-5)
    assert all(pruned.get_submodule(n).q_proj.out_features == 32 for n in targets)


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize(
    "spec", [{}, {0: [1, 2], 2: [0], 3: [1]}, {0: [0, 1, 2, 3], 3: [0, 1]}], ids=["full", "partial", "emptied"]
)
@pytest.mark.parametrize("model_class", [BartForConditionalGeneration, BartModel])
def test_param_count_equals_the_pruned_model(model_class, spec, tied):
    config = BartConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=2, encoder_ffn_dim=40, decoder_ffn_dim=48,
                        max_position_embeddings=30, tie_word_embeddings=tied)
    model = model_class(config)
    arch = model_class.__name__
    assert count_params(model.config, architecture=arch) == numel(model)
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[i]: heads for i, heads in spec.items()})
    assert count_params(model.config, head_layout(model), architecture=arch) == numel(model)
