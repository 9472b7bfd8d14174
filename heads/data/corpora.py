"""The three offline corpora, built from verse-aligned Bible translations that ship inside a package.

Splits are by book, so no validation or test verse has a near-copy in training (the parallel histories of
Samuel/Kings/Chronicles and the synoptic gospels stay together in training). The held-out books were chosen
because almost none of their verses share most of their word 4-grams with a verse of another book:

- validation: Ecclesiastes (21), Daniel (27), 1 Corinthians (46), James (59) -- 1,124 verses
- test: Lamentations (25), Hosea (28), John (43) -- 1,230 verses
- train: the other 59 books -- 28,748 verses

Tasks (columns):

- ``lm``: World English Bible, one row per verse in canonical order (``text``); ``lm_kjv`` and ``lm_bbe`` the
  same books in the King James Version and the Bible in Basic English: the LM's text under a distribution shift;
  ``lm_wisdom``, ``lm_prophets``, ``lm_letters`` the WEB books of one genre each (genres as domains, D7);
  ``lm_wiki`` (and ``_fr``, ``_es``) Wikipedia lead extracts, split by article (:mod:`heads.data.wiki`);
  ``lm_bible_wiki`` the WEB verses and the English extracts together (:func:`lm_bible_wiki`): about twice the
  Bible's text, for an LM that would overfit the Bible alone.
- ``mt``: World English Bible -> Louis Segond 1910 verse pairs (``src``, ``tgt``).
- ``mt_en_pt`` and ``mt_pt_en``: World English Bible -> Almeida Corrigida Fiel 1995 (Portuguese) verse pairs and the
  same pairs the other way (``src``, ``tgt``), split by the same books (test: Lamentations, Hosea, John). Where
  Almeida printed a verse with the previous one (32 verses), the pair holds both WEB verses; the 4 verses WEB
  omits are left out: 28,714 train, 1,123 validation, 1,229 test pairs.
- ``cls``: paraphrase identification (``text_a``, ``text_b``, ``label``): a WEB verse with the same verse in
  the King James Version (1) or with a neighbouring KJV verse of the same chapter, 1 or 2 verses away (0).
- ``cls_hard``: paraphrase identification that word overlap cannot solve (``text_a``, ``text_b``, ``label``): a
  WEB verse with the same verse in the Bible in Basic English (1, a free paraphrase in an 850-word vocabulary)
  or with the BBE verse of the same chapter whose words overlap the WEB verse most (0); the two classes are then
  thinned to the same distribution of word overlap, bin by bin, so overlap carries almost no label (a logistic
  regression on overlap features reaches 63.7 % on the test books, measured) while meaning still does.
- ``coherence``: next-verse coherence (``text_a``, ``text_b``, ``label``): a WEB verse with the verse that
  follows it (1) or with a verse of the same chapter at least 3 verses away (0). Both sides come from one
  translation and one chapter, so word overlap says little (a logistic regression on overlap features reaches
  58 % on the test books, measured): the harder pair task of issue 13.
- ``retrieval``: verse retrieval across English translations (``text_a``, ``text_b``): each King James verse with
  the same verse in the Bible in Basic English, in canonical order (the task groups neighbouring verses; the
  split's other verses are the candidates at evaluation).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from heads.data import wiki
from heads.data.bible import WEB_PLACEHOLDERS, VerseKey, verses

WEB, KJV, LSG, BBE, ALMEIDA = "4", "k", "l", "3", "a"
VALIDATION_BOOKS = (21, 27, 46, 59)
TEST_BOOKS = (25, 28, 43)
SPLITS = ("train", "validation", "test")
# The Bible's genres (book numbers, canonical order) behave as domains for the LM (D7): law, narrative history,
# poetry and wisdom, prophecy, gospels and Acts, letters, apocalypse. The genres with a validation book
# (Ecclesiastes, Daniel, 1 Corinthians, James) give per-genre corpora: training books as everywhere, their held-out
# books split by chapter (lm below).
GENRES = {"law": range(1, 6), "history": range(6, 18), "wisdom": range(18, 23), "prophets": range(23, 40),
          "gospels": range(40, 45), "letters": range(45, 66), "apocalyptic": range(66, 67)}
GENRE_CORPORA = ("lm_wisdom", "lm_prophets", "lm_letters")
# Wikipedia lead extracts (heads.data.wiki, an optional package): the pretrained model's held-out text
WIKI_CORPORA = ("lm_wiki", "lm_wiki_fr", "lm_wiki_es")
# the Bible and the English extracts in one corpus (a preset's data.dataset for the lm task)
UNION_CORPORA = ("lm_bible_wiki",)
TASKS = ("lm", "mt", "cls", "cls_hard", "coherence", "lm_kjv", "lm_bbe", *GENRE_CORPORA, *WIKI_CORPORA,
         *UNION_CORPORA, "mt_en_pt", "mt_pt_en", "retrieval")
COLUMNS = {"lm": ("text",), "lm_kjv": ("text",), "lm_bbe": ("text",), "mt": ("src", "tgt"),
           "mt_en_pt": ("src", "tgt"), "mt_pt_en": ("src", "tgt"),
           **{name: ("text",) for name in (*GENRE_CORPORA, *WIKI_CORPORA, *UNION_CORPORA)},
           "cls": ("text_a", "text_b", "label"), "cls_hard": ("text_a", "text_b", "label"),
           "coherence": ("text_a", "text_b", "label"), "retrieval": ("text_a", "text_b")}
CLS_LABELS = ("different", "same")  # 0 = neighbouring verse, 1 = the same verse in another translation
COHERENCE_LABELS = ("apart", "next")  # 0 = a verse of the same chapter >= FAR verses away, 1 = the next verse
FAR = 3
SEED = 0
OVERLAP_BINS = 20  # cls_hard: word-overlap (Jaccard) bins in which the classes are made equally frequent
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


def genre_of(book: int) -> str:
    """The genre (:data:`GENRES`) of a book number."""
    return next(name for name, books in GENRES.items() if book in books)


def lm(limit: int | None = None, code: str = WEB, genre: str | None = None) -> DatasetDict:
    """Verses of one translation (WEB unless ``code``); with ``limit``, the first ``limit`` verses of each split
    (contiguous text for an LM). With ``genre``, that genre's books only, and its held-out books (validation and
    test alike: not every genre has a book in both) split by chapter, odd chapters to validation and even to
    test, so every genre has both splits."""
    text = verses(code)
    if genre is not None:
        text = {k: t for k, t in text.items() if genre_of(k[0]) == genre}
    if code != WEB:  # Basic English leaves placeholders ("...") where it joined verses: no text to model
        text = {k: t for k, t in text.items() if words(t)}
    parts = _by_split(text)
    if genre is not None:
        held_out = sorted(parts["validation"] + parts["test"])
        parts["validation"] = [k for k in held_out if k[1] % 2 == 1]
        parts["test"] = [k for k in held_out if k[1] % 2 == 0]
    features = Features({"text": Value("string")})
    return DatasetDict(
        {
            split: Dataset.from_dict({"text": [text[k] for k in keys[:limit]]}, features=features)
            for split, keys in parts.items()
        }
    )


def lm_kjv(limit: int | None = None) -> DatasetDict:
    """The same books in the King James Version: the LM's text four centuries earlier (a distribution shift)."""
    return lm(limit, KJV)


