"""Closed-form parameter and FLOP counts of head-pruned models, from config and head layout alone.

Nothing here touches a model's tensors: the counts follow from the config, the
architecture name and a head layout (site name -> kept original heads, as
``heads.surgery.head_layout`` returns; sites the layout leaves out keep all
their heads, and ``layout=None`` is the unpruned model). That makes them a
check on physical pruning and a yardstick for measured speed-ups.

Supported: ``LlamaForCausalLM``/``LlamaModel`` (and the same two of Mistral and Qwen2), ``BertModel``/
``BertForSequenceClassification`` (and the same two of RoBERTa and
XLM-RoBERTa), ``MarianMTModel``/``MarianModel``,
``BartForConditionalGeneration``/``BartModel``, ``GPT2LMHeadModel``/
``GPT2Model`` and ``Gemma3ForCausalLM``/``Gemma3TextModel``. The
architecture comes from ``architecture=`` or ``config.architectures`` (set
once a model was saved; a model built from a config lacks it, so pass
``type(model).__name__``).

FLOP conventions (:func:`flops_per_token`):

* only matrix multiplications count, at 2 FLOPs per multiply-add; biases,
  norms, activations, softmax, rotary embeddings and residual adds are left
  out (they are a few percent at most), and embedding lookups are free;
* every linear layer (GPT-2's Conv1D too; its fused ``c_attn`` counts as the q,
  k and v maps it is) costs ``2 * d_in * d_out`` per token it is applied to; the
  output head (LM head, or BERT's pooler and classifier, which see one token
  per sequence) is counted;
* attention at a site with ``h`` kept query heads of size ``d_h`` costs
  ``4 * h * d_h * L`` per query token (scores ``QK^T`` plus weights times
  ``V``), with ``L = seq_len`` for self and cross sites and the causal average
  ``L = (seq_len + 1) / 2`` for causal sites (a sliding window of ``w`` keys caps
  each query's keys at ``w``); grouped-query attention shares
  keys and values but not these matmuls, so ``h`` is the query heads;
* encoder-decoders: source and target both have ``seq_len`` tokens, and a
  "token" is one target token together with one source token (the encoder's
  share is included);
* backward = 2 x forward (gradients with respect to activations and to
  weights), the usual convention.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from heads.surgery.families import FAMILIES, Family

Layout = Mapping[str, Iterable[int]]
SiteKey = tuple[str, int, str]  # (stack, layer, kind), as in heads.surgery.Site


@dataclass(frozen=True)
class Flops:
    """FLOPs per token: forward, backward and their sum."""

    forward: float
    backward: float
    total: float


class _Tally:
    """Walks one architecture, adding up parameters and forward matmul FLOPs per token."""

    def __init__(self, config, layout: Layout | None, seq_len: float):
        self.config = config
        self.seq_len = seq_len
        self.family: Family = FAMILIES[config.model_type]
        self.kept = _parse_layout(config, self.family, layout or {})
        self.seen: set[SiteKey] = set()
        self.params = 0
        self.flops = 0.0

    def weights(self, count: int) -> None:
        """Parameters that do no matmul per token: embeddings, norms."""
        self.params += count

    def linear(self, d_in: int, d_out: int, bias: bool, per_token: float = 1.0, tied: bool = False) -> None:
        """A linear layer applied to ``per_token`` vectors per token; ``tied`` weights are counted elsewhere."""
        if not tied:
            self.params += d_in * d_out + (d_out if bias else 0)
        self.flops += 2 * d_in * d_out * per_token

    def attention(self, d: int, stack: str, layer: int, kind: str, bias: bool, o_bias: bool | None = None,
                  window: int | None = None) -> None:
        """One attention site: q/k/v/o projections plus the attention matmuls (``o_bias``: the output
        projection's bias where it differs from q/k/v's, as in Qwen2; ``window``: a causal site whose queries see
        at most that many keys, themselves included, as Gemma 3's sliding-window layers)."""
        key = (stack, layer, kind)
        self.seen.add(key)
        heads, kv_heads, head_dim = self.family.head_counts(self.config, kind, stack)
        kept = self.kept.get(key, range(heads))
        q, kv = len(kept), _kv_heads(key, kept, heads // kv_heads)
        self.linear(d, q * head_dim, bias)
        self.linear(d, kv * head_dim, bias)  # k; for cross sites on source tokens, as many as target ones
        self.linear(d, kv * head_dim, bias)  # v
        # The output bias has d entries whatever the heads, so it stays when a site loses them all.
        self.linear(q * head_dim, d, bias if o_bias is None else o_bias)
        kv_len = (self.seq_len + 1) / 2 if kind == "causal" else self.seq_len
        if window is not None and self.seq_len > window:  # query i sees min(i, window) keys
            kv_len = (window * (window + 1) / 2 + (self.seq_len - window) * window) / self.seq_len
        self.flops += 4 * q * head_dim * kv_len

    def check_layout(self) -> None:
        unknown = sorted(set(self.kept) - self.seen)
        if unknown:
            raise ValueError(f"layout names sites this {self.config.model_type} config does not have: {unknown}")


def _parse_layout(config, family: Family, layout: Layout) -> dict[SiteKey, list[int]]:
    """Site name -> kept heads, re-keyed by (stack, layer, kind) with the family's own site patterns."""
    compiled = [(re.compile(p.regex), p) for p in family.patterns]
    kept: dict[SiteKey, list[int]] = {}
    for name, heads in layout.items():
        for rx, pattern in compiled:
            match = rx.search(name)
            if match:
                kind = family.site_kind(config, pattern)
                kept[(pattern.stack, int(match.group(1)), kind)] = sorted({int(h) for h in heads})
                break
        else:
            raise ValueError(f"layout key {name!r} is not an attention site of a {config.model_type} model")
    return kept


def _kv_heads(key: SiteKey, kept: Iterable[int], group: int) -> int:
    """Key/value heads left: grouped-query sites keep whole groups only (as prune_heads enforces)."""
    kept = set(kept)
    groups = {h // group for h in kept}
    partial = [g for g in sorted(groups) if any(g * group + i not in kept for i in range(group))]
    if partial:
        raise ValueError(f"site {key}: key/value groups {partial} are only partly kept (groups of {group} heads)")
    return len(groups)


def _llama(t: _Tally, c, head: bool) -> None:
    """Llama, Mistral and Qwen2: Llama's config says its biases; Mistral has none; Qwen2 biases q, k and v only."""
    d = c.hidden_size
    qkv_bias = {"mistral": False, "qwen2": True}.get(c.model_type, getattr(c, "attention_bias", False))
    o_bias = False if c.model_type == "qwen2" else qkv_bias
    mlp_bias = getattr(c, "mlp_bias", False)
    t.weights(c.vocab_size * d)
    for layer in range(c.num_hidden_layers):
        t.attention(d, "", layer, "causal", qkv_bias, o_bias)
        t.linear(d, c.intermediate_size, mlp_bias)  # gate
        t.linear(d, c.intermediate_size, mlp_bias)  # up
        t.linear(c.intermediate_size, d, mlp_bias)  # down
        t.weights(2 * d)  # two RMSNorm weights
    t.weights(d)  # final norm
    if head:
        t.linear(d, c.vocab_size, False, tied=c.tie_word_embeddings)


def _gemma3(t: _Tally, c, head: bool) -> None:
    """Gemma 3 text: Llama's projections plus a q and a k norm of ``head_dim`` per layer (shared by its heads, so
    pruning leaves them), four RMSNorms a layer, sliding-window layers (``layer_types``) seeing ``sliding_window``
    keys at most."""
    d, bias = c.hidden_size, c.attention_bias
    t.weights(c.vocab_size * d)
    for layer, kind in enumerate(c.layer_types):
        window = c.sliding_window if kind == "sliding_attention" else None
        t.attention(d, "", layer, "causal", bias, window=window)
        t.weights(2 * c.head_dim)  # q_norm, k_norm
        t.linear(d, c.intermediate_size, False)  # gate
        t.linear(d, c.intermediate_size, False)  # up
        t.linear(c.intermediate_size, d, False)  # down
        t.weights(4 * d)  # input, post-attention, pre- and post-feedforward RMSNorms
    t.weights(d)  # final norm
    if head:
        t.linear(d, c.vocab_size, False, tied=c.tie_word_embeddings)


def _bert(t: _Tally, c, head: bool) -> None:
    """BERT, RoBERTa and XLM-RoBERTa (one encoder; RoBERTa's classifier swaps the pooler for a dense layer of the
    same size, so the counts agree)."""
    d, ff = c.hidden_size, c.intermediate_size
    self_kind = "causal" if c.is_decoder else "self"
    t.weights((c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * d + 2 * d)
    for layer in range(c.num_hidden_layers):
        t.attention(d, "encoder", layer, self_kind, True)
        t.weights(2 * d)  # LayerNorm after attention
        if c.add_cross_attention:
            t.attention(d, "encoder", layer, "cross", True)
            t.weights(2 * d)
        t.linear(d, ff, True)
        t.linear(ff, d, True)
        t.weights(2 * d)
    # BertModel builds its pooler by default; it and the classifier see the first token only.
    t.linear(d, d, True, per_token=1 / t.seq_len)
    if head:
        t.linear(d, c.num_labels, True, per_token=1 / t.seq_len)


def _mpnet(t: _Tally, c, head: bool) -> None:
    """MPNet as heads' sentence-embedding model (no pooler, no output head: mean pooling is no matmul): BERT's
    layers, no token types, and one relative-position bias table shared by every layer (buckets x heads, kept
    whole however the heads are pruned)."""
    d, ff = c.hidden_size, c.intermediate_size
    t.weights((c.vocab_size + c.max_position_embeddings) * d + 2 * d)
    t.weights(c.relative_attention_num_buckets * c.num_attention_heads)
    for layer in range(c.num_hidden_layers):
        t.attention(d, "encoder", layer, "self", True)
        t.weights(2 * d)  # LayerNorm after attention
        t.linear(d, ff, True)
        t.linear(ff, d, True)
        t.weights(2 * d)


def _encoder_layers(t: _Tally, c) -> None:
    """An encoder-decoder's encoder layers (Marian, BART, Bergamot): self-attention, a feed-forward block and two
    LayerNorms each."""
    d = c.d_model
    for layer in range(c.encoder_layers):
        t.attention(d, "encoder", layer, "self", True)
        t.linear(d, c.encoder_ffn_dim, True)
        t.linear(c.encoder_ffn_dim, d, True)
        t.weights(4 * d)  # two LayerNorms


def _marian(t: _Tally, c, head: bool) -> None:
    d = c.d_model
    shared, tied = c.share_encoder_decoder_embeddings, c.tie_word_embeddings
    target_vocab = c.vocab_size if shared else c.decoder_vocab_size
    if shared and tied:
        t.weights(c.vocab_size * d)  # model.shared, with the encoder and decoder tables tied to it
    elif shared:
        # Transformers 5 ties the encoder/decoder tables to `shared` only under tie_word_embeddings:
        # without it all three exist (`shared` unused), the decoder's sized by decoder_vocab_size.
        t.weights((2 * c.vocab_size + c.decoder_vocab_size) * d)
    else:
        t.weights((c.vocab_size + target_vocab) * d)  # own encoder and decoder tables
    # Sinusoidal positions are a frozen Parameter (requires_grad=False), so model.parameters() counts them.
    t.weights(2 * c.max_position_embeddings * d)
    _encoder_layers(t, c)
    for layer in range(c.decoder_layers):
        t.attention(d, "decoder", layer, "causal", True)
        t.attention(d, "decoder", layer, "cross", True)
        t.linear(d, c.decoder_ffn_dim, True)
        t.linear(c.decoder_ffn_dim, d, True)
        t.weights(6 * d)  # three LayerNorms
    if head:
        # final_logits_bias is a buffer, not a parameter.
        t.linear(d, target_vocab, False, tied=tied)


def _bergamot(t: _Tally, c, head: bool) -> None:
    """Bergamot students (heads.bergamot): one shared table (also the output layer, plus its bias), sinusoidal
    positions computed (no parameters), an SSRU instead of decoder self-attention."""
    d = c.d_model
    t.weights(c.vocab_size * d)
    _encoder_layers(t, c)
    for layer in range(c.decoder_layers):
        t.linear(d, d, False)  # SSRU W
        t.linear(d, d, True)  # SSRU forget gate
        t.attention(d, "decoder", layer, "cross", True)
        t.linear(d, c.decoder_ffn_dim, True)
        t.linear(c.decoder_ffn_dim, d, True)
        t.weights(6 * d)  # three LayerNorms
    if head:
        t.weights(c.vocab_size)  # the output bias
        t.linear(d, c.vocab_size, False, tied=True)


def _bart(t: _Tally, c, head: bool) -> None:
    d = c.d_model
    # Transformers 5 ties the encoder's and decoder's embed_tokens (and the LM head) to `shared` only under
    # tie_word_embeddings; without it all three tables exist. Learned positions carry BART's offset of 2, and
    # each stack normalises its embeddings.
    tables = 1 if c.tie_word_embeddings else 3
    t.weights(tables * c.vocab_size * d + 2 * (c.max_position_embeddings + 2) * d + 4 * d)
    _encoder_layers(t, c)
    for layer in range(c.decoder_layers):
        t.attention(d, "decoder", layer, "causal", True)
        t.attention(d, "decoder", layer, "cross", True)
        t.linear(d, c.decoder_ffn_dim, True)
        t.linear(c.decoder_ffn_dim, d, True)
        t.weights(6 * d)
    if head:
        t.linear(d, c.vocab_size, False, tied=c.tie_word_embeddings)  # final_logits_bias is a buffer


def _gpt2(t: _Tally, c, head: bool) -> None:
    d = c.n_embd
    inner = c.n_inner or 4 * d
    t.weights((c.vocab_size + c.n_positions) * d)
    for layer in range(c.n_layer):
        t.attention(d, "", layer, "causal", True)  # c_attn (q, k, v) and c_proj
        t.weights(2 * d)  # ln_1
        if c.add_cross_attention:
            t.attention(d, "", layer, "cross", True)  # q_attn, c_attn (k, v) and c_proj
            t.weights(2 * d)  # ln_cross_attn
        t.linear(d, inner, True)
        t.linear(inner, d, True)
        t.weights(2 * d)  # ln_2
    t.weights(2 * d)  # ln_f
    if head:
        t.linear(d, c.vocab_size, False, tied=c.tie_word_embeddings)


# architecture -> (model_type, walker, whether it has an output head)
_ARCHITECTURES: dict[str, tuple[str, Callable[[_Tally, object, bool], None], bool]] = {
    "LlamaForCausalLM": ("llama", _llama, True),
    "LlamaModel": ("llama", _llama, False),
    "MistralForCausalLM": ("mistral", _llama, True),
    "MistralModel": ("mistral", _llama, False),
    "Qwen2ForCausalLM": ("qwen2", _llama, True),
    "Qwen2Model": ("qwen2", _llama, False),
    "BertForSequenceClassification": ("bert", _bert, True),
    "BertModel": ("bert", _bert, False),
    "MarianMTModel": ("marian", _marian, True),
    "MarianModel": ("marian", _marian, False),
    "RobertaForSequenceClassification": ("roberta", _bert, True),
    "RobertaModel": ("roberta", _bert, False),
    "XLMRobertaForSequenceClassification": ("xlm-roberta", _bert, True),
    "XLMRobertaModel": ("xlm-roberta", _bert, False),
    "BergamotForConditionalGeneration": ("bergamot", _bergamot, True),
    "BartForConditionalGeneration": ("bart", _bart, True),
    "BartModel": ("bart", _bart, False),
    "GPT2LMHeadModel": ("gpt2", _gpt2, True),
    "GPT2Model": ("gpt2", _gpt2, False),
    "MPNetForRetrieval": ("mpnet", _mpnet, False),
    "Gemma3ForCausalLM": ("gemma3_text", _gemma3, True),
    "Gemma3TextModel": ("gemma3_text", _gemma3, False),
}


def _tally(config, layout: Layout | None, seq_len: float, architecture: str | None) -> _Tally:
    model_type = getattr(config, "model_type", None)
    supported_types = sorted({t for t, _, _ in _ARCHITECTURES.values()})
    if model_type not in supported_types:
        raise ValueError(f"flops does not support model_type {model_type!r}; supported: {supported_types}")
    if architecture is None:
        architectures = getattr(config, "architectures", None) or []
        if not architectures:
            raise ValueError(
                "config.architectures is not set (models built from a config lack it); "
                "pass architecture=type(model).__name__"
            )
        architecture = architectures[0]
    if architecture not in _ARCHITECTURES or _ARCHITECTURES[architecture][0] != model_type:
        known = [a for a, (t, _, _) in _ARCHITECTURES.items() if t == model_type]
        raise ValueError(f"flops does not support architecture {architecture!r}; for {model_type!r}: {known}")
    _, walk, head = _ARCHITECTURES[architecture]
    tally = _Tally(config, layout, seq_len)
    walk(tally, config, head)
    tally.check_layout()
    return tally


def count_params(config, layout: Layout | None = None, *, architecture: str | None = None) -> int:
    """Exact ``sum(p.numel() for p in model.parameters())`` (tied weights once) of the pruned model."""
    return _tally(config, layout, 1, architecture).params


def flops_per_token(
    config, layout: Layout | None, seq_len: int, backward: bool = True, *, architecture: str | None = None
) -> Flops:
    """Training (or, with ``backward=False``, inference) matmul FLOPs per token; conventions in the module doc."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    forward = _tally(config, layout, seq_len, architecture).flops
    back = 2 * forward if backward else 0.0
    return Flops(forward, back, forward + back)


def flop_ratio(config, layout_a: Layout | None, layout_b: Layout | None, seq_len: int, *,
               architecture: str | None = None) -> float:
    """FLOPs of ``layout_a`` over those of ``layout_b``: ``flop_ratio(cfg, full, pruned, n)`` is the
    theoretical speed-up of pruning (backward = 2 x forward, so training and inference agree)."""
    a = flops_per_token(config, layout_a, seq_len, architecture=architecture).total
    b = flops_per_token(config, layout_b, seq_len, architecture=architecture).total
    return a / b
