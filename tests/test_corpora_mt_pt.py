"""The English <-> Portuguese corpora (WEB and Almeida): book splits, swapped directions, Almeida's own quirks."""

from __future__ import annotations

import re

import pytest

from heads.data import bible, corpora, prepare

# Anything that is not verse text: inline verse numbers and references, markup, brackets, control characters,
# the database's placeholders, stray spaces.
LEFTOVER = re.compile(r"\d|\(\d+[:.]\d+|<[^>]*>|&\w+;|[\[\]{}`\x00-\x1f\x7f]|Verszeile|by amos|^\s|\s$|\s\s")
JOHN_3_16 = ("Porque Deus amou o mundo de tal maneira que deu o seu Filho unigênito, para que todo aquele que nele "
             "crê não pereça, mas tenha a vida eterna.")


@pytest.fixture(scope="module")
def en_pt():
    return corpora.mt_en_pt()


@pytest.fixture(scope="module")
def pt_en():
    return corpora.mt_pt_en()


@pytest.fixture(scope="module")
def web():
    return bible.verses(corpora.WEB)


@pytest.fixture(scope="module")
def almeida():
    return bible.verses(corpora.ALMEIDA)


def test_registered_like_mt():
    assert bible.TRANSLATIONS["a"].startswith("Almeida")
    for name in ("mt_en_pt", "mt_pt_en"):
        assert name in corpora.TASKS and corpora.BUILDERS[name] is getattr(corpora, name)
        assert corpora.COLUMNS[name] == corpora.COLUMNS["mt"] == ("src", "tgt")
        assert prepare.offline_corpus("mt", name) == name  # the mt task can read it offline


def test_three_splits_of_the_same_books_as_mt(en_pt, pt_en):
    sizes = {"train": 28714, "validation": 1123, "test": 1229}  # mt's 28748/1124/1230 less merged and WEB-less
    for data in (en_pt, pt_en):
        assert list(data) == list(corpora.SPLITS)
        assert {split: len(d) for split, d in data.items()} == sizes
        assert data["test"].column_names == ["src", "tgt"]


def test_test_split_holds_the_test_books_verses_in_order(en_pt, almeida):
    # Almeida's side is one verse per row: exactly the test books' verses (Lamentations, Hosea, John)
    assert en_pt["test"]["tgt"] == [t for k, t in almeida.items() if k[0] in corpora.TEST_BOOKS]
    assert en_pt["validation"]["tgt"] == [t for k, t in almeida.items() if k[0] in corpora.VALIDATION_BOOKS]
    assert en_pt["train"][0] == {"src": "In the beginning God created the heavens and the earth.",
                                 "tgt": "No princípio criou Deus os céus e a terra."}


def test_pt_en_is_en_pt_with_columns_swapped(en_pt, pt_en):
    for split in corpora.SPLITS:
        assert pt_en[split]["src"] == en_pt[split]["tgt"]
        assert pt_en[split]["tgt"] == en_pt[split]["src"]


def test_known_verses_read_as_expected(en_pt, pt_en, web):
    rows = dict(zip(en_pt["test"]["src"], en_pt["test"]["tgt"], strict=True))
    assert rows[web[(43, 3, 16)]] == JOHN_3_16
    assert rows[web[(43, 1, 1)]] == "No princípio era o Verbo, e o Verbo estava com Deus, e o Verbo era Deus."
    assert rows["Jesus wept."] == "Jesus chorou."
    back = dict(zip(pt_en["test"]["src"], pt_en["test"]["tgt"], strict=True))
    assert back[JOHN_3_16].startswith("For God so loved the world, that he gave his one and only Son")


def test_a_verse_almeida_printed_with_the_previous_one_pairs_with_both_web_verses(en_pt, web, almeida):
    # Hosea 2:7 holds 2:8 ("... do que agora. 8 Ela, pois, ..."); 2:8 is an empty line in the database
    assert (28, 2, 8) not in almeida
    rows = dict(zip(en_pt["test"]["tgt"], en_pt["test"]["src"], strict=True))
    assert rows[almeida[(28, 2, 7)]] == f"{web[(28, 2, 7)]} {web[(28, 2, 8)]}"
    assert web[(28, 2, 8)] not in en_pt["test"]["src"]


def test_no_row_holds_anything_but_text(en_pt):
    dirty = [text for data in en_pt.values() for column in ("src", "tgt") for text in data[column]
             if LEFTOVER.search(text) or not text]
    assert dirty == []


def test_limit_is_deterministic_and_spread_over_the_test_books(almeida):
    data = corpora.build("mt_en_pt", limit=30)
    assert {len(d) for d in data.values()} == {30}
    assert corpora.mt_en_pt(limit=30)["test"][:] == data["test"][:]
    assert corpora.mt_pt_en(limit=30)["test"]["tgt"] == data["test"]["src"]
    book = {t: k[0] for k, t in almeida.items()}
    assert {book[t] for t in data["test"]["tgt"]} == set(corpora.TEST_BOOKS)


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        # Genesis 10:8: verse 9 printed after its bare number (and verse 9 itself the placeholder below)
        ("na terra. 9 E este foi poderoso caçador", "na terra. E este foi poderoso caçador"),
        ("Verszeile ohne Text", ""),
        # 1 Kings 22:44: the Hebrew verse number inline, with a dot
        ("(22.45) E Jeosafá esteve em paz com o rei de Israel.", "E Jeosafá esteve em paz com o rei de Israel."),
        # 3 John 1:14: a reference mid-verse, as in Louis Segond
        ("face a face. (1:15) Paz seja contigo.", "face a face. Paz seja contigo."),
        # 2 Samuel 22:51: a DEL character inside a word
        ("com a sua descendê\x7fncia para sempre.", "com a sua descendência para sempre."),
    ],
)
def test_clean_almeida_quirks(raw, cleaned):
    assert bible.clean(raw, corpora.ALMEIDA) == cleaned


def test_chapter_openings_lose_their_capitals_but_not_the_divine_name(almeida):
    assert almeida[(41, 1, 1)] == "Princípio do Evangelho de Jesus Cristo, Filho de Deus;"  # PRINCÍPIO
    assert almeida[(41, 2, 1)].startswith("E alguns dias depois")  # E ALGUNS
    assert almeida[(13, 1, 1)] == "Adão, Sete, Enos,"  # ADÃO: a name keeps its capital
    assert almeida[(11, 20, 1)].startswith("E Ben-Hadade,")
    assert almeida[(19, 23, 1)] == "O SENHOR é o meu pastor, nada me faltará."
    assert almeida[(19, 22, 1)].startswith("Deus meu, Deus meu")  # DEUS opening a chapter is the drop cap
    assert almeida[(41, 1, 2)].startswith("Como está escrito")  # other verses untouched
