"""Verse retrieval across two English translations: sentence embeddings by mean pooling; acc@1 and MRR.

Data (the offline ``retrieval`` corpus, :mod:`heads.data.corpora`): each King James verse (the query) with the
same verse in the Bible in Basic English (its match), split by book as every offline corpus is: test books
Lamentations, Hosea and John (1,230 verses), validation books Ecclesiastes, Daniel, 1 Corinthians and James
(1,124), the other 59 books train.

Evaluation (the task's value): every query of the evaluated verses (the first ``eval.max_examples`` of the
split's shard, in canonical order) against all of their matches: acc@1 (reported as ``accuracy``: the match is
the nearest by cosine similarity) and the mean reciprocal rank of the match (``mrr``).

Loss (training, importance, ablation, masking): in-batch InfoNCE (:mod:`heads.embedding`, temperature
:data:`~heads.embedding.TEMPERATURE` = 0.05). An example is a *group* of :data:`GROUP` consecutive verses
(neighbours: hard negatives); each query is scored against the group's matches, so examples stay independent
of one another (per-example gates and stacked ablations see one group each). Its loss is the mean over the
group's queries; the last group of a split may be shorter (padded, its padding ignored).

Model sources: ``model.source=mpnet`` (the shipped all-mpnet-base-v2), any MPNet folder or hub id, or a small
MPNet from config with the task's BPE tokenizer (``model.family=mpnet``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from heads.config import RunConfig
from heads.embedding import TEMPERATURE
from heads.examples import KEY
from heads.placement import on_model
from heads.task_metrics import TASK_METRIC
from heads.tasks.base import Task
from heads.tasks.batching import pad
from heads.tasks.registry import register_task
from heads.tasks.text import build_or_load, task_tokenizer

GROUP = 8  # verses per example: its in-batch negatives (chance acc@1 within a group: 1/8)
IGNORE_INDEX = -100

Group = tuple[list[list[int]], list[list[int]]]  # (query token ids, match token ids), aligned


@register_task("retrieval")
class VerseRetrieval(Task):
    description = "verse retrieval, King James -> Basic English, by mean-pooled sentence embeddings; acc@1, MRR"
    metric = TASK_METRIC["retrieval"]
    families = ("mpnet",)
    model_heads = ("ForRetrieval",)
    auto_class = "AutoModelForTextEncoding"
    empty_hint = "every verse is blank"

    def tokenizer(self, cfg: RunConfig):
        return task_tokenizer(self, cfg)

    def build_model(self, cfg: RunConfig, tokenizer):
        from heads.embedding import mpnet

        m = cfg.model
        return build_or_load(
            cfg,
            lambda: mpnet(vocab=len(tokenizer), d=m.d, layers=m.layers, heads=m.heads, ff=m.ff or None,
                          max_len=max(m.max_len, cfg.data.seq_len), seed=cfg.train.seed),
            self,
        )

    def pairs(self, cfg: RunConfig, tokenizer, split: str) -> list[tuple[list[int], list[int]]]:
        """Token ids of every (query, match) pair of a split, each cut to ``data.seq_len`` (special tokens
        included, as the tokenizer adds them)."""
        rows = self.splits(cfg)[split]
        n = cfg.data.seq_len

        def ids(texts):
            return tokenizer(list(texts), truncation=True, max_length=n)["input_ids"]

        return [(a, b) for a, b in zip(ids(rows["text_a"]), ids(rows["text_b"]), strict=True) if a and b]

    def encode(self, cfg: RunConfig, tokenizer, split: str) -> list[Group]:
        """Consecutive verses in groups of :data:`GROUP` (the last may be shorter)."""
        return grouped(self.pairs(cfg, tokenizer, split))

    def collate(self, examples: list[Group]) -> dict[str, torch.Tensor]:
        """``input_ids``/``attention_mask`` ``[B, 2M, T]`` (each group's queries, then its matches; a short group
        padded with empty rows) and ``labels`` ``[B, M]`` (query i matches row M + i; -100 on padding)."""
        m = max(len(q) for q, _ in examples)
        rows: list[list[int]] = []
        for queries, matches in examples:
            blank = [[]] * (m - len(queries))
            rows += queries + blank + matches + blank
        ids, mask = pad([r or [0] for r in rows], 0)  # an empty row: one masked token (pad needs a width)
        mask[[i for i, r in enumerate(rows) if not r]] = 0
        labels = torch.tensor([list(range(len(q))) + [IGNORE_INDEX] * (m - len(q)) for q, _ in examples])
        b = len(examples)
        return {"input_ids": ids.view(b, 2 * m, -1), "attention_mask": mask.view(b, 2 * m, -1), "labels": labels}

    def clusters(self, cfg: RunConfig, tokenizer, split: str) -> list[int]:
        """The unit each example of :meth:`examples` belongs to, for ``heads mask``'s bootstrap: its own group
        (groups share no verse and no negative; neighbouring groups of one chapter are still alike, which a
        chapter-level cluster would count and this does not)."""
        return list(range(len(self.examples(cfg, tokenizer, split))))

    def loss_items(self, batch: dict[str, torch.Tensor]) -> int:
        return int((batch["labels"] != IGNORE_INDEX).sum())

    def evaluate(self, model, cfg: RunConfig, tokenizer, split: str) -> dict:
        pairs = [p for q, d in self.examples(cfg, tokenizer, split) for p in zip(q, d, strict=True)]
        pairs = pairs[: max(1, cfg.eval.max_examples)]
        batch = cfg.data.batch_size * GROUP
        sims = similarities(model, [q for q, _ in pairs], [d for _, d in pairs], batch)
        ranks = match_ranks(sims)
        losses = group_losses(sims)  # each query's loss within its group: what the model's forward computes
        correct = [int(r == 1) for r in ranks]
        return {"accuracy": sum(correct) / len(ranks), "mrr": sum(1 / r for r in ranks) / len(ranks),
                "loss": sum(losses) / len(losses), "examples": len(ranks), "split": split,
                KEY: {"correct": correct, "loss": losses}}


def grouped(pairs: list[tuple[list[int], list[int]]], size: int = GROUP) -> list[Group]:
    """Pairs in consecutive groups of ``size`` (the last may be shorter)."""
    return [([q for q, _ in pairs[i : i + size]], [d for _, d in pairs[i : i + size]])
            for i in range(0, len(pairs), size)]


def embed_all(model, seqs: list[list[int]], batch: int) -> torch.Tensor:
    """``[N, d]`` embeddings of token id lists, ``batch`` at a time, in eval mode without gradients."""
    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(seqs), batch):
            ids, mask = pad(seqs[start : start + batch], 0)
            out.append(model.embed(**on_model({"input_ids": ids, "attention_mask": mask}, model)).float().cpu())
    model.train(was_training)
    return torch.cat(out)


def similarities(model, queries: list[list[int]], matches: list[list[int]], batch: int = 64) -> torch.Tensor:
    """``[N, N]`` cosine similarities of every query (rows) to every match (columns)."""
    return embed_all(model, queries, batch) @ embed_all(model, matches, batch).T


def match_ranks(sims: torch.Tensor) -> list[int]:
    """The rank (1 = nearest) of each query's match (the diagonal) among all matches; ties count against the
    match (a model that embeds everything alike ranks it last, not first)."""
    others = sims >= sims.diagonal().unsqueeze(1)
    others.fill_diagonal_(False)
    return (others.sum(1) + 1).tolist()


def group_losses(sims: torch.Tensor, size: int = GROUP) -> list[float]:
    """Each query's InfoNCE loss against the matches of its own group of ``size`` (the training loss)."""
    out: list[float] = []
    for start in range(0, sims.shape[0], size):
        block = sims[start : start + size, start : start + size] / TEMPERATURE
        out += F.cross_entropy(block, torch.arange(block.shape[0]), reduction="none").tolist()
    return out
