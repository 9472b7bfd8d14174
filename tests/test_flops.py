"""Closed-form parameter and FLOP counts (heads.flops) against physically pruned models."""

from __future__ import annotations

import random

import pytest
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    LlamaModel,
    MarianConfig,
    MarianMTModel,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    T5Config,
)

from heads import models
from heads.flops import Flops, count_params, flop_ratio, flops_per_token
from heads.surgery import full_layout, head_layout, prune_heads, sites


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


def arch(model) -> str:
    return type(model).__name__


def tiny_llama(tied: bool = False, head: bool = True, **overrides):
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied, **overrides)
    return (LlamaForCausalLM if head else LlamaModel)(config)


def tiny_marian(**overrides):
    kwargs = dict(vocab_size=64, decoder_vocab_size=80, d_model=32, encoder_layers=1, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=40, decoder_ffn_dim=48,
                  max_position_embeddings=32, pad_token_id=0, decoder_start_token_id=0)
    return MarianMTModel(MarianConfig(**{**kwargs, **overrides}))


def removals(model, spec: dict[tuple[str, int], list[int]]) -> dict[str, list[int]]:
    """Heads to remove keyed by (site kind, index among the sites of that kind)."""
    by_kind: dict[str, list[str]] = {}
    for s in sites(model):
        by_kind.setdefault(s.kind, []).append(s.name)
    return {by_kind[kind][i]: heads for (kind, i), heads in spec.items()}


def check_pruned_count(model, spec: dict[tuple[str, int], list[int]]) -> None:
    """count_params predicts, from the unpruned config, the size the model has once pruned."""
    remove = removals(model, spec)
    target = {name: [h for h in kept if h not in remove.get(name, [])] for name, kept in full_layout(model).items()}
    predicted = count_params(model.config, target, architecture=arch(model))
    assert count_params(model.config, None, architecture=arch(model)) == numel(model)
    prune_heads(model, remove)
    assert head_layout(model) == target
    assert numel(model) == predicted
    assert count_params(model.config, head_layout(model), architecture=arch(model)) == predicted


LLAMA_STYLE = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2)
LLAMA_CASES = {
    "full": (lambda: models.llama(d=32, heads=4, ff=48), {}),
    "partial": (lambda: models.llama(d=32, heads=4, ff=48), {("causal", 0): [1, 3], ("causal", 1): [0]}),
    "site emptied": (lambda: models.llama(d=32, heads=4, ff=48), {("causal", 0): [0, 1, 2, 3]}),
    "gqa group": (lambda: models.llama(d=32, heads=4, kv_heads=2, ff=48), {("causal", 1): [2, 3]}),
    "gqa emptied": (lambda: models.llama(d=32, heads=4, kv_heads=2, ff=48), {("causal", 0): [0, 1, 2, 3]}),
    "attention bias": (lambda: models.llama(d=32, heads=4, ff=48, attention_bias=True),
                       {("causal", 0): [2], ("causal", 1): [0, 1, 2, 3]}),
    "mlp bias": (lambda: models.llama(d=32, heads=4, ff=48, mlp_bias=True), {("causal", 0): [3]}),
    "tied": (lambda: tiny_llama(tied=True, attention_bias=True), {("causal", 0): [0, 1]}),
    "head_dim": (lambda: models.llama(d=32, heads=4, ff=48, head_dim=4), {("causal", 1): [1]}),
    "base model": (lambda: tiny_llama(head=False), {("causal", 1): [0, 1]}),
    # Llama-style families with their own bias rules: Mistral none, Qwen2 on q/k/v and not on o
    "mistral": (lambda: MistralForCausalLM(MistralConfig(**LLAMA_STYLE)), {("causal", 0): [2, 3]}),
    "qwen2": (lambda: Qwen2ForCausalLM(Qwen2Config(**LLAMA_STYLE)), {("causal", 1): [0, 1, 2, 3]}),
}


@pytest.mark.parametrize("case", list(LLAMA_CASES))
def test_llama_params(case):
    build, spec = LLAMA_CASES[case]
    check_pruned_count(build(), spec)


BERT_CASES = {
    "full": {},
    "partial": {("self", 0): [0, 2], ("self", 1): [3]},
    "site emptied": {("self", 1): [0, 1, 2, 3]},
}


@pytest.mark.parametrize("labels", [None, 3])
@pytest.mark.parametrize("case", list(BERT_CASES))
def test_bert_params(case, labels):
    check_pruned_count(models.bert(d=32, heads=4, ff=40, labels=labels, max_len=64), BERT_CASES[case])


def test_bert_decoder_with_cross_attention_params():
    model = models.bert(d=32, heads=4, ff=40, max_len=64, is_decoder=True, add_cross_attention=True)
    assert {s.kind for s in sites(model)} == {"causal", "cross"}
    check_pruned_count(model, {("causal", 0): [1], ("cross", 1): [0, 1, 2, 3]})


MARIAN_CASES = {
    "full": {},
    "partial": {("self", 0): [1, 2], ("causal", 1): [0], ("cross", 0): [1]},
    "sites emptied": {("self", 0): [0, 1, 2, 3], ("cross", 1): [0, 1]},
}


@pytest.mark.parametrize("case", list(MARIAN_CASES))
def test_marian_params(case):
    check_pruned_count(tiny_marian(), MARIAN_CASES[case])


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("tied", [True, False])
def test_marian_embedding_sharing_and_tying(share, tied):
    # Frozen sinusoidal positions are Parameters and count; final_logits_bias is a buffer and does not.
    overrides = dict(share_encoder_decoder_embeddings=share, tie_word_embeddings=tied)
    check_pruned_count(tiny_marian(**overrides), {("cross", 0): [0]})
    model = tiny_marian(**overrides)
    assert count_params(model.config, architecture="MarianModel") == numel(model.model)


