"""The Bergamot "tiny" student translation models as a PyTorch module that transformers knows by name.

Marian's transformer with an SSRU decoder (``type: transformer``, ``transformer-decoder-autoreg: rnn``): an encoder
of post-norm self-attention layers, a decoder whose self-attention is a simple recurrent unit (SSRU) and which
keeps multi-head encoder-decoder attention, tied embeddings throughout. No class of transformers implements it, so
this module does, as a ``PreTrainedModel`` registered under the model type ``bergamot``: ``save_pretrained``,
``AutoConfig`` and ``AutoModelForSeq2SeqLM`` work, and every attention module calls the attention function its
config names, so heads' gates, scorers, physical pruning and exact loading treat it like Marian (module paths
``model.encoder.layers.N.self_attn`` and ``model.decoder.layers.N.encoder_attn``). It has no decoder
self-attention heads at all.

The arithmetic follows Marian (checked against the package's own engine, tests/test_bergamot.py): embeddings
scaled by sqrt(d) plus sinusoidal positions (sines first, then cosines, timescale increment
log(10^4) / (d/2 - 1)), the decoder's first input a zero embedding, ``LayerNorm(x + sublayer(x))`` after every
sublayer (eps 1e-6), the SSRU ``c_t = f_t * c_(t-1) + (1 - f_t) * x_t W``, ``f_t = sigmoid(x_t W_f + b_f)``,
``out = x + ReLU(c_t)``, and logits through the embedding matrix plus an output bias. :meth:`generate` decodes
greedily or by beam search with Marian's length normalisation, the encoder run once and the recurrence carried.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

MODEL_TYPE = "bergamot"


@strict
class BergamotConfig(PreTrainedConfig):
    """The shape of a Bergamot student (defaults: the tiny en<->pt models' 6 + 2 layers, d 256, 8 heads).

    ``max_length_factor`` and ``length_normalisation`` are Marian's decoding limits (the models' own config:
    2.5 target tokens per source token at most; beams compare finished translations by score / length)."""

    model_type = MODEL_TYPE
    attribute_map = {"num_attention_heads": "encoder_attention_heads", "hidden_size": "d_model",
                     "num_hidden_layers": "encoder_layers"}

    vocab_size: int = 32000
    d_model: int = 256
    encoder_layers: int = 6
    decoder_layers: int = 2
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 1536
    decoder_ffn_dim: int = 1536
    layer_norm_eps: float = 1e-6
    dropout: float | int = 0.0
    attention_dropout: float | int = 0.0
    max_length_factor: float | int = 2.5
    length_normalisation: float | int = 1.0
    pad_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 0
    bos_token_id: int | None = None
    decoder_start_token_id: int = 0
    is_encoder_decoder: bool = True
    use_cache: bool = False
    # the output layer reads the shared embedding itself: nothing for transformers to tie
    tie_word_embeddings: bool = False


def sinusoids(length: int, d: int, start: int = 0, device=None) -> torch.Tensor:
    """Marian's positional signal ``[length, d]`` for positions ``start ...``: sines, then cosines."""
    half = d // 2
    increment = math.log(10000.0) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -increment)
    scaled = torch.arange(start, start + length, dtype=torch.float32, device=device)[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1)


def padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """``[B, S]`` ones/zeros as the boolean ``[B, 1, 1, S]`` (True: attend) every attention function takes."""
    return None if attention_mask is None else attention_mask.bool()[:, None, None, :]


