"""Deterministic, resumable batch order: a seeded permutation per epoch and a cursor.

The whole state is (epoch, cursor): saving those two integers and the seed is
enough to resume exactly where a killed run stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from heads.io import InputError


class Batcher:
    """Endless batches of ``batch_size`` examples, reshuffled every epoch from ``seed``."""

    def __init__(self, examples: Sequence[Any], batch_size: int, collate: Callable[[list], dict], seed: int):
        if len(examples) == 0:
            raise InputError("no training examples: the training split is empty")
        self.examples = examples
        self.batch_size = min(batch_size, len(examples))
        self.collate = collate
        self.seed = seed
        self.epoch = 0
        self.cursor = 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(len(self.examples), generator=g).tolist()

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        if self.cursor + self.batch_size > len(self._order):  # drop the ragged tail: equal batch shapes
            self.epoch += 1
            self.cursor = 0
            self._order = self._permutation(self.epoch)
        idx = self._order[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return self.collate([self.examples[i] for i in idx])

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.seed = state["seed"]
        self.epoch = state["epoch"]
        self.cursor = state["cursor"]
        self._order = self._permutation(self.epoch)


def eval_batches(examples: Sequence[Any], batch_size: int, collate: Callable[[list], dict], limit: int | None = None):
    """Fixed-order batches over (the first ``limit``) evaluation examples."""
    items = list(examples[:limit] if limit else examples)
    for start in range(0, len(items), batch_size):
        yield collate(items[start : start + batch_size])


def pad(seqs: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence: (ids, attention mask)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), value, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[row, : len(s)] = 1
    return ids, mask