def test_architecture_from_saved_config():
    model = models.llama(d=32, heads=4, ff=48)
    with pytest.raises(ValueError, match="architecture="):
        count_params(model.config)
    model.config.architectures = ["LlamaForCausalLM"]  # what save_pretrained records
    assert count_params(model.config) == numel(model)
    assert count_params(model.config, architecture="LlamaModel") == numel(model.model)


def test_unsupported_types_raise():
    with pytest.raises(ValueError, match="t5"):
        count_params(T5Config(), architecture="T5ForConditionalGeneration")
    with pytest.raises(ValueError, match="t5"):
        flops_per_token(T5Config(), None, 8)
    bert = models.bert(d=32, heads=4)
    with pytest.raises(ValueError, match="BertForMaskedLM"):
        count_params(bert.config, architecture="BertForMaskedLM")
    with pytest.raises(ValueError, match="LlamaForCausalLM"):
        count_params(bert.config, architecture="LlamaForCausalLM")


def test_bad_layouts_raise():
    model = models.llama(d=32, heads=4, kv_heads=2, ff=48)
    name = sites(model)[0].name
    with pytest.raises(ValueError, match="partly kept"):
        count_params(model.config, {name: [0, 1, 2]}, architecture=arch(model))
    with pytest.raises(ValueError, match="not an attention site"):
        count_params(model.config, {"lm_head": [0]}, architecture=arch(model))
    with pytest.raises(ValueError, match="does not have"):
        count_params(model.config, {"model.layers.7.self_attn": [0]}, architecture=arch(model))


@pytest.mark.parametrize("build", [
    lambda: models.llama(d=32, heads=4, ff=48),
    lambda: models.llama(d=32, heads=4, kv_heads=2, ff=48),
    lambda: models.bert(d=32, heads=4, ff=40),
    lambda: tiny_marian(),
])
def test_flops_decrease_with_every_removal(build):
    model = build()
    layout = full_layout(model)
    groups = [(s.name, tuple(range(g, g + s.group_size))) for s in sites(model) for g in range(0, s.num_heads,
                                                                                                   s.group_size)]
    random.Random(0).shuffle(groups)
    before = flops_per_token(model.config, layout, 16, architecture=arch(model))
    for name, group in groups:
        layout[name] = [h for h in layout[name] if h not in group]
        after = flops_per_token(model.config, layout, 16, architecture=arch(model))
        assert after.forward < before.forward and after.total < before.total
        before = after


def test_flops_by_hand():
    d, head_dim, n = 32, 8, 15
    model = models.llama(d=d, heads=4, ff=48)
    full = full_layout(model)
    one_fewer = {**full, sites(model)[1].name: [0, 1, 3]}
    a = flops_per_token(model.config, full, n, architecture=arch(model))
    b = flops_per_token(model.config, one_fewer, n, architecture=arch(model))
    projections = 4 * 2 * d * head_dim  # q, k, v rows and o columns of one head, 2 FLOPs per multiply-add
    attention = 2 * 2 * head_dim * (n + 1) / 2  # scores and weighted sum over the causal average of 8 keys
    assert a.forward - b.forward == projections + attention
    assert a.backward == 2 * a.forward and a.total == 3 * a.forward
    assert flops_per_token(model.config, full, n, backward=False, architecture=arch(model)) == Flops(
        a.forward, 0.0, a.forward)


def test_flops_by_hand_grouped_query_and_cross():
    d, n = 32, 10
    gqa = models.llama(d=d, heads=4, kv_heads=2, ff=48)  # head_dim 8, groups of 2 query heads
    full = full_layout(gqa)
    fewer = {**full, sites(gqa)[0].name: [0, 1]}
    diff = flops_per_token(gqa.config, full, n, architecture=arch(gqa)).forward - flops_per_token(
        gqa.config, fewer, n, architecture=arch(gqa)).forward
    assert diff == 2 * d * 8 * (2 + 1 + 1 + 2) + 4 * 2 * 8 * (n + 1) / 2  # q, k, v, o; 2 query heads attend

    marian = tiny_marian()  # decoder heads: 2 of size 16; cross sites attend to all n source tokens
    cross = next(s.name for s in sites(marian) if s.kind == "cross")
    full = full_layout(marian)
    diff = flops_per_token(marian.config, full, n, architecture=arch(marian)).forward - flops_per_token(
        marian.config, {cross: [1]}, n, architecture=arch(marian)).forward
    assert diff == 4 * 2 * 32 * 16 + 4 * 16 * n


def test_flop_ratio():
    model = models.llama(d=32, heads=4, ff=48)
    full = full_layout(model)
    half = {name: kept[:2] for name, kept in full.items()}
    ratio = flop_ratio(model.config, full, half, 32, architecture=arch(model))
    totals = [flops_per_token(model.config, x, 32, architecture=arch(model)).total for x in (full, half)]
    assert ratio == pytest.approx(totals[0] / totals[1]) and ratio > 1
    assert flop_ratio(model.config, half, half, 32, architecture=arch(model)) == 1.0
    assert flop_ratio(model.config, None, full, 32, architecture=arch(model)) == 1.0


def test_pretrained_minilm():
    pytest.importorskip(models.MINILM_PACKAGE)
    model = models.minilm()
    assert model.config.architectures == ["BertModel"]  # recorded by the checkpoint: no architecture= needed
    assert count_params(model.config) == numel(model) == 22_713_216
    check_pruned_count(model, {("self", 0): list(range(6)), ("self", 5): list(range(12))})