class BergamotAttention(nn.Module):
    """Multi-head attention (encoder self or encoder-decoder) through the config's attention function."""

    def __init__(self, config: BergamotConfig, heads: int):
        super().__init__()
        d = config.d_model
        self.config = config
        self.num_heads = heads
        self.head_dim = d // heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = False  # encoder self and cross attention see every source position
        self.layer_idx = None  # no key/value cache of transformers' kind: decoding keeps its own
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values ``[B, heads, S, head_dim]`` of ``source``: computed once per sentence when decoding."""
        shape = (*source.shape[:2], -1, self.head_dim)
        return (self.k_proj(source).view(shape).transpose(1, 2), self.v_proj(source).view(shape).transpose(1, 2))

    def forward(self, hidden_states: torch.Tensor, source: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                keys_values: tuple[torch.Tensor, torch.Tensor] | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``hidden_states`` to ``source`` (itself when None), or to precomputed ``keys_values``;
        ``attention_mask``: boolean ``[B, 1, 1, S]``. Returns the output and the weights (None under sdpa)."""
        key, value = keys_values if keys_values is not None else self.keys_values(
            hidden_states if source is None else source)
        query = self.q_proj(hidden_states).view(*hidden_states.shape[:2], -1, self.head_dim).transpose(1, 2)
        # sdpa for "eager" too: this model has no separate eager path (heads_gated_eager returns weights)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation or "sdpa",
                                                       sdpa_attention_forward)
        out, weights = attend(self, query, key, value, attention_mask, scaling=self.scaling,
                              dropout=self.config.attention_dropout if self.training else 0.0)
        return self.out_proj(out.reshape(*hidden_states.shape[:2], -1)), weights


