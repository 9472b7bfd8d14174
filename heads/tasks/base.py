"""A task = data + model family + metric. One file per task, registered by name."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from heads.config import RunConfig
from heads.io import InputError
from heads.placement import on_model


class ModelMismatch(InputError):
    """A model that cannot do the task (wrong family or wrong head)."""


class Task(ABC):
    """What the engine needs from a task: data, a model, a loss and an evaluation."""

    name: ClassVar[str]
    description: ClassVar[str]
    families: ClassVar[tuple[str, ...]]  # model families (heads.surgery.families) that can do the task
    model_heads: ClassVar[tuple[str, ...]]  # how the class names of models with the task's output head end
    auto_class: ClassVar[str]  # the transformers Auto class with the task's head (a pretrained source gets it)
    # A plugin task's run configuration per scale ({preset: {model: ..., data: ..., train: ...}}); the built-in
    # tasks' live in heads/presets/<preset>.yaml.
    presets: ClassVar[dict[str, dict]] = {}
    metric: ClassVar[str]  # the headline metric evaluate() returns (its direction: heads.task_metrics)
    empty_hint: ClassVar[str] = "every row is blank"  # why a split can encode to no example at all

    def data_path(self, cfg: RunConfig) -> Path:
        """Prepared data (Arrow, checksummed) for this task, built on first use."""
        from heads.data.prepare import prepare_for

        return prepare_for(self.name, cfg.data)

    def check_model(self, model: nn.Module, where: str, head: bool = True) -> None:
        """Refuse a model whose family (and, with ``head``, output head) cannot do this task, naming the
        families that can. Without ``head``: measurements that need no task output (speed, attention roles)."""
        from heads.surgery.families import FAMILIES

        family = getattr(FAMILIES.get(getattr(model.config, "model_type", None)), "name", None)
        arch = type(model).__name__
        if family not in self.families or (head and not arch.endswith(self.model_heads)):
            raise ModelMismatch(
                f"{where}: a {arch} ({family or model.config.model_type} family) cannot do task {self.name!r}; "
                f"families that can: {list(self.families)} (a model class ending in {' or '.join(self.model_heads)})"
            )

    def data_checksum(self, cfg: RunConfig) -> str:
        """One digest of the prepared data (its CHECKSUM listing), recorded in every checkpoint."""
        from heads.data.prepare import checksum

        return checksum(self.data_path(cfg))

    def splits(self, cfg: RunConfig):
        """The prepared splits, checksum-verified once per folder and kept (examples() of every split,
        num_labels() and the evaluation all read them)."""
        from heads.data.prepare import load_prepared

        path = self.data_path(cfg)
        cache = self.__dict__.setdefault("_splits", {})
        if path not in cache:
            cache[path] = load_prepared(path)
        return cache[path]

    @abstractmethod
    def tokenizer(self, cfg: RunConfig):
        """The tokenizer: trained BPE on the training split, or a pretrained model's own."""

    @abstractmethod
    def build_model(self, cfg: RunConfig, tokenizer) -> nn.Module:
        """A fresh (or pretrained) model for this task."""

    def examples(self, cfg: RunConfig, tokenizer, split: str) -> list[Any]:
        """Encoded examples of one split, ready for :meth:`collate`; a split that encodes to nothing is refused
        here, with its cause, rather than as a division by zero or an empty batch somewhere downstream. A held-out
        split is cut to shard ``eval.shard`` of ``eval.shards`` (contiguous, disjoint, equal sizes)."""
        out = shard_of(cfg, self.encode(cfg, tokenizer, split), split)
        if not out:
            rows = len(self.splits(cfg)[split])
            raise InputError(
                f"task {self.name}: the {split!r} split of {self.data_path(cfg)} ({rows} rows) yields no example "
                f"at data.seq_len={cfg.data.seq_len}: {self.empty_hint}"
            )
        return out

    @abstractmethod
    def encode(self, cfg: RunConfig, tokenizer, split: str) -> list[Any]:
        """Encode one split (over-long rows cut to ``data.seq_len``, never dropped silently)."""

    @abstractmethod
    def collate(self, examples: list[Any]) -> dict[str, torch.Tensor]:
        """Model inputs (with ``labels``) for a list of examples."""

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor], cfg: RunConfig) -> torch.Tensor:
        return model(**on_model(batch, model)).loss

    def loss_items(self, batch: dict[str, torch.Tensor]) -> int:
        """How many items :meth:`loss` averages over (examples by default; token losses count tokens): the weight
        of a micro-batch's loss in its step's batch, so any split of a batch gives that batch's loss."""
        return int(batch["labels"].shape[0])

    def tokens(self, batch: dict[str, torch.Tensor]) -> int:
        """Tokens the model processed for this batch (the unit of throughput)."""
        return int(batch["attention_mask"].sum())

    def trivial(self, cfg: RunConfig) -> dict[str, dict]:
        """Trivial baselines of the task on its evaluation examples, by name: what a model with no understanding
        of the task reaches (``heads trivial``); none by default."""
        return {}

    @abstractmethod
    def evaluate(self, model: nn.Module, cfg: RunConfig, tokenizer, split: str) -> dict[str, Any]:
        """The task metric on ``split``: ``{metric: value, ...}`` plus anything that identifies it."""


def shard_of(cfg: RunConfig, items: list, split: str) -> list:
    """Shard ``eval.shard`` of ``eval.shards`` of a held-out split's items (examples, or anything aligned with
    them: references, raw pairs): contiguous, disjoint and of equal size, so every seed scores as many; the last
    ``len % shards`` items belong to no shard. The training split is never cut."""
    if split == "train" or cfg.eval.shards <= 1:
        return items
    size = len(items) // cfg.eval.shards
    if size == 0:
        raise InputError(f"eval.shards={cfg.eval.shards}: the {split!r} split has only {len(items)} examples, "
                         "fewer than one per shard")
    return items[cfg.eval.shard * size : (cfg.eval.shard + 1) * size]


def mean_loss(model: nn.Module, batches: Iterable[dict], loss_fn: Callable, count: Callable) -> tuple[float, int]:
    """Token-weighted mean loss over batches, in eval mode without gradients."""
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            k = count(batch)
            total += float(loss_fn(model, batch)) * k
            n += k
    model.train(was_training)
    return (total / n if n else math.nan), n
