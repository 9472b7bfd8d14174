"""Example-level evaluation values: what a task metric is computed from, kept so statistics can resample examples.

A task's ``evaluate`` returns its headline numbers and, under :data:`KEY`, one column per statistic with one
entry per evaluation unit (a pair, a text window, a sentence). Commands write those columns to ``examples.json``
beside the run's ``summary.json`` (never into it: the summary stays small and every reader of it unchanged), and
the report rebuilds any metric over a resample of units (:meth:`ExampleValues.metric`) for intervals that count
the test set's sampling beside the seeds'.

Columns, by task:
- ``correct``, ``loss``: per classified pair, 1/0 and its cross-entropy (accuracy and loss are their means);
- ``loss_sum``, ``tokens``: per language-model window, summed next-token loss and tokens predicted (loss is the
  ratio of the sums; perplexity and bits per token follow from it);
- ``bleu_stats``, ``chrf_stats``: per translated sentence, sacrebleu's sufficient statistics (corpus BLEU and
  chrF are computed from their sums, exactly as ``corpus_score`` computes them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from heads.task_metrics import perplexity

KEY = "per_example"
FILE = "examples.json"


def split_off(result: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list] | None]:
    """``(headline, columns)``: an evaluation result without its example-level columns, and the columns."""
    headline = {k: v for k, v in result.items() if k != KEY}
    columns = result.get(KEY)
    return headline, (dict(columns) if isinstance(columns, Mapping) else None)


def record(columns: Mapping[str, list], headline: Mapping[str, Any]) -> dict[str, Any]:
    """The content of ``examples.json``: the columns with what identifies them (metric values, split, count)."""
    sizes = {name: len(values) for name, values in columns.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"example columns of unequal length: {sizes}")
    keep = {k: v for k, v in headline.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    return {"units": next(iter(sizes.values()), 0), "headline": keep, "columns": dict(columns)}


def path_beside(out: Path) -> Path:
    """Where the columns of an evaluation written to the file ``out`` go: ``NAME.examples.json`` beside it."""
    return out.with_name(out.name.removesuffix(".json") + ".examples.json")


@dataclass(frozen=True)
class ExampleValues:
    """One evaluation's columns, as arrays; :meth:`metric` recomputes a metric over any index resample."""

    columns: dict[str, np.ndarray]
    units: int

    @classmethod
    def read(cls, path: Path) -> ExampleValues | None:
        """The columns of ``path``, or None when it is absent, unreadable or malformed (the report then falls
        back to seed-level statistics)."""
        try:
            data = json.loads(Path(path).read_text())
            columns = {k: np.asarray(v, dtype=np.float64) for k, v in data["columns"].items()}
            units = int(data["units"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not columns or any(c.shape[:1] != (units,) for c in columns.values()) or units < 2:
            return None
        return cls(columns, units)

    def supports(self, name: str) -> bool:
        """Whether metric ``name`` can be recomputed from these columns."""
        return any(all(c in self.columns for c in need) for need, _ in _AGGREGATES.get(name, ()))

    def metric(self, name: str, idx: np.ndarray | None = None) -> float:
        """Metric ``name`` over the units ``idx`` (all units by default); KeyError if the columns lack it."""
        for need, fn in _AGGREGATES.get(name, ()):
            if all(c in self.columns for c in need):
                cols = self.columns if idx is None else {c: self.columns[c][idx] for c in need}
                return float(fn(cols))
        raise KeyError(f"metric {name!r} cannot be computed from columns {sorted(self.columns)}")


def _token_loss(c: Mapping[str, np.ndarray]) -> float:
    return float(c["loss_sum"].sum() / c["tokens"].sum())


def _sacrebleu(kind: str) -> Callable[[Mapping[str, np.ndarray]], float]:
    made: dict[str, Any] = {}  # one metric object, built on first use (a bootstrap calls this thousands of times)

    def score(c: Mapping[str, np.ndarray]) -> float:
        if not made:
            from sacrebleu.metrics import BLEU, CHRF

            made["metric"] = BLEU() if kind == "bleu" else CHRF()
        metric = made["metric"]
        # sacrebleu's own corpus score from summed statistics (counts: integers, as sacrebleu sums them)
        stats = [int(x) if float(x).is_integer() else float(x) for x in c[f"{kind}_stats"].sum(axis=0)]
        return metric._compute_score_from_stats(stats).score

    return score


# metric -> ways to compute it: (the columns it needs, the aggregate), first match wins
_AGGREGATES: dict[str, list[tuple[tuple[str, ...], Callable[[Mapping[str, np.ndarray]], float]]]] = {
    "accuracy": [(("correct",), lambda c: float(c["correct"].mean()))],
    "loss": [(("loss_sum", "tokens"), _token_loss), (("loss",), lambda c: float(c["loss"].mean()))],
    "perplexity": [(("loss_sum", "tokens"), lambda c: perplexity(_token_loss(c)))],
    "bits_per_token": [(("loss_sum", "tokens"), lambda c: _token_loss(c) / math.log(2))],
    "bleu": [(("bleu_stats",), _sacrebleu("bleu"))],
    "chrf": [(("chrf_stats",), _sacrebleu("chrf"))],
}
