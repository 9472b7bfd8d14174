"""Which way is better, stated once for the tasks and the report (this module imports nothing heavy)."""

from __future__ import annotations

import math

# The metrics a task's evaluation reports: True when larger is better.
HIGHER_IS_BETTER: dict[str, bool] = {
    "bleu": True,
    "chrf": True,
    "accuracy": True,
    "mrr": True,
    "perplexity": False,
    "bits_per_token": False,
    "loss": False,
}
# The headline metric of each built-in task (a task's ``metric``; the report's fallback for a tree without
# summaries).
TASK_METRIC: dict[str, str] = {"lm": "perplexity", "mt": "bleu", "cls": "accuracy", "cls_hard": "accuracy",
                               "coherence": "accuracy", "retrieval": "accuracy"}


# The values a metric can take: a Student-t interval of a mean near a bound can reach past it (an accuracy CI up
# to 1.019), which tables clip to; the mean itself never needs it.
RANGE: dict[str, tuple[float, float]] = {
    "bleu": (0.0, 100.0),
    "chrf": (0.0, 100.0),
    "accuracy": (0.0, 1.0),
    "mrr": (0.0, 1.0),
    "share": (0.0, 1.0),
    "perplexity": (1.0, float("inf")),
    "bits_per_token": (0.0, float("inf")),
    "loss": (0.0, float("inf")),
}


def higher_is_better(metric: str) -> bool:
    """Whether larger values of ``metric`` are better (an unknown metric: smaller is, as for losses)."""
    return HIGHER_IS_BETTER.get(metric, False)


# A retained share (pruned / unpruned) of a model that scores almost nothing is noise over noise: a BLEU of 0.05
# moving to 1.4 "retains" 28x. Below this share of a bounded metric's range the share is not computed.
RETAINED_FLOOR = 0.01


def retained_defined(metric: str, base: float) -> bool:
    """Whether ``pruned / base`` means anything: False for a larger-is-better bounded metric whose unpruned
    value ``base`` lies within :data:`RETAINED_FLOOR` of the range's bottom (1 BLEU, 1 % accuracy)."""
    low, high = RANGE.get(metric, (0.0, float("inf")))
    if not higher_is_better(metric) or high == float("inf"):
        return base != 0
    return base >= low + RETAINED_FLOOR * (high - low)


def perplexity(loss: float) -> float:
    """``exp(loss)``, infinite past what a float holds: a diverged model's loss (lr=16 reached 2476) overflows
    ``math.exp`` after the whole run, and the run then had no summary."""
    return math.exp(loss) if loss < math.log(float.fromhex("0x1.fffffffffffffp+1023")) else math.inf
