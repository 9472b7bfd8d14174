"""Marian / BART encoder-decoders: encoder self, decoder causal self and cross attention."""

from __future__ import annotations

from heads.surgery.families.base import Family, SitePattern


class MarianFamily(Family):
    name = "marian"
    model_types = ("marian", "bart")
    patterns = (
        SitePattern(r"encoder\.layers\.(\d+)\.self_attn$", "self", "encoder"),
        SitePattern(r"decoder\.layers\.(\d+)\.self_attn$", "causal", "decoder"),
        SitePattern(r"decoder\.layers\.(\d+)\.encoder_attn$", "cross", "decoder"),
    )
    out_name = "out_proj"

    def head_counts(self, config, site_kind, stack):
        heads = config.encoder_attention_heads if stack == "encoder" else config.decoder_attention_heads
        return heads, heads, config.d_model // heads

    def resize(self, module, num_heads):
        module.num_heads = num_heads
