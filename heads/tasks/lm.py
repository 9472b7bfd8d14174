"""Causal language modelling: a Llama-family decoder; perplexity and bits per token."""

from __future__ import annotations

import math

import torch

from heads import models
from heads.config import RunConfig
from heads.examples import KEY
from heads.io import InputError
from heads.placement import on_model
from heads.task_metrics import TASK_METRIC, perplexity
from heads.tasks.base import Task, mean_loss, shard_of
from heads.tasks.batching import eval_batches
from heads.tasks.registry import register_task
from heads.tasks.text import build_or_load, task_tokenizer


@register_task("lm")
class LanguageModelling(Task):
    description = "causal LM (Llama from config) on World English Bible text; perplexity, bits per token"
    metric = TASK_METRIC["lm"]
    families = ("llama", "gpt2", "gemma3")
    model_heads = ("ForCausalLM", "LMHeadModel")
    auto_class = "AutoModelForCausalLM"

    def tokenizer(self, cfg: RunConfig):
        return task_tokenizer(self, cfg)

    def build_model(self, cfg: RunConfig, tokenizer):
        m = cfg.model
        return build_or_load(
            cfg,
            lambda: models.llama(
                vocab=len(tokenizer),
                d=m.d,
                layers=m.layers,
                heads=m.heads,
                kv_heads=m.kv_heads or None,
                ff=m.ff or None,
                max_len=max(m.max_len, cfg.data.seq_len),
                seed=cfg.train.seed,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                bos_token_id=tokenizer.bos_token_id,
            ),
            self,
        )

    empty_hint = "the split holds fewer tokens than one window; lower data.seq_len or add text"

    def _stream(self, cfg: RunConfig, tokenizer, split: str) -> tuple[list[int], list[int]]:
        """The split's texts (verses, articles) joined by <eos> into one token stream, and each token's text."""
        texts = [t for t in self.splits(cfg)[split]["text"] if t.strip()]
        stream: list[int] = []
        owner: list[int] = []
        for row, ids in enumerate(tokenizer(texts, add_special_tokens=False)["input_ids"]):
            stream.extend(ids)
            stream.append(tokenizer.eos_token_id)
            owner.extend([row] * (len(ids) + 1))
        return stream, owner

    def encode(self, cfg: RunConfig, tokenizer, split: str) -> list[list[int]]:
        """Verses joined by <eos> into one stream, cut into non-overlapping windows of seq_len, each started as
        the tokenizer starts a text (:func:`text_prefix`: Gemma's <bos>; nothing for SmolLM2 or our BPE)."""
        stream, _ = self._stream(cfg, tokenizer, split)
        prefix = text_prefix(tokenizer)
        w = cfg.data.seq_len - len(prefix)
        return [prefix + stream[i : i + w] for i in _starts(len(stream), w)]

    def clusters(self, cfg: RunConfig, tokenizer, split: str) -> list[int]:
        """The text (article, verse) each window of :meth:`examples` starts in: windows cut from one text are
        not independent samples, so a bootstrap resamples texts (``heads mask``'s cluster bootstrap)."""
        _, owner = self._stream(cfg, tokenizer, split)
        w = cfg.data.seq_len - len(text_prefix(tokenizer))
        return shard_of(cfg, [owner[i] for i in _starts(len(owner), w)], split)

    def collate(self, examples: list[list[int]]) -> dict[str, torch.Tensor]:
        ids = torch.tensor(examples, dtype=torch.long)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}

    def tokens(self, batch) -> int:
        return int(batch["input_ids"].numel())

    def loss_items(self, batch) -> int:
        return int((batch["labels"][:, 1:] != -100).sum())  # the causal loss predicts each next token

    def evaluate(self, model, cfg: RunConfig, tokenizer, split: str) -> dict:
        data = self.examples(cfg, tokenizer, split)
        limit = max(1, cfg.eval.max_examples)
        sums, counts = [], []

        def loss_fn(mod, batch):
            batch = on_model(batch, mod)
            out = mod(**batch)
            # per window, for intervals that resample windows (heads.examples); the headline loss stays the
            # model's own batch loss
            logits, labels = out.logits[:, :-1].float(), batch["labels"][:, 1:]
            token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none",
                                                      ignore_index=-100)
            sums.extend(token.sum(dim=1).tolist())
            counts.extend((labels != -100).sum(dim=1).tolist())
            return out.loss

        # Each window predicts seq_len - 1 tokens: weight by those.
        loss, n = mean_loss(
            model,
            eval_batches(data, cfg.data.batch_size, self.collate, limit),
            loss_fn,
            lambda b: b["input_ids"].shape[0] * (b["input_ids"].shape[1] - 1),
        )
        return {
            "perplexity": perplexity(loss),
            "bits_per_token": loss / math.log(2),
            "loss": loss,
            "tokens": n,
            "split": split,
            KEY: {"loss_sum": sums, "tokens": counts},
        }


def text_prefix(tokenizer) -> list[int]:
    """The special tokens the tokenizer puts before a text (``add_special_tokens``): Gemma's <bos>, which the
    model saw first in every training sequence (its perplexity on windows without it is several times higher);
    none for SmolLM2's tokenizer or a BPE trained here, whose windows are therefore unchanged."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    k = next((i for i in range(len(full) - len(plain) + 1) if full[i : i + len(plain)] == plain), 0)
    return list(full[:k])


def _starts(tokens: int, width: int) -> range:
    """Where each non-overlapping window of ``width`` stream tokens starts."""
    if width < 1:
        raise InputError(f"data.seq_len leaves no room for text after the tokenizer's prefix (width {width})")
    return range(0, tokens - width + 1, width)
