"""Where each model family keeps its attention sites, stated once: module-path patterns with the layer index
as their first group, the kind of attention and the stack. Head surgery finds sites through them
(heads.surgery.families) and the report labels sites by them without loading a model (heads.report.site_labels);
this module imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SiteKind = Literal["self", "causal", "cross"]


@dataclass(frozen=True)
class SitePattern:
    """A module-path pattern with one group capturing the layer index."""

    regex: str
    kind: SiteKind
    stack: str  # "encoder", "decoder" or "" for single-stack models


FAMILY_PATTERNS: dict[str, tuple[SitePattern, ...]] = {
    "marian": (  # Marian and BART
        SitePattern(r"encoder\.layers\.(\d+)\.self_attn$", "self", "encoder"),
        SitePattern(r"decoder\.layers\.(\d+)\.self_attn$", "causal", "decoder"),
        SitePattern(r"decoder\.layers\.(\d+)\.encoder_attn$", "cross", "decoder"),
    ),
    # BERT, RoBERTa and XLM-RoBERTa (``bert.``/``roberta.`` prefixes: the patterns search, they do not anchor).
    # A BERT configured as a decoder attends causally in its self-attention: the family says so from the
    # config; a path alone reads as "self".
    "bert": (
        SitePattern(r"encoder\.layer\.(\d+)\.attention\.self$", "self", "encoder"),
        SitePattern(r"encoder\.layer\.(\d+)\.crossattention\.self$", "cross", "encoder"),
    ),
    "gpt2": (
        SitePattern(r"(?:^|\.)h\.(\d+)\.attn$", "causal", ""),
        SitePattern(r"(?:^|\.)h\.(\d+)\.crossattention$", "cross", ""),  # with add_cross_attention
    ),
    "llama": (SitePattern(r"(?:^|\.)layers\.(\d+)\.self_attn$", "causal", ""),),  # also Mistral, Qwen2
    "mpnet": (SitePattern(r"encoder\.layer\.(\d+)\.attention\.attn$", "self", "encoder"),),
    # Gemma 3 (text): Llama's paths, sliding-window and global layers alike (both causal)
    "gemma3": (SitePattern(r"(?:^|\.)layers\.(\d+)\.self_attn$", "causal", ""),),
}
# For a module path alone, the most specific patterns first (llama's would also match Marian's encoder);
# gemma3's paths are llama's, so llama's patterns label them.
PATH_ORDER = ("marian", "bert", "mpnet", "gpt2", "llama")
