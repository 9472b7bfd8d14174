"""Gemma 3 text decoders (``gemma3_text``: Gemma3ForCausalLM, e.g. the 270M): Llama's separate q/k/v/o.

What differs from Llama needs nothing of surgery: ``q_norm``/``k_norm`` normalise each head over its ``head_dim``
with one weight shared by every head, so they hold no head and survive pruning unchanged; sliding-window and
global layers (``layer_types``) differ only in their mask, which transformers builds through the mask function
registered with the gated attention (heads.surgery.gates); the attention scale is ``query_pre_attn_scalar``, not
the head size, and the model passes it to the attention function itself. The forward reshapes by ``head_dim``
(``-1`` heads), so pruning has no attribute to resize. Under multi-query attention (one key/value head, the
270M) a site's only group is all its heads: removing it leaves the site headless (heads.surgery.prune), whose
output is zero, as all gates closed make it (the output projection has no bias, and the layer's
``post_attention_layernorm`` of zero is zero).
"""

from __future__ import annotations

from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.llama import LlamaFamily


class Gemma3Family(LlamaFamily):
    name = "gemma3"
    model_types = ("gemma3_text",)
    patterns = FAMILY_PATTERNS["gemma3"]
