"""Bergamot students (heads.bergamot): Marian's module paths and projections, encoder self and cross attention
only (the decoder's autoregressive layer is an SSRU, with no heads)."""

from __future__ import annotations

from heads.bergamot.model import MODEL_TYPE, register
from heads.surgery.families.marian import MarianFamily

register()  # the model type must be known before any of its checkpoints' configs is read


class BergamotFamily(MarianFamily):
    name = "bergamot"
    model_types = (MODEL_TYPE,)
