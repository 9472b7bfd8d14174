"""Facts a claim's words state about its own runs, read from them: a note says "81 of 270 query heads" or
"over 16 windows" from the runs' tidy rows, never from a number typed into claims.yaml, so the same claim on
another model or at another preset's sizes says what was measured there.

A claim declares ``facts:`` (name -> fact selector) and writes ``{name}`` in its ``note`` or ``choice``. A fact
selector names a kind of tidy rows (``from:``, one of :data:`heads.report.kinds.KINDS`), its arm where the kind
has several (``arm:``: the arm's folder name), and what to read: ``field:`` (a row field: its distinct values
over every seed's rows) or ``count: rows`` (how many rows one seed has). Every other key filters the rows by
equality (a ratio within the report's ratio tolerance). Values that agree are shown once; several are listed
("0, 6 and 29"); none is said, so a note never states a count its runs do not have.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from heads.report.collect import RunTree, same_ratio
from heads.report.kinds import KINDS
from heads.report.rows import by_seed

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
OWN_KEYS = {"from", "arm", "field", "count", "task"}
UNMEASURED = "(not measured)"


class FactError(ValueError):
    """A ``facts:`` entry or a placeholder that claims.yaml gets wrong (not a gap in the data)."""


def placeholders(text: str) -> list[str]:
    """The fact names ``text`` refers to, in order (``{name}``)."""
    return PLACEHOLDER.findall(text or "")


def check_facts(facts: Any, texts: Mapping[str, str], where: str) -> dict[str, dict]:
    """``facts`` checked against the vocabulary and against the ``texts`` (``note``, ``choice``) that use them:
    every placeholder names a declared fact. A fact no text uses is allowed: a task's entry may give a claim its
    own note (tasks.<task>.claims) and keep the facts the file's note reads."""
    if facts is None:
        facts = {}
    if not isinstance(facts, Mapping) or not all(isinstance(v, Mapping) for v in facts.values()):
        raise FactError(f"{where}: facts must map a name to a fact selector (from:, field: or count: rows)")
    for name, sel in facts.items():
        at = f"{where}.facts.{name}"
        if sel.get("from") not in KINDS:
            raise FactError(f"{at}: from: {sel.get('from')!r} is not a kind of rows; known: {sorted(KINDS)}")
        if ("field" in sel) == ("count" in sel):
            raise FactError(f"{at}: give one of field: (a row field) or count: rows")
        if "count" in sel and sel["count"] != "rows":
            raise FactError(f"{at}: count: takes rows, got {sel['count']!r}")
        if KINDS[sel["from"]].arm is not None and not isinstance(sel.get("arm"), str):
            raise FactError(f"{at}: from: {sel['from']} has an arm per {KINDS[sel['from']].arm}; name it (arm:)")
    unknown = sorted({name for text in texts.values() for name in placeholders(text)} - set(facts))
    if unknown:
        raise FactError(f"{where}: {{{unknown[0]}}} names no fact; declared: {sorted(facts) or 'none'} (facts:)")
    return {str(k): dict(v) for k, v in facts.items()}


def _matches(row: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    for key, want in filters.items():
        have = row.get(key)
        if isinstance(want, (int, float)) and not isinstance(want, bool) and isinstance(have, (int, float)):
            if not same_ratio(float(have), float(want)):
                return False
        elif have != want:
            return False
    return True


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _listed(values: list[str]) -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} and {values[-1]}"


def value(tree: RunTree, task: str, sel: Mapping[str, Any]) -> str:
    """One fact as the note shows it: its distinct values over the seeds, in order, or :data:`UNMEASURED`."""
    kind = sel["from"]
    arm = str(sel.get("arm", "none"))
    filters = {k: v for k, v in sel.items() if k not in OWN_KEYS}
    seeds = by_seed(tree, kind, str(sel.get("task", task)), arm)
    found: set = set()
    for rows in seeds.values():
        chosen = [r for r in rows if _matches(r, filters)]
        if "count" in sel:
            if chosen:
                found.add(len(chosen))
        else:
            found |= {r[sel["field"]] for r in chosen if r.get(sel["field"]) is not None}
    if not found:
        return UNMEASURED
    try:
        ordered = sorted(found)
    except TypeError:  # values of mixed types: their text's order
        ordered = sorted(found, key=str)
    return _listed([_shown(v) for v in ordered])


def fill(text: str, facts: Mapping[str, Mapping[str, Any]], tree: RunTree, task: str) -> str:
    """``text`` with each ``{name}`` replaced by that fact's value on ``tree`` (each fact read once)."""
    if not text or not facts:
        return text
    values: dict[str, str] = {}

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in facts:  # braces in text the claim did not write (a shipped model's caveat)
            return match.group(0)
        if name not in values:
            values[name] = value(tree, task, facts[name])
        return values[name]

    return PLACEHOLDER.sub(one, text)