def lm_bbe(limit: int | None = None) -> DatasetDict:
    """The same books in the Bible in Basic English (an 850-word vocabulary): a larger shift."""
    return lm(limit, BBE)


def lm_wisdom(limit: int | None = None) -> DatasetDict:
    """WEB poetry and wisdom books (Job to the Song of Songs; held out: Ecclesiastes): one genre as a domain."""
    return lm(limit, genre="wisdom")


def lm_prophets(limit: int | None = None) -> DatasetDict:
    """WEB prophets (Isaiah to Malachi; held out: Lamentations, Daniel, Hosea)."""
    return lm(limit, genre="prophets")


def lm_letters(limit: int | None = None) -> DatasetDict:
    """WEB letters (Romans to Jude; held out: 1 Corinthians and James)."""
    return lm(limit, genre="letters")


def interleave(*sources: list[str]) -> list[str]:
    """The rows of every source in one list, each source's in its own order, spread by the share of its text
    (characters) read so far: any prefix (the first evaluation batches, ``data.limit``) holds each source in
    proportion to its text, where one source after the other would evaluate on the first alone."""
    keyed = []
    for i, rows in enumerate(sources):
        total, seen = max(1, sum(len(r) for r in rows)), 0
        for j, row in enumerate(rows):
            keyed.append(((seen + len(row) / 2) / total, i, j, row))  # a row's midpoint in its source's text
            seen += len(row)
    return [row for *_, row in sorted(keyed)]


