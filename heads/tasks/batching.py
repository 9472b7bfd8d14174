"""Deterministic, resumable batch order: a seeded permutation per epoch and a cursor.

The whole state is (epoch, cursor): saving those two integers and the seed is
enough to resume exactly where a killed run stopped.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
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
        return self.collate(self.next_examples())

    def next_examples(self) -> list[Any]:
        """The next batch's examples, uncollated (the training loop splits them into micro-batches)."""
        if self.cursor + self.batch_size > len(self._order):  # drop the ragged tail: equal batch shapes
            self.epoch += 1
            self.cursor = 0
            self._order = self._permutation(self.epoch)
        idx = self._order[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return [self.examples[i] for i in idx]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.seed = state["seed"]
        self.epoch = state["epoch"]
        self.cursor = state["cursor"]
        self._order = self._permutation(self.epoch)


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """``items`` in ``parts`` contiguous chunks whose sizes differ by at most one (none empty)."""
    if not 1 <= parts <= len(items):
        raise InputError(f"cannot split a batch of {len(items)} examples into {parts} micro-batches")
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (i < extra)
        out.append(list(items[start:end]))
        start = end
    return out


class Loader:
    """The training stream: each step's batch (a :class:`Batcher`'s) split into ``parts`` micro-batches and
    collated, ``workers`` threads ahead of the step when asked (pinned for a GPU). Its state is the batcher's
    position after the last batch handed out, so batches prepared ahead are never counted as seen."""

    def __init__(self, batcher: Batcher, parts: int, workers: int = 0, pin: bool = False):
        self.batcher, self.parts, self.workers, self.pin = batcher, parts, workers, pin
        self._state = batcher.state_dict()
        self._ahead: collections.deque = collections.deque()
        self._pool = None
        if workers:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="heads-collate")

    def _prepare(self, examples: list[Any]) -> list[dict]:
        micro = [self.batcher.collate(chunk) for chunk in split(examples, self.parts)]
        if self.pin:
            micro = [{k: v.pin_memory() if torch.is_tensor(v) else v for k, v in b.items()} for b in micro]
        return micro

    def __iter__(self) -> Iterator[list[dict]]:
        return self

    def __next__(self) -> list[dict]:
        """The micro-batches of the next step, in order."""
        if self._pool is None:
            micro = self._prepare(self.batcher.next_examples())
            self._state = self.batcher.state_dict()
            return micro
        while len(self._ahead) < 2 * self.workers:  # the batch order is drawn here, in order; only collation runs ahead
            examples = self.batcher.next_examples()
            self._ahead.append((self._pool.submit(self._prepare, examples), self.batcher.state_dict()))
        future, self._state = self._ahead.popleft()
        return future.result()

    def state_dict(self) -> dict:
        return dict(self._state)

    def load_state_dict(self, state: dict) -> None:
        self._ahead.clear()
        self.batcher.load_state_dict(state)
        self._state = self.batcher.state_dict()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def eval_batches(examples: Sequence[Any], batch_size: int, collate: Callable[[list], dict], limit: int | None = None):
    """Fixed-order batches over (the first ``limit``) evaluation examples."""
    items = list(examples[:limit] if limit else examples)
    for start in range(0, len(items), batch_size):
        yield collate(items[start : start + batch_size])


def pad(seqs: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence: (ids, attention mask).

    Built in numpy from all the ids at once, not a tensor per row: collating is host work on the training
    step's path, and on a GPU host work is what bounds a small model's step (results/bench/gpu_evidence.md)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    width = int(lengths.max())
    mask = np.arange(width) < lengths[:, None]
    ids = np.full((len(seqs), width), value, dtype=np.int64)
    ids[mask] = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))
