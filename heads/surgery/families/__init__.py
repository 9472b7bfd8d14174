"""Model families that head surgery supports, looked up by ``config.model_type``."""

from __future__ import annotations

from torch import nn

from heads.registry import Registry
from heads.surgery.families.base import Family, Projections, SitePattern
from heads.surgery.families.bert import BertFamily
from heads.surgery.families.llama import LlamaFamily
from heads.surgery.families.marian import MarianFamily

# Model type -> family adapter (several model types share one family).
FAMILIES: Registry[Family] = Registry("model_type")
for _family in (LlamaFamily(), BertFamily(), MarianFamily()):
    for _model_type in _family.model_types:
        FAMILIES.add(_model_type, _family)


def family_of(model: nn.Module) -> Family:
    """The family adapter for a Hugging Face model; a clear error if unsupported."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in FAMILIES:
        raise ValueError(
            f"head surgery does not support model_type {model_type!r}; supported: {sorted(FAMILIES)}"
        )
    return FAMILIES[model_type]


__all__ = ["FAMILIES", "Family", "Projections", "SitePattern", "family_of"]