def lm_bible_wiki(limit: int | None = None) -> DatasetDict:
    """The WEB verses (split by book) and the English Wikipedia extracts (split by article, :mod:`heads.data.wiki`)
    as one LM corpus, interleaved by share of text (:func:`interleave`); each text keeps its own corpus's split,
    so no verse or article is in two splits, and the LM joins each split's rows into its own stream (no window
    straddles two splits). The tokenizer, trained on the training split, is trained on both. With ``limit``, the
    first ``limit`` rows of each interleaved split."""
    bible, extracts = lm(), wiki.lm_wiki()
    features = Features({"text": Value("string")})
    return DatasetDict({split: Dataset.from_dict(
        {"text": interleave(list(bible[split]["text"]), list(extracts[split]["text"]))[:limit]}, features=features)
        for split in SPLITS})


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


def _joined_pairs(a: dict[VerseKey, str], b: dict[VerseKey, str]) -> dict[VerseKey, tuple[str, str]]:
    """Verse pairs of two translations, keyed by their first verse. A verse one side lacks while the other has it
    joins the previous pair of its chapter on the side that has it, when that pair reaches the verse before: in
    this database a translation lacks a verse only where it printed it with the previous one (Almeida: "... na
    terra. 9 E este foi ...", then an empty verse 9). One lacking at a chapter's start is left out."""
    out: dict[VerseKey, tuple[str, str]] = {}
    first = last = None  # the open pair's key and the last verse it holds
    for key in sorted(a.keys() | b.keys()):
        if key in a and key in b:
            out[key] = (a[key], b[key])
            first = last = key
        elif last is not None and key[:2] == last[:2] and key[2] == last[2] + 1:
            src, tgt = out[first]
            out[first] = (f"{src} {a[key]}", tgt) if key in a else (src, f"{tgt} {b[key]}")
            last = key
    return out


@lru_cache(maxsize=1)
def _web_almeida() -> dict[VerseKey, tuple[str, str]]:
    # WEB's placeholders for the verses it omits would pair with real Almeida verses: no translation, left out
    return {k: pair for k, pair in _joined_pairs(verses(WEB), verses(ALMEIDA)).items()
            if pair[0] not in WEB_PLACEHOLDERS}


def _translation_pairs(pairs: dict[VerseKey, tuple[str, str]], limit: int | None) -> DatasetDict:
    """(src, tgt) pairs split by book, canonical order; with ``limit``, ``limit`` pairs spread over each split."""
    features = Features({"src": Value("string"), "tgt": Value("string")})
    out = {}
    for split, keys in _by_split(pairs).items():
        kept = _spread(keys, limit)
        out[split] = Dataset.from_dict(
            {"src": [pairs[k][0] for k in kept], "tgt": [pairs[k][1] for k in kept]}, features=features
        )
    return DatasetDict(out)


def mt_en_pt(limit: int | None = None) -> DatasetDict:
    """WEB -> Almeida (Portuguese) verse pairs; with ``limit``, ``limit`` pairs spread evenly over each split."""
    return _translation_pairs(_web_almeida(), limit)


def mt_pt_en(limit: int | None = None) -> DatasetDict:
    """Almeida -> WEB: the pairs of :func:`mt_en_pt` the other way."""
    return _translation_pairs({k: (pt, en) for k, (en, pt) in _web_almeida().items()}, limit)


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


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """:func:`jaccard` of two word sets (without building the union)."""
    common = len(a & b)
    return common / max(1, len(a) + len(b) - common)


