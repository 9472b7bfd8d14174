"""Claims as data: load and check ``replications/*/claims.yaml`` (the vocabulary is in replications/README.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from heads.report.measures import SelectorError, check_selector
from heads.report.stats import DIRECTIONS

KINDS = {"value": 0.0, "paired_difference": 0.0, "paired_ratio": 1.0}  # kind -> default null_value
REQUIRED = ("id", "text")
KNOWN = {"id", "text", "task", "kind", "a", "b", "direction", "tolerance", "null_value", "relative", "paper_value",
         "paper", "note", "not_tested", "target"}


class ClaimSpecError(ValueError):
    """A claims.yaml that does not follow the vocabulary."""


@dataclass(frozen=True)
class Claim:
    """One claim: a measured quantity (``kind`` over selectors ``a``/``b``) and the side it should fall on."""

    id: str
    text: str
    replication: str
    task: str | None = None
    kind: str = "value"
    a: dict = field(default_factory=dict)
    b: dict | None = None
    direction: str = "greater"
    tolerance: float = 0.0
    null: float = 0.0
    relative: bool = False
    paper_value: Any = None
    paper: str = ""
    note: str = ""
    not_tested: str | None = None

    @property
    def threshold(self) -> float:
        """The claim holds when the effect is ``direction`` of this: ``null + tolerance``."""
        return self.null + self.tolerance

    def condition(self) -> str:
        return f"{'>' if self.direction == 'greater' else '<'} {self.threshold:+.4g}"

    def quantity(self) -> str:
        """The measured quantity in words (selectors' sources and fields)."""
        if self.not_tested:
            return ""

        def side(sel: Mapping) -> str:
            if sel.get("from", "run") == "run":
                where = "/".join(str(sel.get(k, "*")) for k in ("variant", "strategy", "ratio"))
                return f"{where}:{sel['field']}"
            extra = sel.get("scorer") or sel.get("step") or sel.get("lam") or ""
            text = f"{sel['from']}{'/' + str(extra) if extra else ''}:{sel['measure']}"
            kinds = sel.get("site_kind")
            if kinds:
                text += f"[{kinds if isinstance(kinds, str) else ','.join(kinds)}]"
            if sel.get("field"):
                text += f"({sel['field']})"
            at = [f"{k}={sel[k]}" for k in ("ratio", "batch", "upto", "budget") if k in sel]
            return text + (f"@{','.join(at)}" if at else "")

        a = side(self.a)
        if self.kind == "value":
            return a
        op = "/" if self.kind == "paired_ratio" else "-"
        text = f"{a} {op} {side(self.b or {})}"
        return f"({text}) / |b|" if self.relative else text


def _selector(raw: Any, claim: Mapping, where: str) -> dict:
    if not isinstance(raw, Mapping):
        raise ClaimSpecError(f"{where}: must be a mapping")
    sel = dict(raw)
    sel.setdefault("task", claim.get("task"))
    if sel["task"] is None:
        raise ClaimSpecError(f"{where}: no task (give it in the claim or the selector)")
    if "target" in claim and "target" not in sel and sel.get("from", "run") == "run":
        sel["target"] = claim["target"]  # the claim's time-to-target settings apply to both sides
    try:
        check_selector(sel, where)
    except SelectorError as exc:
        raise ClaimSpecError(str(exc)) from None
    return sel


def parse_claim(raw: Mapping[str, Any], replication: str, where: str) -> Claim:
    """One checked claim from its YAML mapping."""
    if not isinstance(raw, Mapping):
        raise ClaimSpecError(f"{where}: a claim must be a mapping")
    for key in REQUIRED:
        if key not in raw:
            raise ClaimSpecError(f"{where}: missing {key!r}")
    where = f"{where} ({raw['id']})"
    unknown = sorted(set(raw) - KNOWN)
    if unknown:
        raise ClaimSpecError(f"{where}: unknown keys {unknown}; known: {sorted(KNOWN)}")
    common = {"id": str(raw["id"]), "text": str(raw["text"]).strip(), "replication": replication,
              "task": raw.get("task"), "paper_value": raw.get("paper_value"), "paper": str(raw.get("paper", "")),
              "note": str(raw.get("note", ""))}
    if raw.get("not_tested"):
        return Claim(**common, not_tested=str(raw["not_tested"]).strip())
    kind = raw.get("kind", "value")
    if kind not in KINDS:
        raise ClaimSpecError(f"{where}: kind {kind!r} is not one of {sorted(KINDS)}")
    direction = raw.get("direction")
    if direction not in DIRECTIONS:
        raise ClaimSpecError(f"{where}: direction must be one of {list(DIRECTIONS)}, got {direction!r}")
    if "a" not in raw or (kind != "value") != ("b" in raw):
        raise ClaimSpecError(f"{where}: kind {kind} takes {'a: and b:' if kind != 'value' else 'a: only'}")
    try:
        tolerance = float(raw.get("tolerance", 0.0))
        null = float(raw.get("null_value", KINDS[kind]))
    except (TypeError, ValueError):
        raise ClaimSpecError(f"{where}: tolerance and null_value must be numbers") from None
    return Claim(**common, kind=kind, a=_selector(raw["a"], raw, f"{where}.a"),
                 b=_selector(raw["b"], raw, f"{where}.b") if "b" in raw else None, direction=direction,
                 tolerance=tolerance, null=null, relative=bool(raw.get("relative", False)))


def load_claims(path: str | Path) -> list[Claim]:
    """The claims of one ``claims.yaml`` (replication name: the folder's)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ClaimSpecError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("claims"), list):
        raise ClaimSpecError(f"{path}: expected a mapping with a 'claims' list")
    replication = str(doc.get("replication", path.parent.name))
    return [parse_claim(raw, replication, f"{path}:claims[{i}]") for i, raw in enumerate(doc["claims"])]


def claim_order(claim: Claim) -> tuple:
    """Natural order of ids: A1 < A2 < A10, then the suffix."""
    parts = re.split(r"(\d+)", claim.id)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def load_all(replications: str | Path, names: list[str] | None = None) -> list[Claim]:
    """Every replication's claims (or only ``names``), in natural id order; ids must be unique."""
    root = Path(replications)
    files = sorted(root.glob("*/claims.yaml"))
    if names is not None:
        files = [f for f in files if f.parent.name in names]
    claims = [c for f in files for c in load_claims(f)]
    seen: dict[str, str] = {}
    for c in claims:
        if c.id in seen:
            raise ClaimSpecError(f"claim id {c.id!r} appears in {seen[c.id]} and {c.replication}")
        seen[c.id] = c.replication
    return sorted(claims, key=claim_order)
