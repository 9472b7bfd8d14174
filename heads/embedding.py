"""Sentence embeddings from an MPNet encoder, with the in-group contrastive head the ``retrieval`` task trains.

:class:`MPNetForRetrieval` is MPNet's encoder (no pooler) with mean pooling over real tokens and l2
normalisation, as sentence-transformers' all-mpnet-base-v2 embeds a sentence. Its forward takes *groups*:
``input_ids`` ``[B, 2M, T]`` holds per example M queries then their M documents (query i's match is document
i); the logits ``[B, M, M]`` are the cosine similarities of each query to the group's documents divided by
:data:`TEMPERATURE`, and the loss is their cross-entropy against the diagonal (in-batch InfoNCE, the other
documents of the group as negatives; sentence-transformers' MultipleNegativesRankingLoss with scale 20). Every
example is one group, independent of the others, so per-example gates (``[B, H]``, Michel's importance) and
stacked ablations on a repeated batch see exactly one group each. A ``[N, T]`` input returns the ``[N, d]``
embeddings as its logits.

MPNet's own attention computes its softmax inline and adds a relative-position bias computed once per forward
for all layers (``[B, H, T, T]``, one column of ``encoder.relative_attention_bias`` per head, shared by every
layer). :class:`GatedMPNetSelfAttention` is the same computation through the attention function the model's
config names (so heads' gated functions reach it); a pruned site keeps the original indices of its heads
(``heads_kept``) and adds only those heads' slices of the shared bias. The bias table itself stays whole: other
layers still use every column.

The class registers under ``AutoModelForTextEncoding`` for the model type ``mpnet`` (which transformers maps to
no class there), so a saved model names a class :func:`heads.surgery.load` finds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import MPNetConfig, MPNetModel
from transformers.modeling_outputs import ModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.mpnet.modeling_mpnet import MPNetPreTrainedModel, MPNetSelfAttention

# The softmax temperature of the contrastive loss (cosine similarity / 0.05: sentence-transformers' scale 20).
TEMPERATURE = 0.05
IGNORE_INDEX = -100  # a padded query of a short group (its labels), as the token losses ignore it


def eager_attention(module: nn.Module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0,
                    **kwargs):
    """MPNet's stock attention math (the default for the ``eager`` implementation): scaled scores plus the
    additive mask (which carries the position bias), softmax, dropout."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """An attention mask as an additive float mask (a boolean one: False -> the dtype's minimum)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


class GatedMPNetSelfAttention(MPNetSelfAttention):
    """MPNet self-attention through the registered attention function; same parameters and state dict."""

    is_causal = False
    heads_kept: list[int] | None = None  # original heads held, once pruned: the columns of the shared bias
    config: MPNetConfig  # the model's (its attention implementation is read at every call)

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs):
        shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        q, k, v = (proj(hidden_states).view(shape).transpose(1, 2) for proj in (self.q, self.k, self.v))
        mask = additive(attention_mask, q.dtype)
        if position_bias is not None:
            if self.heads_kept is not None:
                position_bias = position_bias[:, self.heads_kept]
            mask = position_bias if mask is None else position_bias + mask
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention)
        out, weights = attend(self, q, k, v, mask, dropout=self.dropout.p if self.training else 0.0,
                              scaling=self.attention_head_size**-0.5, is_causal=False)
        # the weights always (None on the sdpa path): heads reads them from the site's return value
        return self.o(out.reshape(*hidden_states.shape[:-1], -1)), weights


def gate_attention(model: nn.Module) -> None:
    """Give every MPNet self-attention module of ``model`` the gated forward (idempotent; weights untouched)."""
    config = getattr(model, "config", None)
    for module in model.modules():
        if isinstance(module, MPNetSelfAttention) and not isinstance(module, GatedMPNetSelfAttention):
            module.__class__ = GatedMPNetSelfAttention
            module.config = config


@dataclass
class RetrievalOutput(ModelOutput):
    """``logits``: ``[B, M, M]`` scaled similarities of a grouped input, or ``[N, d]`` embeddings."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class MPNetForRetrieval(MPNetPreTrainedModel):
    """MPNet encoder + mean pooling + l2 norm; grouped inputs give contrastive logits and loss (module doc)."""

    _keys_to_ignore_on_load_unexpected = [r"pooler\."]  # the snapshot's pooler: sentence embeddings do not use it

    def __init__(self, config: MPNetConfig):
        super().__init__(config)
        self.mpnet = MPNetModel(config, add_pooling_layer=False)
        gate_attention(self)
        self.post_init()

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[N, d]`` unit-length mean-pooled embeddings of ``[N, T]`` token ids."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # MPNet's positions count real tokens from padding_idx + 1 (what it derives from pad ids, but from the
        # mask: any pad id works, and a token whose id is the pad id is still a token)
        positions = (attention_mask.cumsum(-1) * attention_mask + self.mpnet.embeddings.padding_idx).long()
        out = self.mpnet(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions)
        hidden = out.last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **kwargs) -> RetrievalOutput:
        if input_ids.dim() == 2:
            return RetrievalOutput(logits=self.embed(input_ids, attention_mask))
        if input_ids.dim() != 3 or input_ids.shape[1] % 2:
            raise ValueError(f"grouped input_ids are [B, 2M, T] (M queries, then their M documents), got "
                             f"{tuple(input_ids.shape)}")
        b, rows, t = input_ids.shape
        mask = None if attention_mask is None else attention_mask.reshape(b * rows, t)
        emb = self.embed(input_ids.reshape(b * rows, t), mask).view(b, rows, -1)
        m = rows // 2
        logits = torch.matmul(emb[:, :m], emb[:, m:].transpose(1, 2)) / TEMPERATURE
        if attention_mask is not None:  # a short group's padding documents are no candidates
            real_docs = attention_mask[:, m:].any(-1)
            logits = logits.masked_fill(~real_docs[:, None, :], torch.finfo(logits.dtype).min)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().reshape(-1, m), labels.reshape(-1).to(logits.device),
                                   ignore_index=IGNORE_INDEX)
        return RetrievalOutput(loss=loss, logits=logits)


def group_labels(real: torch.Tensor) -> torch.Tensor:
    """``[B, M]`` labels of grouped queries: query i matches document i; a padding query (``real`` False) is
    ignored."""
    m = real.shape[-1]
    labels = torch.arange(m, device=real.device).expand(real.shape).clone()
    return labels.masked_fill(~real, IGNORE_INDEX)


def mpnet_config(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
                 max_len: int = 256, **overrides) -> MPNetConfig:
    """A small MPNet config (no weights)."""
    settings = dict(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                    intermediate_size=ff or 4 * d, max_position_embeddings=max_len + 2)  # positions start at 2
    return MPNetConfig(**{**settings, **overrides})


def mpnet(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, ff: int | None = None,
          max_len: int = 256, seed: int = 0, **overrides) -> MPNetForRetrieval:
    """An MPNet sentence-embedding model from config (random init, seeded)."""
    config = mpnet_config(vocab, d, layers, heads, ff, max_len, **overrides)
    config.architectures = [MPNetForRetrieval.__name__]
    torch.manual_seed(seed)
    return MPNetForRetrieval(config)


def register() -> None:
    """Map MPNet's config to :class:`MPNetForRetrieval` in ``AutoModelForTextEncoding`` (idempotent)."""
    from transformers import AutoModelForTextEncoding

    try:
        if AutoModelForTextEncoding._model_mapping[MPNetConfig] is MPNetForRetrieval:
            return
    except KeyError:
        pass
    AutoModelForTextEncoding.register(MPNetConfig, MPNetForRetrieval, exist_ok=True)
