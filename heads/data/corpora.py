"""The three offline corpora, built from verse-aligned Bible translations that ship inside a package.

Splits are by book, so no validation or test verse has a near-copy in training (the parallel histories of
Samuel/Kings/Chronicles and the synoptic gospels stay together in training). The held-out books were chosen
because almost none of their verses share most of their word 4-grams with a verse of another book:

- validation: Ecclesiastes (21), Daniel (27), 1 Corinthians (46), James (59) -- 1,124 verses
- test: Lamentations (25), Hosea (28), John (43) -- 1,230 verses
- train: the other 59 books -- 28,748 verses

Tasks (columns):

- ``lm``: World English Bible, one row per verse in canonical order (``text``).
- ``mt``: World English Bible -> Louis Segond 1910 verse pairs (``src``, ``tgt``).
- ``cls``: paraphrase identification (``text_a``, ``text_b``, ``label``): a WEB verse with the same verse in
  the King James Version (1) or with a neighbouring KJV verse of the same chapter, 1 or 2 verses away (0).
- ``coherence``: next-verse coherence (``text_a``, ``text_b``, ``label``): a WEB verse with the verse that
  follows it (1) or with a verse of the same chapter at least 3 verses away (0). Both sides come from one
  translation and one chapter, so word overlap says little (a logistic regression on overlap features reaches
  58 % on the test books, measured): the harder pair task of issue 13.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from heads.data.bible import VerseKey, verses

WEB, KJV, LSG = "4", "k", "l"
VALIDATION_BOOKS = (21, 27, 46, 59)
TEST_BOOKS = (25, 28, 43)
SPLITS = ("train", "validation", "test")
TASKS = ("lm", "mt", "cls", "coherence")
COLUMNS = {"lm": ("text",), "mt": ("src", "tgt"), "cls": ("text_a", "text_b", "label"),
           "coherence": ("text_a", "text_b", "label")}
CLS_LABELS = ("different", "same")  # 0 = neighbouring verse, 1 = the same verse in another translation
COHERENCE_LABELS = ("apart", "next")  # 0 = a verse of the same chapter >= FAR verses away, 1 = the next verse
FAR = 3
SEED = 0
# A neighbouring verse that says nearly what the true one says would be a wrong label, not a hard negative
# (Numbers 7 and Psalm 136 repeat themselves verse after verse).
_MAX_NEGATIVE_OVERLAP = 0.8


def split_of(book: int) -> str:
    """The split a book belongs to."""
    if book in VALIDATION_BOOKS:
        return "validation"
    if book in TEST_BOOKS:
        return "test"
    return "train"


def _by_split(keys: Iterable[VerseKey]) -> dict[str, list[VerseKey]]:
    out: dict[str, list[VerseKey]] = {split: [] for split in SPLITS}
    for key in keys:
        out[split_of(key[0])].append(key)
    return out


def _spread(rows: list, limit: int | None) -> list:
    """At most ``limit`` rows taken evenly across the split, so a small preset still sees every book."""
    if limit is None or len(rows) <= limit:
        return rows
    return [rows[i * len(rows) // limit] for i in range(limit)]


def lm(limit: int | None = None) -> DatasetDict:
    """WEB verses; with ``limit``, the first ``limit`` verses of each split (contiguous text for an LM)."""
    web = verses(WEB)
    parts = _by_split(web)
    features = Features({"text": Value("string")})
    return DatasetDict(
        {
            split: Dataset.from_dict({"text": [web[k] for k in keys[:limit]]}, features=features)
            for split, keys in parts.items()
        }
    )


def mt(limit: int | None = None) -> DatasetDict:
    """WEB -> LSG verse pairs; with ``limit``, ``limit`` pairs spread evenly over each split."""
    web, lsg = verses(WEB), verses(LSG)
    parts = _by_split(k for k in web if k in lsg)
    features = Features({"src": Value("string"), "tgt": Value("string")})
    out = {}
    for split, keys in parts.items():
        kept = _spread(keys, limit)
        out[split] = Dataset.from_dict(
            {"src": [web[k] for k in kept], "tgt": [lsg[k] for k in kept]}, features=features
        )
    return DatasetDict(out)


@lru_cache(maxsize=1 << 16)  # a corpus's verses, not unbounded
def words(text: str) -> frozenset[str]:
    """The lower-cased word set of a text (also the word-overlap baseline's, heads.analysis.overlap)."""
    return frozenset(re.findall(r"\w+", text.lower()))


def jaccard(a: str, b: str) -> float:
    """Word overlap of two texts: shared words over all words."""
    wa, wb = words(a), words(b)
    return len(wa & wb) / max(1, len(wa | wb))


def negatives(key: VerseKey, kjv: dict[VerseKey, str]) -> list[VerseKey]:
    """Neighbouring KJV verses (same chapter, 1-2 verses away) that do not nearly repeat the true verse."""
    book, chapter, verse = key
    near = [(book, chapter, verse + d) for d in (-2, -1, 1, 2)]
    return [n for n in near if n in kjv and jaccard(kjv[n], kjv[key]) < _MAX_NEGATIVE_OVERLAP]


def _pairs(keys: list[VerseKey], web: dict, kjv: dict, rng: random.Random) -> list[tuple[str, str, int]]:
    """Exactly half positives and half negatives; each WEB verse is used once."""
    keys = list(keys)
    rng.shuffle(keys)
    eligible = [k for k in keys if negatives(k, kjv)]
    n = min(len(keys) // 2, len(eligible))
    negative = set(eligible[:n])
    positive = [k for k in keys if k not in negative][:n]
    rows = [(web[k], kjv[k], 1) for k in positive]
    rows += [(web[k], kjv[rng.choice(negatives(k, kjv))], 0) for k in sorted(negative)]
    rng.shuffle(rows)
    return rows


def _balanced_head(rows: list[tuple[str, str, int]], limit: int | None) -> list[tuple[str, str, int]]:
    """The first ``limit`` rows of a shuffled list, still exactly half of each label."""
    if limit is None or len(rows) <= limit:
        return rows
    quota = {1: limit - limit // 2, 0: limit // 2}
    kept = []
    for row in rows:
        if quota[row[2]] > 0:
            quota[row[2]] -= 1
            kept.append(row)
    return kept


def cls(limit: int | None = None, seed: int = SEED) -> DatasetDict:
    """WEB/KJV paraphrase pairs, balanced and shuffled with ``seed``; ``limit`` keeps the balance."""
    web, kjv = verses(WEB), verses(KJV)
    parts = _by_split(k for k in web if k in kjv)
    features = Features(
        {"text_a": Value("string"), "text_b": Value("string"), "label": ClassLabel(names=list(CLS_LABELS))}
    )
    out = {}
    for i, (split, keys) in enumerate(parts.items()):
        rows = _balanced_head(_pairs(keys, web, kjv, random.Random(seed * 1000 + i)), limit)
        columns = {"text_a": [r[0] for r in rows], "text_b": [r[1] for r in rows], "label": [r[2] for r in rows]}
        out[split] = Dataset.from_dict(columns, features=features)
    return DatasetDict(out)


def _coherence_pairs(keys: list[VerseKey], web: dict, rng: random.Random) -> list[tuple[str, str, int]]:
    """Half next-verse pairs, half same-chapter pairs at least ``FAR`` verses apart; each first verse used once."""
    chapter: dict[tuple[int, int], list[VerseKey]] = {}
    for k in web:
        chapter.setdefault(k[:2], []).append(k)
    keys = [k for k in keys if (k[0], k[1], k[2] + 1) in web]  # a verse that has a next one
    rng.shuffle(keys)
    rows = []
    for i, k in enumerate(keys):
        if i % 2 == 0:
            rows.append((web[k], web[(k[0], k[1], k[2] + 1)], 1))
            continue
        far = [c for c in chapter[k[:2]] if abs(c[2] - k[2]) >= FAR]
        if far:
            rows.append((web[k], web[rng.choice(far)], 0))
    positives = [r for r in rows if r[2] == 1]
    negatives = [r for r in rows if r[2] == 0]
    n = min(len(positives), len(negatives))  # a chapter too short for a far verse drops its negative: rebalance
    rows = positives[:n] + negatives[:n]
    rng.shuffle(rows)
    return rows


def coherence(limit: int | None = None, seed: int = SEED) -> DatasetDict:
    """Next-verse coherence pairs from the WEB, balanced and shuffled with ``seed``; ``limit`` keeps the balance."""
    web = verses(WEB)
    parts = _by_split(web)
    features = Features(
        {"text_a": Value("string"), "text_b": Value("string"), "label": ClassLabel(names=list(COHERENCE_LABELS))}
    )
    out = {}
    for i, (split, keys) in enumerate(parts.items()):
        rows = _balanced_head(_coherence_pairs(keys, web, random.Random(seed * 1000 + i)), limit)
        columns = {"text_a": [r[0] for r in rows], "text_b": [r[1] for r in rows], "label": [r[2] for r in rows]}
        out[split] = Dataset.from_dict(columns, features=features)
    return DatasetDict(out)


BUILDERS: dict[str, Callable[..., DatasetDict]] = {"lm": lm, "mt": mt, "cls": cls, "coherence": coherence}


def build(task: str, limit: int | None = None) -> DatasetDict:
    """The offline corpus of ``task`` (one of ``TASKS``)."""
    if task not in BUILDERS:
        raise ValueError(f"unknown task {task!r}; offline corpora exist for {list(TASKS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of rows per split, got {limit}")
    return BUILDERS[task](limit=limit)