class FeedForward(nn.Module):
    """ReLU feed-forward block (``transformer-ffn-depth: 2``)."""

    def __init__(self, d: int, inner: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, inner), nn.Linear(inner, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, config: BergamotConfig):
        super().__init__()
        d, eps = config.d_model, config.layer_norm_eps
        self.self_attn = BergamotAttention(config, config.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.ffn = FeedForward(d, config.encoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended, _ = self.self_attn(x, attention_mask=mask)
        x = self.self_attn_layer_norm(x + F.dropout(attended, self.dropout, self.training))
        return self.final_layer_norm(x + F.dropout(self.ffn(x), self.dropout, self.training))


class SSRU(nn.Module):
    """Marian's simpler simple recurrent unit: the decoder's autoregressive layer instead of self-attention."""

    def __init__(self, d: int):
        super().__init__()
        self.W = nn.Linear(d, d, bias=False)
        self.forget = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` [B, T, d] from ``state`` [B, d] (zeros when None): ReLU of the cell at each step, and the last cell."""
        gate = torch.sigmoid(self.forget(x))
        update = (1 - gate) * self.W(x)
        cell = x.new_zeros(x.shape[0], x.shape[2]) if state is None else state
        cells = []
        for t in range(x.shape[1]):
            cell = gate[:, t] * cell + update[:, t]
            cells.append(cell)
        return F.relu(torch.stack(cells, dim=1)), cell


class DecoderLayer(nn.Module):
    def __init__(self, config: BergamotConfig):
        super().__init__()
        d, eps = config.d_model, config.layer_norm_eps
        self.rnn = SSRU(d)
        self.rnn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.encoder_attn = BergamotAttention(config, config.decoder_attention_heads)
        self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.ffn = FeedForward(d, config.decoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor, keys_values: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None,
                state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        recurrent, state = self.rnn(x, state)
        x = self.rnn_layer_norm(x + F.dropout(recurrent, self.dropout, self.training))
        attended, _ = self.encoder_attn(x, attention_mask=mask, keys_values=keys_values)
        x = self.encoder_attn_layer_norm(x + F.dropout(attended, self.dropout, self.training))
        return self.final_layer_norm(x + F.dropout(self.ffn(x), self.dropout, self.training)), state


class Encoder(nn.Module):
    """The encoder; the embedding it reads is the model's one shared table (not a submodule of its own, so the
    state dict holds it once)."""

    def __init__(self, config: BergamotConfig, shared: BergamotModel):
        super().__init__()
        self._shared = [shared]  # a plain list: no second registration of the shared module
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.dropout = config.dropout

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        embed = self._shared[0].shared
        d = embed.embedding_dim
        x = embed(input_ids) * math.sqrt(d) + sinusoids(input_ids.shape[1], d, device=input_ids.device)
        x = F.dropout(x, self.dropout, self.training)
        mask = padding_mask(attention_mask)
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    def __init__(self, config: BergamotConfig, shared: BergamotModel):
        super().__init__()
        self._shared = [shared]
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.dropout = config.dropout

    def embed(self, previous: torch.Tensor, start: int, first: bool) -> torch.Tensor:
        """Inputs for target positions ``start ...``: the previous tokens' embeddings, the first position's
        a zero vector (Marian starts from no token at all), scaled by sqrt(d), plus the positions."""
        embed = self._shared[0].shared
        d = embed.embedding_dim
        x = embed(previous) * math.sqrt(d)
        if first:
            x[:, 0] = 0.0
        return x + sinusoids(previous.shape[1], d, start=start, device=previous.device)

    def forward(self, x: torch.Tensor, keys_values: list, mask: torch.Tensor | None,
                states: list | None = None) -> tuple[torch.Tensor, list]:
        x = F.dropout(x, self.dropout, self.training)
        new_states = []
        for i, layer in enumerate(self.layers):
            x, state = layer(x, keys_values[i], mask, None if states is None else states[i])
            new_states.append(state)
        return x, new_states


class BergamotModel(nn.Module):
    """Encoder and decoder around one shared embedding."""

    def __init__(self, config: BergamotConfig):
        super().__init__()
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = Encoder(config, self)
        self.decoder = Decoder(config, self)


class BergamotForConditionalGeneration(PreTrainedModel):
    """A Bergamot student translation model: ``forward`` for losses, :meth:`generate` for translations."""

    config_class = BergamotConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _supports_sdpa = True
    _supports_attention_backend = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]

    def __init__(self, config: BergamotConfig):
        super().__init__(config)
        self.model = BergamotModel(config)
        self.logits_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # Converted weights overwrite everything; a model built from config (tests) gets small random weights.
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.05)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.1)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.shared

    def get_encoder(self) -> Encoder:
        return self.model.encoder

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.model.shared.weight, self.logits_bias)

    def cross_keys_values(self, encoded: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [layer.encoder_attn.keys_values(encoded) for layer in self.model.decoder.layers]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, decoder_input_ids: torch.Tensor | None = None,
                **_: object) -> Seq2SeqLMOutput:
        """Teacher-forced logits ``[B, T, V]``: the decoder reads ``labels`` shifted right (or
        ``decoder_input_ids``, whose first position is replaced by the zero start)."""
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("a Bergamot forward needs labels or decoder_input_ids (it is a translation model)")
            previous = labels.clamp(min=0)  # ignored positions (-100) read as token 0: their outputs are never scored
            decoder_input_ids = torch.cat([previous.new_zeros(previous.shape[0], 1), previous[:, :-1]], dim=1)
        encoded = self.model.encoder(input_ids, attention_mask)
        x = self.model.decoder.embed(decoder_input_ids, 0, first=True)
        hidden, _ = self.model.decoder(x, self.cross_keys_values(encoded), padding_mask(attention_mask))
        logits = self.logits(hidden)
        # the token-mean cross-entropy transformers' seq2seq models report with labels (-100: not scored)
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                                                           ignore_index=-100)
        return Seq2SeqLMOutput(loss=loss, logits=logits, encoder_last_hidden_state=encoded)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, num_beams: int = 1,
                 max_new_tokens: int = 256, do_sample: bool = False, **_: object) -> torch.Tensor:
        """Translations ``[B, T]`` (eos-padded; eos is the pad id) by greedy search or beam search over
        ``num_beams``. A row stops at eos or at ``max_length_factor`` x its source length, and never runs past
        ``max_new_tokens``. Rows decode independently of each other, so stacked gates over repeated batches
        give each copy its own translations."""
        if do_sample:
            raise ValueError("Bergamot decoding is greedy or beam search; sampling is not implemented")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        lengths = attention_mask.sum(-1)
        limit = torch.clamp(torch.ceil(lengths.float() * self.config.max_length_factor).long(), 1, max_new_tokens)
        encoded = self.model.encoder(input_ids, attention_mask)
        if num_beams <= 1:
            return self._greedy(encoded, attention_mask, limit)
        return self._beam(encoded, attention_mask, limit, num_beams)

    def _step(self, previous: torch.Tensor, t: int, keys_values: list, mask: torch.Tensor, states: list | None):
        """Log-probabilities of the next token after ``previous`` [N] at target position ``t``."""
        x = self.model.decoder.embed(previous[:, None], t, first=t == 0)
        hidden, states = self.model.decoder(x, keys_values, mask, states)
        return torch.log_softmax(self.logits(hidden[:, 0]).float(), dim=-1), states

    def _greedy(self, encoded: torch.Tensor, attention_mask: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
        eos, n = self.config.eos_token_id, encoded.shape[0]
        keys_values, mask = self.cross_keys_values(encoded), padding_mask(attention_mask)
        previous = encoded.new_zeros(n, dtype=torch.long)
        done = torch.zeros(n, dtype=torch.bool, device=encoded.device)
        out, states = [], None
        for t in range(int(limit.max())):
            logp, states = self._step(previous, t, keys_values, mask, states)
            token = logp.argmax(-1)
            token = torch.where(done | (t + 1 >= limit), torch.full_like(token, eos), token)
            out.append(token)
            done |= token == eos
            previous = token
            if bool(done.all()):
                break
        return torch.stack(out, dim=1)

    def _beam(self, encoded: torch.Tensor, attention_mask: torch.Tensor, limit: torch.Tensor,
              beams: int) -> torch.Tensor:
        """Marian's beam search: a sentence's beam shrinks by one for each hypothesis that ends; the best
        finished hypothesis by score / length ** length_normalisation wins."""
        eos, n, device = self.config.eos_token_id, encoded.shape[0], encoded.device
        alpha = self.config.length_normalisation
        expand = torch.arange(n, device=device).repeat_interleave(beams)  # row i -> rows i*beams ... (in place)
        encoded, attention_mask, limit_rows = encoded[expand], attention_mask[expand], limit[expand]
        keys_values, mask = self.cross_keys_values(encoded), padding_mask(attention_mask)
        scores = torch.full((n, beams), float("-inf"), device=device)
        scores[:, 0] = 0.0
        live = [beams] * n
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
        history = torch.zeros(n * beams, 0, dtype=torch.long, device=device)
        previous = torch.zeros(n * beams, dtype=torch.long, device=device)
        states = None
        for t in range(int(limit.max())):
            logp, states = self._step(previous, t, keys_values, mask, states)
            at_limit = t + 1 >= limit_rows
            # at a row's length limit only eos may follow (Marian forces the end)
            logp = torch.where(at_limit[:, None] & (torch.arange(logp.shape[1], device=device) != eos)[None],
                               torch.full_like(logp, float("-inf")), logp)
            total = (scores.view(-1, 1) + logp).view(n, -1)
            best, index = total.topk(beams, dim=-1)
            source, token = index // logp.shape[1], index % logp.shape[1]
            rows = (torch.arange(n, device=device)[:, None] * beams + source).view(-1)
            history = torch.cat([history[rows], token.view(-1, 1)], dim=1)
            states = [s[rows] for s in states]
            scores = best.clone()
            ended = (token == eos) & torch.isfinite(best)
            for i in range(n):  # candidates come best first; a sentence considers as many as it has live slots
                for k in range(live[i]):
                    if bool(ended[i, k]):
                        finished[i].append((float(best[i, k]) / (t + 1) ** alpha, history[i * beams + k].tolist()))
                dead = [k for k in range(beams) if k >= live[i] or bool(ended[i, k])]
                live[i] -= sum(bool(ended[i, k]) for k in range(live[i]))
                scores[i, dead] = float("-inf")
            previous = token.view(-1)
            if all(count <= 0 for count in live):
                break
        for i in range(n):  # a sentence that reached no end by the limit keeps its live hypotheses
            if not finished[i]:
                for k in range(beams):
                    if torch.isfinite(scores[i, k]):
                        seq = history[i * beams + k].tolist()
                        finished[i].append((float(scores[i, k]) / len(seq) ** alpha, seq))
        outputs = [max(finished[i], key=lambda hyp: hyp[0])[1] for i in range(n)]
        width = max(len(seq) for seq in outputs)
        return torch.tensor([seq + [eos] * (width - len(seq)) for seq in outputs], dtype=torch.long, device=device)


def register() -> None:
    """Make the model type known to ``AutoConfig`` and ``AutoModelForSeq2SeqLM`` (idempotent)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if MODEL_TYPE in CONFIG_MAPPING:
        return
    AutoConfig.register(MODEL_TYPE, BergamotConfig)
    AutoModelForSeq2SeqLM.register(BergamotConfig, BergamotForConditionalGeneration)
