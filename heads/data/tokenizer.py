"""A byte-level BPE tokenizer trained on a prepared corpus's training split, cached beside the data.

Special tokens have fixed ids the models rely on: ``<pad>`` = 0, ``<eos>`` = 1, ``<bos>`` = 2, ``<unk>`` = 3.
Encoding appends ``<eos>`` to a single text (an LM's document end, Marian's source and target end); a pair
becomes ``<bos> a <eos> b <eos>`` with ``<bos>`` in the place BERT pools from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from datasets import Dataset, Value
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from heads.config import MIN_VOCAB
from heads.data.prepare import CorruptDataError, load_prepared, sha256_file
from heads.io import InputError, write_text

SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>")
PAD_ID, EOS_ID, BOS_ID, UNK_ID = range(len(SPECIAL_TOKENS))


def text_columns(data: Dataset) -> list[str]:
    """The string columns (lm: text; mt: src and tgt, for a joint vocabulary; cls: text_a and text_b)."""
    return [name for name, feature in data.features.items() if feature == Value("string")]


def texts(data: Dataset, batch_size: int = 1000) -> Iterator[str]:
    """Every non-blank text of every string column, row by row."""
    columns = text_columns(data)
    for start in range(0, len(data), batch_size):
        batch = data[start : start + batch_size]
        for column in columns:
            yield from (t for t in batch[column] if t and not t.isspace())


def train(data: Dataset, vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer with the fixed special tokens, trained on ``data``."""
    if vocab_size < MIN_VOCAB:
        raise InputError(f"vocab_size must be at least {MIN_VOCAB} (256 bytes + special tokens), got {vocab_size}")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),  # in this order, so they get ids 0..3
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts(data), trainer=trainer, length=len(data))
    tok.post_processor = processors.TemplateProcessing(
        single="$A <eos>",
        pair="<bos> $A <eos> $B:1 <eos>:1",
        special_tokens=[("<eos>", EOS_ID), ("<bos>", BOS_ID)],
    )
    for token, expected in zip(SPECIAL_TOKENS, range(len(SPECIAL_TOKENS)), strict=True):
        if tok.token_to_id(token) != expected:
            raise RuntimeError(f"special token {token} got id {tok.token_to_id(token)}, expected {expected}")
    return tok


def wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """The transformers tokenizer around ``tok`` (padding, ``batch_decode``, ``save_pretrained``)."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        # Llama and Marian take no token_type_ids; BERT runs without them (zeros) when not asked for.
        model_input_names=["input_ids", "attention_mask"],
        # The decoder restores the exact text; transformers' "clean up" would glue spaces before punctuation.
        clean_up_tokenization_spaces=False,
    )


def tokenizer(prepared: str | os.PathLike, vocab_size: int = 8000) -> PreTrainedTokenizerFast:
    """The tokenizer for a prepared corpus, trained on its training split once and cached as
    ``tokenizer-<vocab_size>.json`` in the prepared folder, its sha256 beside it (``.sha256``): a file
    swapped or edited since is refused, as the data's own CHECKSUM refuses edited data."""
    folder = Path(prepared)
    cached = folder / f"tokenizer-{vocab_size}.json"
    digest = cached.with_suffix(".sha256")
    if not cached.is_file():
        tok = train(load_prepared(folder)["train"], vocab_size)
        # Written under a temporary name and renamed, so a half-written file is never reused.
        tmp = folder / f".{cached.name}.tmp-{os.getpid()}"
        tok.save(str(tmp))
        write_text(digest, f"{sha256_file(tmp)}  {cached.name}\n")
        os.replace(tmp, cached)
    actual = sha256_file(cached)
    if not digest.is_file():  # cached before digests were recorded: trusted once, checked from now on
        write_text(digest, f"{actual}  {cached.name}\n")
    recorded = digest.read_text().split()[0] if digest.read_text().strip() else ""
    if recorded != actual:
        raise CorruptDataError(
            f"{cached}: not the tokenizer trained here (sha256 {actual[:12]}, recorded {recorded[:12]} in "
            f"{digest.name}); delete both files to train it again"
        )
    try:
        return wrap(Tokenizer.from_file(str(cached)))
    except Exception as exc:  # the Rust loader's error for a truncated or foreign file
        raise CorruptDataError(f"{cached}: unreadable tokenizer ({exc}); delete it and its {digest.name}") from exc
