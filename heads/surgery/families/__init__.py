"""Model families that head surgery supports, looked up by ``config.model_type``."""

from __future__ import annotations

from torch import nn

from heads.registry import Registry
from heads.surgery.families.base import Family, HeadSlice, Projections, SitePattern
from heads.surgery.families.bergamot import BergamotFamily
from heads.surgery.families.bert import BertFamily
from heads.surgery.families.gemma3 import Gemma3Family
from heads.surgery.families.gpt2 import GPT2Family
from heads.surgery.families.llama import LlamaFamily
from heads.surgery.families.marian import MarianFamily
from heads.surgery.families.mpnet import MPNetFamily
from heads.surgery.families.views import LinearView

GUIDE = "docs/ADDING_A_FAMILY.md"

# Model type -> family adapter (several model types share one family).
FAMILIES: Registry[Family] = Registry("model_type")
for _family in (LlamaFamily(), BertFamily(), MarianFamily(), BergamotFamily(), GPT2Family(), MPNetFamily(),
                Gemma3Family()):
    for _model_type in _family.model_types:
        FAMILIES.add(_model_type, _family)


def family_of(model: nn.Module) -> Family:
    """The family adapter for a Hugging Face model; a clear error if unsupported."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in FAMILIES:
        families = {f.name: f.model_types for f in FAMILIES.values()}
        listed = "; ".join(f"{name} ({', '.join(types)})" for name, types in sorted(families.items()))
        raise ValueError(
            f"head surgery does not support model_type {model_type!r}; supported families: {listed}. "
            f"{GUIDE} shows how to add one"
        )
    return FAMILIES[model_type]


__all__ = ["FAMILIES", "GUIDE", "Family", "HeadSlice", "LinearView", "Projections", "SitePattern", "family_of"]
