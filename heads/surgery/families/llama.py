"""Llama-style decoders (also Mistral and Qwen2 naming): causal self-attention, optional GQA."""

from __future__ import annotations

from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.base import Family


class LlamaFamily(Family):
    name = "llama"
    model_types = ("llama", "mistral", "qwen2")
    patterns = FAMILY_PATTERNS["llama"]

    def head_counts(self, config, site_kind, stack):
        heads = config.num_attention_heads
        kv = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return heads, kv, head_dim
