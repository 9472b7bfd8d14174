"""The byte-level BPE tokenizer: fixed special ids, training split only, cached, deterministic."""

from __future__ import annotations

import pytest
from datasets import Dataset

from heads.data import tokenizer as tk
from heads.data.prepare import load_prepared, prepare

VOCAB = 600


@pytest.fixture(scope="module")
def mt_folder(tmp_path_factory):
    return prepare("mt", "offline", root=tmp_path_factory.mktemp("data"), limit=300)


@pytest.fixture(scope="module")
def tok(mt_folder):
    return tk.tokenizer(mt_folder, VOCAB)


def test_special_ids_are_fixed(tok):
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.convert_ids_to_tokens([0, 1, 2, 3]) == ["<pad>", "<eos>", "<bos>", "<unk>"]
    assert len(tok) == VOCAB


def test_encode_pad_and_decode_round_trip(tok):
    texts = ["In the beginning God created the heavens.", "Au commencement, Dieu créa les cieux et la terre!"]
    batch = tok(texts, padding=True)
    assert set(batch) == {"input_ids", "attention_mask"}
    short = batch["input_ids"][0]
    assert short[sum(batch["attention_mask"][0]) - 1] == tok.eos_token_id
    assert short[-1] == tok.pad_token_id
    assert tok.batch_decode(batch["input_ids"], skip_special_tokens=True) == texts
    pair = tok("a b", "c d")["input_ids"]
    assert pair[0] == tok.bos_token_id and pair.count(tok.eos_token_id) == 2


def test_joint_vocabulary_from_the_training_split_only(mt_folder, tok):
    train = load_prepared(mt_folder)["train"]
    seen = list(tk.texts(train))
    assert len(seen) == 2 * len(train)  # source and target texts both feed the vocabulary
    vocab = tok.get_vocab()
    # Byte-level tokens spell "é" as "Ã©": French merges are in the joint vocabulary beside English ones.
    assert any("Ã©" in piece and len(piece) > 2 for piece in vocab)
    assert "Ġthe" in vocab


def test_cached_and_reused(mt_folder, tok, monkeypatch):
    cached = mt_folder / f"tokenizer-{VOCAB}.json"
    assert cached.is_file()
    monkeypatch.setattr(tk, "train", lambda *a, **k: pytest.fail("retrained a cached tokenizer"))
    assert tk.tokenizer(mt_folder, VOCAB).get_vocab() == tok.get_vocab()
    # The cache sits beside the data but is not part of its checksum.
    load_prepared(mt_folder)


def test_training_is_deterministic(mt_folder):
    train = load_prepared(mt_folder)["train"]
    assert tk.train(train, 400).to_str() == tk.train(train, 400).to_str()


def test_blank_texts_are_skipped_and_vocab_checked():
    data = Dataset.from_dict({"src": ["a b", "", "  \n"], "tgt": ["c", "d e", ""], "n": [1, 2, 3]})
    assert list(tk.texts(data)) == ["a b", "c", "d e"]
    assert tk.text_columns(data) == ["src", "tgt"]
    with pytest.raises(ValueError, match="at least"):
        tk.train(data, 100)
