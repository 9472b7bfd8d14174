"""Short labels and kinds of attention sites from their module paths (no model needed)."""

from __future__ import annotations

import re

from heads.site_patterns import FAMILY_PATTERNS, PATH_ORDER

# (pattern, stack prefix, kind) from the families' own patterns (heads.site_patterns), most specific first.
_PREFIX = {"encoder": "enc", "decoder": "dec", "": "L"}
_PATTERNS: tuple[tuple[re.Pattern, str, str], ...] = tuple(
    (re.compile(p.regex), _PREFIX[p.stack], p.kind) for family in PATH_ORDER for p in FAMILY_PATTERNS[family]
)


def parse_site(name: str) -> tuple[str, int, str] | None:
    """``(stack prefix, layer, kind)`` of a site's module path, or None when the path is unknown."""
    for pattern, prefix, kind in _PATTERNS:
        m = pattern.search(name)
        if m:
            return prefix, int(m.group(1)), kind
    return None


def site_kind(name: str) -> str:
    """``self``, ``causal`` or ``cross``; ``unknown`` for a path no family names."""
    parsed = parse_site(name)
    return parsed[2] if parsed else "unknown"


def site_label(name: str) -> str:
    """Short label as ``heads inspect`` prints it (``enc0.self``, ``dec1.cross``, ``L2.causal``)."""
    parsed = parse_site(name)
    if parsed is None:
        return name
    prefix, layer, kind = parsed
    return f"{prefix}{layer}.{kind}"


def site_order(name: str) -> tuple:
    """Sort key: encoder before decoder before single-stack, then layer, then self/causal/cross."""
    parsed = parse_site(name)
    if parsed is None:
        return (9, 0, 9, name)
    prefix, layer, kind = parsed
    return ({"enc": 0, "dec": 1, "L": 2}[prefix], layer, {"self": 0, "causal": 1, "cross": 2}[kind], name)
