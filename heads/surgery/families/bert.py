"""BERT-style encoders (the pretrained MiniLM included; RoBERTa and XLM-RoBERTa, which name their modules the
same under ``roberta.``); optional cross-attention."""

from __future__ import annotations

from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.base import Family


class BertFamily(Family):
    name = "bert"
    model_types = ("bert", "roberta", "xlm-roberta")
    patterns = FAMILY_PATTERNS["bert"]
    qkv_names = ("query", "key", "value")
    out_name = None
    outer_out_path = "output.dense"

    def site_kind(self, config, pattern):
        # A BERT configured as a decoder attends causally in its self-attention.
        if pattern.kind == "self" and getattr(config, "is_decoder", False):
            return "causal"
        return pattern.kind

    def resize(self, module, num_heads):
        module.num_attention_heads = num_heads
        module.all_head_size = num_heads * module.attention_head_size
