"""The Bible database and the offline corpora: cleaning on real verses, book splits, the paraphrase pairs."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter, defaultdict

import pytest

from heads.data import bible, corpora

# (raw text as stored in the database, what clean() must make of it)
REAL_VERSES = [
    # WEB, Genesis 1:2: a backtick as the apostrophe
    (
        "Now the earth was formless and empty. Darkness was on the surface of the deep. God`s Spirit was hovering "
        "over the surface of the waters.",
        "Now the earth was formless and empty. Darkness was on the surface of the deep. God's Spirit was hovering "
        "over the surface of the waters.",
    ),
    # WEB, Leviticus 2:12: a bracketed supplied word glued to a hyphen
    (
        "As an offering of first -[fruits] you shall offer them to Yahweh: but they shall not come up for a sweet "
        "savor on the altar.",
        "As an offering of first-fruits you shall offer them to Yahweh: but they shall not come up for a sweet "
        "savor on the altar.",
    ),
    # WEB, Leviticus 3:3: a plain bracketed supplied word
    (
        "He shall offer of it his offering, [even] an offering made by fire to Yahweh;",
        "He shall offer of it his offering, even an offering made by fire to Yahweh;",
    ),
    # LSG, Exodus 8:1: the French verse number inline
    (
        "(7:26) L'Éternel dit à Moïse: Va vers Pharaon, et tu lui diras: Ainsi parle l'Éternel: Laisse aller mon "
        "peuple, afin qu'il me serve.",
        "L'Éternel dit à Moïse: Va vers Pharaon, et tu lui diras: Ainsi parle l'Éternel: Laisse aller mon peuple, "
        "afin qu'il me serve.",
    ),
    # LSG, Psalm 3:1: the psalm's title merged into verse 1 between "(3:1)" and "(3:2)"
    (
        "(3:1) Psaume de David. A l'occasion de sa fuite devant Absalom, son fils. (3:2) O Éternel, que mes "
        "ennemis sont nombreux! Quelle multitude se lève contre moi!",
        "O Éternel, que mes ennemis sont nombreux! Quelle multitude se lève contre moi!",
    ),
    # LSG, 3 John 1:14: a reference in the middle of a verse
    (
        "J'espère te voir bientôt, et nous parlerons de bouche à bouche. (1:15) Que la paix soit avec toi!",
        "J'espère te voir bientôt, et nous parlerons de bouche à bouche. Que la paix soit avec toi!",
    ),
    # LSG, 2 Corinthians 13:12: a half-verse reference
    ("(13:12b) Tous les saints vous saluent.", "Tous les saints vous saluent."),
    # LSG, Leviticus 6:2: a reference that lost its closing parenthesis
    ("(5:21 Lorsque quelqu'un péchera", "Lorsque quelqu'un péchera"),
    # LSG, 1 Samuel 6:19: brackets inside a verse
    ("il frappa [cinquante mille] soixante-dix hommes", "il frappa cinquante mille soixante-dix hommes"),
    # WEB, Psalm 1:6 and Job 42:17: the next psalm's heading appended to the verse
    (
        "For Yahweh knows the way of the righteous, But the way of the wicked shall perish. Psalm 2",
        "For Yahweh knows the way of the righteous, But the way of the wicked shall perish.",
    ),
    ("So Job died, being old and full of days. BOOK I Psalm 1", "So Job died, being old and full of days."),
    (
        "Salvation belongs to Yahweh. Your blessing be on your people. Selah. Psalm 4 For the Chief Musician; on "
        "stringed instruments. A Psalm by David.",
        "Salvation belongs to Yahweh. Your blessing be on your people. Selah.",
    ),
    # Psalm 119's acrostic letters: appended by WEB, leading in KJV
    (
        "I will observe your statutes. Don`t utterly forsake me. BEIT",
        "I will observe your statutes. Don't utterly forsake me.",
    ),
    ("endures forever. SIN AND SHIN", "endures forever."),
    ("ALEPH. Blessed are the undefiled in the way", "Blessed are the undefiled in the way"),
    # KJV keeps trailing spaces on some verses
    ("And the LORD spake unto Moses, saying, ", "And the LORD spake unto Moses, saying,"),
]


@pytest.mark.parametrize(("raw", "cleaned"), REAL_VERSES)
def test_clean_real_verses(raw, cleaned):
    assert bible.clean(raw) == cleaned


def test_clean_characters_not_in_this_database():
    # Soft hyphens and typographic apostrophes occur in other editions; none survive cleaning.
    assert bible.clean("bé\xadni\xadsse l’Éternel ‘x´ y\u200b z") == "bénisse l'Éternel 'x' y z"
    assert bible.clean("  (1:1)  \n ") == ""
    assert bible.clean("a\t\n b") == "a b"


def test_database_is_opened_read_only():
    with pytest.raises(sqlite3.OperationalError):
        with bible.connect() as db:
            db.execute("DELETE FROM bible WHERE bbName = 'zz'")


@pytest.mark.parametrize("code", sorted(bible.TRANSLATIONS))
def test_verses_are_clean_and_aligned(code):
    text = bible.verses(code)
    # Basic English leaves 19 verses empty ("[]", or only the KJV verse reference where it joined verses)
    # Almeida prints 32 verses inside the previous one ("Verszeile ohne Text" in their own place)
    assert len(text) == {corpora.BBE: 31083, corpora.ALMEIDA: 31070}.get(code, 31102)
    assert list(text)[:2] == [(1, 1, 1), (1, 1, 2)]
    dirty = re.compile(r"[`\[\]\xad’]|\(\d+:\d+|Psalm \d|^\s|\s$|\s\s")
    assert [v for v in text.values() if dirty.search(v)] == []
    assert all(text.values())


def test_verses_examples_and_unknown_code():
    web = bible.verses(corpora.WEB)
    assert "God's Spirit" in web[(1, 1, 2)]
    assert web[(43, 11, 35)] == "Jesus wept."
    assert bible.verses(corpora.LSG)[(19, 3, 1)].startswith("O Éternel")
    with pytest.raises(ValueError, match="known codes"):
        bible.verses("no such code")


def _books_by_text(code: str) -> dict[str, set[int]]:
    books = defaultdict(set)
    for (book, _, _), text in bible.verses(code).items():
        books[text].add(book)
    return books


def test_splits_are_whole_books():
    held_out = set(corpora.VALIDATION_BOOKS) | set(corpora.TEST_BOOKS)
    assert not set(corpora.VALIDATION_BOOKS) & set(corpora.TEST_BOOKS)
    assert {corpora.split_of(b) for b in range(1, 67)} == set(corpora.SPLITS)
    assert {b for b in range(1, 67) if corpora.split_of(b) != "train"} == held_out
    # Books from both testaments in each held-out split.
    for books in (corpora.VALIDATION_BOOKS, corpora.TEST_BOOKS):
        assert min(books) <= 39 < max(books)


def test_lm_columns_sizes_and_no_book_overlap():
    data = corpora.lm()
    assert {split: len(d) for split, d in data.items()} == {"train": 28748, "validation": 1124, "test": 1230}
    books = _books_by_text(corpora.WEB)
    seen = {}
    for split, d in data.items():
        assert d.column_names == ["text"]
        # Every text can come from a book of its own split; texts found in one book only pin that book down.
        assert all(any(corpora.split_of(b) == split for b in books[t]) for t in d["text"])
        seen[split] = {next(iter(books[t])) for t in d["text"] if len(books[t]) == 1}
    assert seen["validation"] == set(corpora.VALIDATION_BOOKS)
    assert seen["test"] == set(corpora.TEST_BOOKS)
    assert not seen["train"] & (seen["validation"] | seen["test"])


def test_shifted_lm_corpora_hold_the_same_books_in_other_translations():
    web = corpora.lm(limit=50)
    for name, code in (("lm_kjv", corpora.KJV), ("lm_bbe", corpora.BBE)):
        data = corpora.build(name, limit=50)
        text = bible.verses(code)
        for split in corpora.SPLITS:
            assert data[split].column_names == ["text"] and len(data[split]) == 50
            assert set(data[split]["text"]) <= set(text.values())
        # the held-out books, in another wording: the first validation verse is Ecclesiastes 1:1 in both
        assert data["validation"][0]["text"] == text[(21, 1, 1)] != web["validation"][0]["text"]
    full = corpora.lm_bbe()
    assert all(corpora.words(t) for t in full["train"]["text"])  # Basic English's placeholders are not text
    assert len(full["train"]) < 28748 and len(full["validation"]) == 1124


def test_genre_corpora_hold_one_genres_books_with_the_held_out_ones_split_by_chapter(tmp_path):
    from heads.data.prepare import load_prepared, prepare

    web = bible.verses(corpora.WEB)
    assert corpora.genre_of(21) == "wisdom" and corpora.genre_of(27) == "prophets" and corpora.genre_of(59) == "letters"
    assert sorted(b for books in corpora.GENRES.values() for b in books) == list(range(1, 67))  # every book once
    for name in corpora.GENRE_CORPORA:
        genre = name.removeprefix("lm_")
        data = corpora.build(name)
        for split, chapters in (("validation", 1), ("test", 0)):
            held_out = set(data[split]["text"])
            keys = [k for k, t in web.items() if t in held_out and corpora.split_of(k[0]) != "train"]
            assert keys and all(corpora.genre_of(k[0]) == genre for k in keys)
            assert {k[1] % 2 for k in keys} == {chapters}  # odd chapters validate, even ones test
        assert len(data["train"]) > len(data["validation"]) > 0
    assert corpora.build("lm_letters")["validation"][0]["text"] == web[(46, 1, 1)]  # 1 Corinthians 1:1
    path = prepare("lm", root=tmp_path, dataset="lm_wisdom", limit=20)
    assert {s: len(d) for s, d in load_prepared(path).items()} == {"train": 20, "validation": 20, "test": 20}


def test_mt_pairs_are_aligned_verses():
    data = corpora.mt()
    web, lsg = bible.verses(corpora.WEB), bible.verses(corpora.LSG)
    assert data["train"].column_names == ["src", "tgt"]
    assert data["train"][0] == {"src": web[(1, 1, 1)], "tgt": lsg[(1, 1, 1)]}
    assert {split: len(d) for split, d in data.items()} == {"train": 28748, "validation": 1124, "test": 1230}
    john = data["test"].filter(lambda row: row["src"] == web[(43, 11, 35)])
    assert john["tgt"] == ["Jésus pleura."]


def test_mt_limit_spreads_over_books():
    data = corpora.mt(limit=60)
    assert {len(d) for d in data.values()} == {60}
    books = _books_by_text(corpora.WEB)
    assert len({b for t in data["test"]["src"] for b in books[t]}) == len(corpora.TEST_BOOKS)
    assert corpora.mt(limit=60)["train"]["tgt"] == data["train"]["tgt"]


def test_lm_limit_keeps_contiguous_verses():
    data = corpora.lm(limit=5)
    web = bible.verses(corpora.WEB)
    assert data["train"]["text"] == [web[(1, 1, v)] for v in range(1, 6)]


def test_cls_balanced_with_neighbouring_negatives():
    data = corpora.cls()
    web_keys = defaultdict(list)
    for key, text in bible.verses(corpora.WEB).items():
        web_keys[text].append(key)
    kjv = bible.verses(corpora.KJV)
    assert data["train"].features["label"].names == ["different", "same"]
    for split, d in data.items():
        assert d.column_names == ["text_a", "text_b", "label"]
        counts = Counter(d["label"])
        assert counts[0] == counts[1] == len(d) // 2, split
        for row in d:
            # The same text can occur in several books; only the ones of this split can have produced the row.
            keys = [k for k in web_keys[row["text_a"]] if corpora.split_of(k[0]) == split]
            assert keys
            if row["label"] == 1:
                assert any(kjv[k] == row["text_b"] for k in keys)
            else:
                near = [(b, c, v + off) for b, c, v in keys for off in (-2, -1, 1, 2)]
                assert any(kjv.get(n) == row["text_b"] for n in near)
                assert all(kjv[k] != row["text_b"] for k in keys)
    # Shuffled: the labels are not in blocks.
    labels = data["test"]["label"][:40]
    assert 0 < sum(labels) < 40


def test_cls_is_deterministic_and_limit_keeps_balance():
    small = corpora.cls(limit=51)
    again = corpora.cls(limit=51)
    for split in corpora.SPLITS:
        assert small[split][:] == again[split][:]
        assert len(small[split]) == 51
        assert Counter(small[split]["label"]) == {1: 26, 0: 25}


def test_coherence_pairs_a_verse_with_the_next_or_a_far_one_of_its_chapter_and_overlap_cannot_tell():
    """The harder pair task: positives are (v, v+1), negatives (v, w) of one chapter with |v - w| >= 3; both
    sides WEB, splits by book, balanced; a word-overlap classifier stays near chance (<= 65 %, issue 13)."""
    from heads.analysis.overlap import overlap_baseline

    data = corpora.coherence()
    web = bible.verses(corpora.WEB)
    keys = defaultdict(list)
    for key, text in web.items():
        keys[text].append(key)
    assert data["train"].features["label"].names == ["apart", "next"]
    for split, d in data.items():
        assert Counter(d["label"])[0] == Counter(d["label"])[1] == len(d) // 2 and len(d) > 400, split
        for row in list(d)[:300]:
            firsts = [k for k in keys[row["text_a"]] if corpora.split_of(k[0]) == split]
            seconds = keys[row["text_b"]]
            gaps = [b[2] - a[2] for a in firsts for b in seconds if a[:2] == b[:2]]
            assert (1 in gaps) if row["label"] == 1 else any(abs(g) >= corpora.FAR for g in gaps), row
    pairs = {s: list(zip(d["text_a"], d["text_b"], d["label"], strict=True)) for s, d in data.items()}
    assert overlap_baseline(pairs["train"][:6000], pairs["test"])["accuracy"] <= 0.65
    assert corpora.coherence(limit=51)["test"][:] == corpora.coherence(limit=51)["test"][:]


def test_cls_hard_pairs_a_verse_with_its_paraphrase_or_its_chapters_closest_verse_and_overlap_cannot_tell():
    """The harder paraphrase task: text_a a WEB verse, text_b the same verse in Basic English (1) or the BBE
    verse of the same chapter most like it (0); labels balanced and equally frequent in every overlap bin, so a
    word-overlap classifier stays <= 65 % (issue 13), where the plain cls task lets it reach 98 %."""
    from heads.analysis.overlap import overlap_baseline

    data = corpora.cls_hard()
    web, bbe = bible.verses(corpora.WEB), bible.verses(corpora.BBE)
    where = defaultdict(list)
    for key, text in bbe.items():
        where[text].append(key)
    by_web = defaultdict(list)  # a few verses repeat word for word (Joshua 10:15 and 10:43)
    for key, text in web.items():
        by_web[text].append(key)
    for split, d in data.items():
        assert Counter(d["label"])[0] == Counter(d["label"])[1] and len(d) > 400, split
        bins = Counter()
        for row in d:
            assert corpora.words(row["text_b"]), row  # no Basic English placeholder of a joined verse
            firsts = [k for k in by_web[row["text_a"]] if corpora.split_of(k[0]) == split]
            b = where[row["text_b"]]
            assert any((a in b) if row["label"] == 1 else any(k[:2] == a[:2] and k != a for k in b)
                       for a in firsts), row
            slot = min(corpora.OVERLAP_BINS - 1, int(corpora.jaccard(row["text_a"], row["text_b"]) * 20))
            bins[slot, row["label"]] += 1
        assert all(bins[slot, 0] == bins[slot, 1] for slot, _ in bins), split
    pairs = {s: list(zip(d["text_a"], d["text_b"], d["label"], strict=True)) for s, d in data.items()}
    assert overlap_baseline(pairs["train"], pairs["test"])["accuracy"] <= 0.65
    assert corpora.cls_hard(limit=51)["test"][:] == corpora.cls_hard(limit=51)["test"][:]


def test_near_repeats_are_not_negatives():
    # Numbers 7 repeats itself; a neighbour saying the same as the true verse would be a wrong label.
    kjv = bible.verses(corpora.KJV)
    for key in [(4, 7, 14), (19, 136, 5), (1, 1, 1)]:
        for n in corpora.negatives(key, kjv):
            assert kjv[n] != kjv[key]
            assert abs(n[2] - key[2]) in (1, 2) and n[:2] == key[:2]


def test_build_rejects_unknown_task_and_bad_limit():
    with pytest.raises(ValueError, match="unknown task"):
        corpora.build("summarisation")
    with pytest.raises(ValueError, match="positive"):
        corpora.build("lm", limit=0)
