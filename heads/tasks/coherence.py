"""Next-verse coherence: is the second verse the one that follows the first, or one of the same chapter further
away? A pair task word overlap cannot solve (issue 13's harder classification task); accuracy."""

from __future__ import annotations

from heads.tasks.cls import PairClassification
from heads.tasks.registry import register_task


@register_task("coherence")
class Coherence(PairClassification):
    description = (
        "next-verse coherence (a WEB verse and the next one vs a verse of the same chapter >= 3 away); accuracy"
    )