def _overlap_matched_pairs(keys: list[VerseKey], web: dict, other: dict,
                           rng: random.Random) -> list[tuple[str, str, int]]:
    """Every verse as a positive (WEB, other) and with its hardest negative: the verse of its chapter, in the
    ``other`` translation, whose words overlap the WEB verse most (ties: the earliest), near-repeats of the true
    verse left out (they would be wrong labels). Then, per overlap bin, as many of each label as the rarer one
    has there, so the two labels share one distribution of word overlap."""
    bags = {k: words(t) for k, t in other.items()}
    chapters: dict[tuple[int, int], list[VerseKey]] = {}
    for k in sorted(other):
        chapters.setdefault(k[:2], []).append(k)
    binned: dict[int, tuple[list, list]] = {}
    for k in sorted(keys):
        anchor = words(web[k])
        rows = [(web[k], other[k], 1, _overlap(anchor, bags[k]))]
        ranked = sorted((-_overlap(anchor, bags[c]), c) for c in chapters[k[:2]] if c != k)
        best = next(((-score, c) for score, c in ranked if _overlap(bags[c], bags[k]) < _MAX_NEGATIVE_OVERLAP),
                    None)
        if best is not None:
            rows.append((web[k], other[best[1]], 0, best[0]))
        for a, b, label, overlap in rows:
            slot = min(OVERLAP_BINS - 1, int(overlap * OVERLAP_BINS))
            binned.setdefault(slot, ([], []))[label].append((a, b, label))
    out = []
    for slot in sorted(binned):
        negatives, positives = binned[slot]
        rng.shuffle(negatives)
        rng.shuffle(positives)
        n = min(len(negatives), len(positives))
        out += positives[:n] + negatives[:n]
    rng.shuffle(out)
    return out


@lru_cache(maxsize=2)  # a few seconds per build; a limit is a head of the same rows
def _cls_hard_rows(seed: int) -> dict[str, list[tuple[str, str, int]]]:
    web, bbe = verses(WEB), verses(BBE)
    # Basic English joins some verses into one and leaves the others a placeholder ("...", "***"): no verse to
    # pair (the joined verse still pairs with its own WEB verse, which it contains)
    bbe = {k: t for k, t in bbe.items() if words(t)}
    parts = _by_split(k for k in web if k in bbe)
    return {split: _overlap_matched_pairs(keys, web, bbe, random.Random(seed * 1000 + i))
            for i, (split, keys) in enumerate(parts.items())}


def cls_hard(limit: int | None = None, seed: int = SEED) -> DatasetDict:
    """WEB/BBE paraphrase pairs with overlap-matched hardest negatives, balanced and shuffled with ``seed``."""
    features = Features(
        {"text_a": Value("string"), "text_b": Value("string"), "label": ClassLabel(names=list(CLS_LABELS))}
    )
    out = {}
    for split, pairs in _cls_hard_rows(seed).items():
        rows = _balanced_head(pairs, limit)
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


def retrieval(limit: int | None = None) -> DatasetDict:
    """KJV -> BBE verse pairs in canonical order, split by book; with ``limit``, ``limit`` pairs spread evenly
    over each split."""
    kjv, bbe = verses(KJV), verses(BBE)
    features = Features({"text_a": Value("string"), "text_b": Value("string")})
    out = {}
    for split, keys in _by_split(k for k in kjv if k in bbe).items():
        kept = _spread(keys, limit)
        out[split] = Dataset.from_dict({"text_a": [kjv[k] for k in kept], "text_b": [bbe[k] for k in kept]},
                                       features=features)
    return DatasetDict(out)


BUILDERS: dict[str, Callable[..., DatasetDict]] = {"lm": lm, "mt": mt, "cls": cls, "cls_hard": cls_hard,
                                                   "coherence": coherence, "lm_kjv": lm_kjv, "lm_bbe": lm_bbe,
                                                   "lm_wisdom": lm_wisdom, "lm_prophets": lm_prophets,
                                                   "lm_letters": lm_letters, "lm_wiki": wiki.lm_wiki,
                                                   "lm_wiki_fr": wiki.lm_wiki_fr, "lm_wiki_es": wiki.lm_wiki_es,
                                                   "lm_bible_wiki": lm_bible_wiki,
                                                   "mt_en_pt": mt_en_pt, "mt_pt_en": mt_pt_en,
                                                   "retrieval": retrieval}


def build(task: str, limit: int | None = None) -> DatasetDict:
    """The offline corpus of ``task`` (one of ``TASKS``)."""
    if task not in BUILDERS:
        raise ValueError(f"unknown task {task!r}; offline corpora exist for {list(TASKS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of rows per split, got {limit}")
    return BUILDERS[task](limit=limit)
