"""Marian / BART encoder-decoders: encoder self, decoder causal self and cross attention."""

from __future__ import annotations

from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.base import Family


class MarianFamily(Family):
    name = "marian"
    model_types = ("marian", "bart")
    patterns = FAMILY_PATTERNS["marian"]
    out_name = "out_proj"

    def head_counts(self, config, site_kind, stack):
        heads = config.encoder_attention_heads if stack == "encoder" else config.decoder_attention_heads
        return heads, heads, config.d_model // heads

    def resize(self, module, num_heads):
        module.num_heads = num_heads
