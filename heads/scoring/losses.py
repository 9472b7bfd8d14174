"""Per-example loss and accuracy statistics, matching the loss the Hugging Face head computes.

The models' own ``loss`` is one number per batch; significance tests and
per-example importance need one per example. ``example_stats`` recomputes it
from the logits with the same rules (shift for causal LMs, ``-100`` ignored,
the classifier's problem type), keeping sums and counts so that
``corpus_loss`` of a batch equals ``model(**batch).loss``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

IGNORE_INDEX = -100
FIELDS = ("loss_sum", "count", "correct")


@dataclass
class ExampleStats:
    """Sums per example (last axis): loss, scored items (tokens or 1 per sentence), correct items."""

    loss_sum: torch.Tensor
    count: torch.Tensor
    correct: torch.Tensor

    def mean_loss(self) -> torch.Tensor:
        """Per-example mean loss (NaN for an example with nothing to score)."""
        return self.loss_sum / self.count.where(self.count > 0, torch.nan)

    def accuracy(self) -> torch.Tensor:
        return self.correct / self.count.where(self.count > 0, torch.nan)

    def corpus_loss(self) -> torch.Tensor:
        """Item-weighted loss over the last axis: what the model reports for one batch."""
        return self.loss_sum.sum(-1) / self.count.sum(-1).clamp(min=1)

    def corpus_accuracy(self) -> torch.Tensor:
        return self.correct.sum(-1) / self.count.sum(-1).clamp(min=1)

    def cpu(self) -> ExampleStats:
        return ExampleStats(self.loss_sum.detach().cpu(), self.count.detach().cpu(), self.correct.detach().cpu())

    def view(self, *shape: int) -> ExampleStats:
        return ExampleStats(self.loss_sum.view(*shape), self.count.view(*shape), self.correct.view(*shape))

    @staticmethod
    def cat(parts: list[ExampleStats]) -> ExampleStats:
        """Join along the example axis (the last one)."""
        return ExampleStats(*(torch.cat([getattr(p, f) for p in parts], dim=-1) for f in FIELDS))


def shifts_labels(model: nn.Module) -> bool:
    """Whether the model predicts token t+1 at position t (decoder-only LMs) rather than the label in place."""
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        return False
    return type(model).__name__.endswith("ForCausalLM") or bool(getattr(config, "is_decoder", False))


def example_stats(model: nn.Module, batch: Mapping[str, Any], logits: torch.Tensor, labels=None) -> ExampleStats:
    """Per-example loss/accuracy sums for ``logits`` [B, C] (classifier) or [B, T, V] (token-level).

    ``labels`` defaults to ``batch["labels"]``. Everything is computed in float32
    (the HF losses upcast too) and returned as float64 for accumulation.
    """
    labels = batch.get("labels") if labels is None else labels
    if labels is None:
        raise ValueError("scoring batches need 'labels' (the loss is what importance and ablation measure)")
    labels = labels.to(logits.device)  # the batch may still be on the host while the model runs on a GPU
    if logits.dim() == 2:
        return _sequence_stats(model, logits.float(), labels)
    if shifts_labels(model):
        logits, labels = logits[:, :-1], labels[:, 1:]
    logits = logits.float()
    valid = labels != IGNORE_INDEX
    token_loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX, reduction="none"
    ).view(labels.shape)
    correct = (logits.argmax(-1) == labels) & valid
    return ExampleStats(token_loss.sum(-1).double(), valid.sum(-1).double(), correct.sum(-1).double())


def _problem_type(config, labels: torch.Tensor) -> str:
    # Same inference as the HF sequence classifiers (which store it on the config on first use).
    if getattr(config, "problem_type", None):
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


def _sequence_stats(model: nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> ExampleStats:
    problem = _problem_type(model.config, labels)
    ones = torch.ones(logits.shape[0], dtype=torch.float64, device=logits.device)
    if problem == "regression":
        target = labels.float().view(logits.shape[0], -1)
        loss = F.mse_loss(logits.view_as(target), target, reduction="none").mean(-1)
        return ExampleStats(loss.double(), ones, torch.zeros_like(ones))  # accuracy is meaningless here
    if problem == "single_label_classification":
        labels = labels.view(-1)
        valid = (labels != IGNORE_INDEX).double()
        loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="none")
        return ExampleStats(loss.double(), valid, (logits.argmax(-1) == labels).double() * valid)
    target = labels.float()
    loss = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(-1)
    return ExampleStats(loss.double(), ones, ((logits > 0) == target.bool()).all(-1).double())
