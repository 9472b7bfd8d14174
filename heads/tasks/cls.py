"""Sentence-pair classification (paraphrase identification); accuracy.

Model sources: a pretrained encoder with its own tokenizer and a new classifier (``model.source=minilm``, the
shipped MiniLM: Michel's BERT setting, fine-tuned then pruned; or any BERT-family folder or hub id), or a BERT
from config with the task's BPE tokenizer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from heads import models
from heads.config import RunConfig
from heads.examples import KEY
from heads.placement import on_model
from heads.task_metrics import TASK_METRIC
from heads.tasks.base import Task, mean_loss, shard_of
from heads.tasks.batching import eval_batches, pad
from heads.tasks.registry import register_task
from heads.tasks.text import build_or_load, task_tokenizer


@register_task("cls")
class PairClassification(Task):
    description = "paraphrase identification (same verse, two English translations vs neighbours); accuracy"
    metric = TASK_METRIC["cls"]
    families = ("bert",)
    model_heads = ("ForSequenceClassification",)
    auto_class = "AutoModelForSequenceClassification"

    def tokenizer(self, cfg: RunConfig):
        return task_tokenizer(self, cfg)

    def build_model(self, cfg: RunConfig, tokenizer):
        m = cfg.model
        return build_or_load(
            cfg,
            lambda: models.bert(
                vocab=len(tokenizer),
                d=m.d,
                layers=m.layers,
                heads=m.heads,
                ff=m.ff or None,
                labels=self.num_labels(cfg),
                max_len=max(m.max_len, 2 * cfg.data.seq_len + 3),
                seed=cfg.train.seed,
                pad_token_id=tokenizer.pad_token_id,
            ),
            self,
            num_labels=self.num_labels(cfg),
        )

    def num_labels(self, cfg: RunConfig) -> int:
        """The label set of the prepared data (its ClassLabel: 2 for the offline paraphrase task, 3 for MNLI,
        whatever a user's dataset holds), never assumed."""
        train = self.splits(cfg)["train"]
        return getattr(train.features["label"], "num_classes", None) or len(set(train["label"]))

    def _specials(self, tokenizer) -> tuple[int, int]:
        cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        return cls, sep

    def encode(self, cfg: RunConfig, tokenizer, split: str) -> list[tuple[list[int], list[int], int]]:
        """[CLS] a [SEP] b [SEP] with segment ids; each side cut to seq_len tokens."""
        rows = self.splits(cfg)[split]
        cls, sep = self._specials(tokenizer)
        n = cfg.data.seq_len
        # RoBERTa-style models have one segment embedding: the second text keeps segment 0 there.
        segment = 1 if "token_type_ids" in getattr(tokenizer, "model_input_names", ("token_type_ids",)) else 0
        a = tokenizer(list(rows["text_a"]), add_special_tokens=False)["input_ids"]
        b = tokenizer(list(rows["text_b"]), add_special_tokens=False)["input_ids"]
        out = []
        for x, y, label in zip(a, b, list(rows["label"]), strict=True):
            # a single-sentence dataset (data.columns.text_b: null) has text_b "" on every row: [CLS] a [SEP]
            ids = [cls] + x[:n] + [sep] + (y[:n] + [sep] if y else [])
            types = [0] * (len(x[:n]) + 2) + ([segment] * (len(y[:n]) + 1) if y else [])
            out.append((ids, types, int(label)))
        return out

    def collate(self, examples) -> dict[str, torch.Tensor]:
        ids, mask = pad([e[0] for e in examples], 0)
        types, _ = pad([e[1] for e in examples], 0)
        labels = torch.tensor([e[2] for e in examples], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}

    def evaluate(self, model, cfg: RunConfig, tokenizer, split: str) -> dict:
        data = self.examples(cfg, tokenizer, split)[: max(1, cfg.eval.max_examples)]
        correct, losses = [], []

        def loss_fn(mod, batch):
            batch = on_model(batch, mod)
            logits = mod(**batch).logits
            correct.extend((logits.argmax(-1) == batch["labels"]).tolist())
            # per pair, for intervals that resample examples (heads.examples); the headline loss stays the batch
            # mean it always was
            losses.extend(F.cross_entropy(logits.float(), batch["labels"], reduction="none").tolist())
            return F.cross_entropy(logits.float(), batch["labels"])

        loss, n = mean_loss(
            model, eval_batches(data, cfg.data.batch_size, self.collate), loss_fn, lambda b: b["labels"].shape[0]
        )
        return {"accuracy": sum(correct) / max(1, n), "loss": loss, "examples": n, "split": split,
                KEY: {"correct": [int(c) for c in correct], "loss": losses}}

    def trivial(self, cfg: RunConfig) -> dict[str, dict]:
        """Word overlap: logistic regression on overlap features, fit on the training pairs and scored on the
        examples ``evaluate`` scores (the first ``eval.max_examples`` of the evaluation split)."""
        from heads.analysis.overlap import overlap_baseline

        splits = self.splits(cfg)

        def pairs(split: str) -> list[tuple[str, str, int]]:
            rows = splits[split]
            return list(zip(rows["text_a"], rows["text_b"], rows["label"], strict=True))

        test = shard_of(cfg, pairs(cfg.eval.split), cfg.eval.split)[: max(1, cfg.eval.max_examples)]
        return {"word_overlap": overlap_baseline(pairs("train"), test)}
