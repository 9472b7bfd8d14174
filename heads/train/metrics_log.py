"""Metrics as JSON lines, and the figures derived from them (time- and steps-to-target)."""

from __future__ import annotations

import json
from pathlib import Path

from heads.io import read_jsonl, write_text


class MetricsLog:
    """Append-only JSON lines, flushed per record; truncated to a checkpoint's step on resume."""

    def __init__(self, path: Path, active: bool = True):
        self.path = path
        self.active = active  # False on every rank but 0 of a distributed run: one writer

    def truncate_after(self, step: int) -> None:
        if not self.active or not self.path.exists():
            return  # not the writer, or nothing logged yet: a resume must not leave a file a whole run would not
        # a torn last line is a record killed mid-write, after this checkpoint: dropped like the rest after it
        kept = [r for r in read_jsonl(self.path, torn_tail_ok=True) if r["step"] <= step]
        write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    def records(self) -> int:
        """How many whole records the file holds (a torn last line is not one)."""
        if not self.active or not self.path.exists():
            return 0
        return len(read_jsonl(self.path, torn_tail_ok=True))

    def truncate_to(self, count: int) -> None:
        """Keep the first ``count`` records: what a checkpoint saw, even where later records share its step (the
        events a run's end writes after its last checkpoint, which a resume writes again)."""
        if not self.active or not self.path.exists():
            return
        kept = read_jsonl(self.path, torn_tail_ok=True)[:count]
        write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    def write(self, record: dict) -> None:
        if not self.active:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()


def first_reaching(records: list[dict], key: str, target: float, lower_is_better: bool = True) -> dict | None:
    """The first record whose ``key`` meets ``target``; None when the run never got there."""
    for r in records:
        value = r.get(key)
        if value is not None and (value <= target if lower_is_better else value >= target):
            return r
    return None


def time_to_target(records: list[dict], key: str, target: float, lower_is_better: bool = True) -> float | None:
    """Training seconds (evaluation and checkpoint time excluded) until ``key`` first meets ``target``."""
    hit = first_reaching(records, key, target, lower_is_better)
    return None if hit is None else hit["train_seconds"]


def steps_to_target(records: list[dict], key: str, target: float, lower_is_better: bool = True) -> int | None:
    hit = first_reaching(records, key, target, lower_is_better)
    return None if hit is None else hit["step"]
