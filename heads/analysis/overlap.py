"""A trivial baseline for sentence-pair classification: logistic regression on word-overlap features.

What a model with no understanding reaches on a pair task. A task solved as
well by word overlap says little about what attention heads do, so the claims
on classifiers require the fine-tuned model to beat this (the
``cls-beats-overlap`` precondition).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heads.data.corpora import words

FEATURES = ("jaccard", "share_of_a", "share_of_b", "length_ratio")


def overlap_features(a: str, b: str) -> list[float]:
    """Jaccard overlap of the two word sets, the share of each side's words the other has, and the length ratio."""
    wa, wb = words(a), words(b)
    common = len(wa & wb)
    short, long = sorted((len(wa), len(wb)))
    return [common / max(1, len(wa | wb)), common / max(1, len(wa)), common / max(1, len(wb)), short / max(1, long)]


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, iterations: int = 50) -> np.ndarray:
    """Weights (bias last) of a binary logistic regression by Newton's method (deterministic; a few features)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    ridge = l2 * np.eye(xb.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + ridge @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + ridge
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return (np.hstack([x, np.ones((len(x), 1))]) @ w > 0).astype(int)


def overlap_baseline(train: Sequence[tuple[str, str, int]], test: Sequence[tuple[str, str, int]]) -> dict:
    """Fit on ``train`` pairs ``(a, b, label)``, score on ``test``: ``{"accuracy", "examples", "features"}``.

    Two labels only (paraphrase or not); more labels are refused rather than scored wrongly."""
    labels = {int(r[2]) for r in train} | {int(r[2]) for r in test}
    if not labels <= {0, 1}:
        raise ValueError(f"the word-overlap baseline takes two labels (0, 1), got {sorted(labels)}")
    if not train or not test:
        raise ValueError("the word-overlap baseline needs training and test pairs")
    fx = np.array([overlap_features(a, b) for a, b, _ in train])
    w = fit_logistic(fx, np.array([int(r[2]) for r in train], dtype=float))
    tx = np.array([overlap_features(a, b) for a, b, _ in test])
    accuracy = float(np.mean(predict(w, tx) == np.array([int(r[2]) for r in test])))
    return {"accuracy": accuracy, "examples": len(test), "features": list(FEATURES)}
