"""Distribution shift (D7): does a pruned model lose more than its unpruned reference on text it was not trained on?

Both models are evaluated on the task's own evaluation split and on the same split of shifted corpora (for the
LM: the same books in another translation, ``lm_kjv``, ``lm_bbe``). Per corpus, ``change`` is the pruned model's
metric relative to the reference's, oriented so that larger is worse (a perplexity that rises, an accuracy that
falls); per shifted corpus, ``gap`` is its change minus the change in domain: positive when pruning costs more
under the shift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from heads.task_metrics import higher_is_better

Evaluate = Callable[[Any, str | None], Mapping[str, Any]]  # (model, dataset or None = the task's own) -> result


def cost(metric: str, pruned: float, reference: float) -> float | None:
    """The pruned model's relative loss of quality against the reference (larger = worse); None at reference 0."""
    if reference == 0:
        return None
    change = (pruned - reference) / abs(reference)
    return -change if higher_is_better(metric) else change


def shift_rows(evaluate: Evaluate, model: Any, reference: Any, datasets: Sequence[str], metric: str) -> dict:
    """``{"in_domain": {...}, "shifted": {dataset: {..., "gap"}}}``; each entry holds both models' ``metric``
    and ``loss`` and the ``change``."""

    def row(dataset: str | None) -> dict:
        mine, theirs = evaluate(model, dataset), evaluate(reference, dataset)
        out = {"dataset": dataset, "metric": metric, "model": float(mine[metric]),
               "reference": float(theirs[metric]), "model_loss": float(mine["loss"]),
               "reference_loss": float(theirs["loss"])}
        out["change"] = cost(metric, out["model"], out["reference"])
        return out

    home = row(None)
    shifted = {}
    for name in datasets:
        r = row(name)
        r["gap"] = None if r["change"] is None or home["change"] is None else r["change"] - home["change"]
        shifted[name] = r
    return {"in_domain": home, "shifted": shifted}
