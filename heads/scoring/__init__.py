"""Head scoring: registered scorers (higher = keep), significance tests, and selection of heads to prune.

Typical use::

    scores = compute_scores("importance", model, batches)
    remove = select(scores, 0.3, layout=head_layout(model), group_size=group_sizes(model))
    prune_heads(model, remove)
"""

# Importing the scorer modules registers them.
from heads.scoring import confidence, importance, js, magnitude, rand, similarity  # noqa: F401
from heads.scoring.ablation import (
    AblationParams,
    AblationTable,
    AllButOne,
    HeadAblation,
    ablation_table,
    all_but_one,
)
from heads.scoring.evaluate import evaluate_closures
from heads.scoring.importance import ImportanceParams
from heads.scoring.js import js_matrices, mean_js, pairwise_js, same_pattern_ratio
from heads.scoring.losses import ExampleStats, example_stats
from heads.scoring.normalize import l2_normalize
from heads.scoring.rand import RandomParams
from heads.scoring.registry import (
    Scorer,
    Scores,
    UnknownScorerError,
    compute_scores,
    get_scorer,
    list_scorers,
    register_scorer,
)
from heads.scoring.select import group_sizes, round_half_up, select
from heads.scoring.session import scoring_mode
from heads.scoring.significance import BootstrapResult, paired_bootstrap, paired_ttest
from heads.scoring.similarity import (
    SimilarityParams,
    redundancy_ratio,
    redundant_heads,
    similarity_matrices,
    summed_similarity,
)
from heads.scoring.strata import stratified_scores

__all__ = [
    "AblationParams",
    "AblationTable",
    "AllButOne",
    "BootstrapResult",
    "ExampleStats",
    "HeadAblation",
    "ImportanceParams",
    "RandomParams",
    "Scorer",
    "Scores",
    "SimilarityParams",
    "UnknownScorerError",
    "ablation_table",
    "all_but_one",
    "compute_scores",
    "evaluate_closures",
    "example_stats",
    "get_scorer",
    "group_sizes",
    "js_matrices",
    "l2_normalize",
    "list_scorers",
    "mean_js",
    "paired_bootstrap",
    "paired_ttest",
    "pairwise_js",
    "redundancy_ratio",
    "redundant_heads",
    "register_scorer",
    "round_half_up",
    "same_pattern_ratio",
    "scoring_mode",
    "select",
    "similarity_matrices",
    "stratified_scores",
    "summed_similarity",
]
