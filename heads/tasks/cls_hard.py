"""Paraphrase identification word overlap cannot solve: a WEB verse with its Basic English paraphrase or with the
Basic English verse of its chapter that overlaps it most, the two labels thinned to one overlap distribution
(heads.data.corpora.cls_hard; issue 13's harder classification task); accuracy."""

from __future__ import annotations

from heads.tasks.cls import PairClassification
from heads.tasks.registry import register_task


@register_task("cls_hard")
class HardParaphrase(PairClassification):
    description = (
        "paraphrase identification, WEB vs Basic English, negatives the most overlapping verse of the chapter, "
        "labels matched on word overlap; accuracy"
    )
