"""Translation: a Marian encoder-decoder; BLEU and chrF through sacrebleu, beam search through generate."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from heads import models
from heads.config import ConfigError, RunConfig
from heads.examples import KEY
from heads.placement import on_model
from heads.task_metrics import TASK_METRIC
from heads.tasks.base import Task, mean_loss, shard_of
from heads.tasks.batching import eval_batches, pad
from heads.tasks.registry import register_task
from heads.tasks.text import available_bytes, build_or_load, task_tokenizer

IGNORE = -100


@register_task("mt")
class Translation(Task):
    description = ("translation on verse pairs (En->Fr, a Marian from config; or a shipped Bergamot model, En<->Pt); "
                   "BLEU and chrF (sacrebleu), beam search")
    metric = TASK_METRIC["mt"]
    families = ("marian", "bergamot")
    model_heads = ("MTModel", "ForConditionalGeneration")
    auto_class = "AutoModelForSeq2SeqLM"

    def tokenizer(self, cfg: RunConfig):
        return task_tokenizer(self, cfg)

    def build_model(self, cfg: RunConfig, tokenizer):
        m = cfg.model
        model = build_or_load(
            cfg,
            lambda: models.marian(
                vocab=len(tokenizer),
                d=m.d,
                layers=m.layers,
                heads=m.heads,
                ff=m.ff or None,
                max_len=max(m.max_len, cfg.data.seq_len + 2),
                seed=cfg.train.seed,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                decoder_start_token_id=tokenizer.pad_token_id,
                forced_eos_token_id=tokenizer.eos_token_id,
            ),
            self,
        )
        check_decoding(model, cfg)  # before training: the evaluation after it decodes with these limits
        return model

    empty_hint = "every pair has a blank side"

    def _pairs(self, cfg: RunConfig, tokenizer, split: str) -> list[tuple[list[int], list[int], str]]:
        """(source ids, target ids, target text) of every row with both sides non-empty, uncut."""
        rows = self.splits(cfg)[split]
        src = tokenizer(list(rows["src"]), add_special_tokens=False)["input_ids"]
        # text_target: a pretrained Marian encodes targets with its target-language vocabulary (one BPE: the same)
        tgt = tokenizer(text_target=list(rows["tgt"]), add_special_tokens=False)["input_ids"]
        return [(s, t, text) for s, t, text in zip(src, tgt, list(rows["tgt"]), strict=True) if s and t]

    def encode(self, cfg: RunConfig, tokenizer, split: str) -> list[tuple[list[int], list[int]]]:
        n, eos = cfg.data.seq_len, tokenizer.eos_token_id
        # Truncated to seq_len - 1 content tokens, then <eos>: over-long verses are cut, not dropped.
        return [(s[: n - 1] + [eos], t[: n - 1] + [eos]) for s, t, _ in self._pairs(cfg, tokenizer, split)]

    def references(self, cfg: RunConfig, tokenizer, split: str) -> list[str]:
        """The whole target text of each example of ``split``: a verse longer than ``seq_len`` is cut for the
        model, never for scoring (a cut reference would reward a translation that stops early)."""
        return [text.strip() for _, _, text in self._pairs(cfg, tokenizer, split)]

    def clusters(self, cfg: RunConfig, tokenizer, split: str) -> list[int]:
        """The text each example of :meth:`examples` comes from, for ``heads mask``'s bootstrap over texts: every
        verse pair its own (the prepared pairs carry no chapter, so verses of one chapter resample as
        independent, which narrows an interval where neighbouring verses err alike)."""
        return shard_of(cfg, list(range(len(self.encode(cfg, tokenizer, split)))), split)

    def collate(self, examples) -> dict[str, torch.Tensor]:
        ids, mask = pad([s for s, _ in examples], 0)
        labels, label_mask = pad([t for _, t in examples], IGNORE)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def loss(self, model, batch, cfg: RunConfig) -> torch.Tensor:
        batch = on_model(batch, model)  # the labels too: on a GPU they must sit beside the logits
        logits = model(**batch).logits
        return F.cross_entropy(
            logits.flatten(0, 1),
            batch["labels"].flatten(),
            ignore_index=IGNORE,
            label_smoothing=cfg.train.label_smoothing if model.training else 0.0,
        )

    def loss_items(self, batch) -> int:
        return int((batch["labels"] != IGNORE).sum())

    def tokens(self, batch) -> int:
        return int(batch["attention_mask"].sum() + (batch["labels"] != IGNORE).sum())

    def decoding_set(self, cfg: RunConfig, tokenizer, split: str) -> tuple[list, list[str]]:
        """The encoded pairs a translation is scored on (the first ``eval.max_examples``) and their whole
        references: what ``evaluate`` decodes, and what a BLEU ablation decodes once per head."""
        data = self.examples(cfg, tokenizer, split)[: max(1, cfg.eval.max_examples)]
        return data, shard_of(cfg, self.references(cfg, tokenizer, split), split)[: len(data)]

    def evaluate(self, model, cfg: RunConfig, tokenizer, split: str) -> dict:
        data, refs = self.decoding_set(cfg, tokenizer, split)
        loss = self._decoding_loss(model, data, cfg)
        return self._scored(self.translate(model, cfg, tokenizer, data), refs, loss, split, cfg)

    def evaluate_levels(self, model, cfg: RunConfig, tokenizer, split: str, rows: list[dict]) -> list[dict]:
        """``evaluate`` of ``model`` under each of ``rows`` (``{site: [H] gate}``): the losses one gated pass
        each, the translations of every row in one decoding pass under their stacked ``[K, H]`` gates."""
        from heads.scoring.session import scoring_mode
        from heads.surgery import gates

        if not rows:
            return []
        data, refs = self.decoding_set(cfg, tokenizer, split)
        with scoring_mode(model):  # gated attention, eval mode; all put back after
            losses = []
            for row in rows:
                with gates(model, row):
                    losses.append(self._decoding_loss(model, data, cfg))
            with gates(model, {site: torch.stack([row[site] for row in rows]) for site in rows[0]}):
                hyps = self.translate(model, cfg, tokenizer, data, copies=len(rows))
        n = len(data)
        return [self._scored(hyps[k * n : (k + 1) * n], refs, loss, split, cfg) for k, loss in enumerate(losses)]

    def _decoding_loss(self, model, data, cfg: RunConfig) -> float:
        """Token-weighted mean loss over the decoded examples."""
        return mean_loss(model, eval_batches(data, cfg.data.batch_size, self.collate),
                         lambda mod, b: self.loss(mod, b, cfg), lambda b: int((b["labels"] != IGNORE).sum()))[0]

    @staticmethod
    def _scored(hyps: list[str], refs: list[str], loss: float, split: str, cfg: RunConfig) -> dict:
        return {**corpus_scores(hyps, refs), "loss": loss, "split": split, "beams": cfg.eval.beams,
                KEY: sentence_statistics(hyps, refs)}

    def translate(self, model, cfg: RunConfig, tokenizer, data, copies: int = 1) -> list[str]:
        """Beam-search translations of encoded pairs; ``copies`` > 1 decodes every batch that many times in one
        pass (k-major, the layout ``[copies, H]`` stacked gates read) and returns the ``copies * len(data)``
        translations copy-major: all of copy 0, then all of copy 1, ..."""
        if copies < 1:
            raise ValueError(f"copies must be >= 1, got {copies}")
        check_decoding(model, cfg, copies)
        was_training = model.training
        model.eval()
        per_copy: list[list[str]] = [[] for _ in range(copies)]
        with torch.no_grad():
            for start in range(0, len(data), cfg.data.batch_size):
                chunk = data[start : start + cfg.data.batch_size]
                ids, mask = pad([s for s, _ in chunk], 0)
                inputs = on_model({"input_ids": ids.repeat(copies, 1), "attention_mask": mask.repeat(copies, 1)}, model)
                out = model.generate(
                    **inputs,
                    num_beams=cfg.eval.beams,
                    max_new_tokens=cfg.eval.max_new_tokens,
                    # No sampling; ties between equal scores go by torch.topk's order (beams) or the first index
                    # (greedy argmax): a fixed function of the scores, the same under ATEN_CPU_CAPABILITY=default
                    # and avx2 (measured). What can move between machines is the scores themselves.
                    do_sample=False,
                )
                # beams expand each row in place (row i -> rows i*beams ...), so the output keeps the k-major rows
                text = tokenizer.batch_decode(out, skip_special_tokens=True)
                for k in range(copies):
                    per_copy[k] += text[k * len(chunk) : (k + 1) * len(chunk)]
        model.train(was_training)
        return [h.strip() for hyps in per_copy for h in hyps]


def check_decoding(model, cfg: RunConfig, copies: int = 1) -> None:
    """Refuse decoding limits ``model`` cannot meet, before any work: more new tokens than a Marian has positions
    (generate would index past its position table), more beams than tokens to choose from, or beams whose scores
    alone (batch x beams x vocabulary, float32) exceed the memory left."""
    config = model.config
    positions = getattr(config, "max_position_embeddings", None)
    e, vocab = cfg.eval, getattr(config, "vocab_size", None)
    if config.model_type == "marian" and positions and e.max_new_tokens > positions:
        raise ConfigError(f"eval.max_new_tokens: {e.max_new_tokens} is not allowed; the model has {positions} "
                          f"positions, so it must be <= {positions}")
    if not vocab:
        return
    if e.beams > vocab:
        raise ConfigError(f"eval.beams: {e.beams} is not allowed; it must be <= the model's vocabulary of {vocab} "
                          "(more beams than tokens to choose from)")
    need, have = 4 * cfg.data.batch_size * copies * e.beams * vocab, available_bytes()
    if have is not None and need > have:
        raise ConfigError(f"eval.beams: {e.beams} beams of {cfg.data.batch_size * copies} sentences need at least "
                          f"{need / 2**30:.1f} GiB for their scores, and {have / 2**30:.1f} GiB of memory is "
                          "available; choose fewer eval.beams or a smaller data.batch_size")


def corpus_scores(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF of ``hyps`` against one reference each (sacrebleu's defaults), with their signatures."""
    import sacrebleu

    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hyps, [refs])
    return {
        "bleu": bleu_score.score,
        "chrf": chrf.corpus_score(hyps, [refs]).score,
        # BLEU's token counts, as sacrebleu reports them beside the score: what the brevity penalty compared
        "hyp_len": bleu_score.sys_len,
        "ref_len": bleu_score.ref_len,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hyps),
    }


def sentence_statistics(hyps: list[str], refs: list[str]) -> dict[str, list]:
    """Per sentence, sacrebleu's sufficient statistics of BLEU and chrF (their sums give the corpus scores of
    :func:`corpus_scores` exactly), so intervals can resample sentences (heads.examples)."""
    from sacrebleu.metrics import BLEU, CHRF

    # sacrebleu has no public per-sentence statistics; these are what its corpus_score and paired bootstrap sum
    return {kind: [list(s) for s in metric._extract_corpus_statistics(hyps, [refs])]
            for kind, metric in (("bleu_stats", BLEU()), ("chrf_stats", CHRF()))}
