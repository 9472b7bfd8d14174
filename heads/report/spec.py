"""Claims as data: load and check ``replications/*/claims.yaml`` (the vocabulary is in replications/README.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from heads.report.facts import FactError, check_facts
from heads.report.measures import SelectorError, check_selector
from heads.report.stats import DIRECTIONS, NOT_SUPPORTED, SUPPORTED, TESTS
from heads.yamlio import read_yaml

CLAIM_KINDS = {"value": 0.0, "paired_difference": 0.0, "paired_ratio": 1.0}  # kind -> default null_value
REQUIRED = ("id", "text")
KNOWN = {"id", "text", "task", "kind", "a", "b", "direction", "tolerance", "null_value", "relative", "paper_value",
         "paper", "note", "not_tested", "target", "test", "margin", "requires", "choice", "family", "seeds_are",
         "common_test", "about", "seeds_of_a", "facts"}
PRECONDITION_KEYS = {"what", "a", "b", "at_least", "at_most", "why", "guards", "superseded_by", "calibrate"}
GUARDS = (SUPPORTED, NOT_SUPPORTED)  # the verdicts a precondition may guard alone (``guards:``)
# Preconditions every replication may name (replications/preconditions.yaml); a claims.yaml may add its own.
SHARED = "preconditions.yaml"


class ClaimSpecError(ValueError):
    """A claims.yaml that does not follow the vocabulary."""


@dataclass(frozen=True)
class Precondition:
    """What a claim's models must reach for the claim to apply: every seed's ``a`` within the bounds; with ``b``,
    every seed that has both: ``(a - b) / |b|`` (a run against a yardstick run, e.g. itself trained longer)."""

    name: str
    what: str
    a: dict
    at_least: float | None = None
    at_most: float | None = None
    why: str = ""
    b: dict | None = None
    # the one verdict this precondition blocks when not met (None: every verdict, the claim is not tested). Low
    # power can only hide an effect, so a power check guards only the verdict that says there is none (B1's
    # "rarely significant": supported); a test that found the effect anyway stands, whatever the power
    guards: str | None = None
    # a direct test (a precondition with a yardstick ``b``, by name) that makes this one, a projection, needless
    # where its yardstick ran on every seed of its ``a``: the projection only stands in for it elsewhere
    superseded_by: str | None = None
    # ``{direct: <name>, projected: <selector>}``: each seed's ``a`` (a projection) scaled by what the same seed's
    # direct test measured over what the projection said there (``projected``: the direct test's own run's
    # projection), where the direct test ran on every seed; elsewhere ``a`` as it is
    calibrate: dict | None = None
    direct: Precondition | None = None  # the precondition either names, resolved (resolve_direct)

    def bound(self) -> str:
        return " and ".join(x for x in (f">= {self.at_least:g}" if self.at_least is not None else "",
                                        f"<= {self.at_most:g}" if self.at_most is not None else "") if x)

    def holds(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)


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
    # or "equivalence": |effect - null| < margin, by two one-sided tests; or "exact": a deterministic count (bytes)
    # checked on every seed, against the threshold or, with a margin, against null ± margin
    test: str = "directional"
    margin: float | None = None
    requires: tuple[Precondition, ...] = ()
    declared: bool = False  # whether the claim said what it requires (``requires: []`` says: nothing)
    # what a seed is, where it is not a training seed (claims.yaml's top-level ``seeds_are``: one pretrained
    # model's seeds are disjoint shards of its test text): said in the note, and the seeds then already sample
    # the examples, so no second, example-level interval is added
    seeds_are: str | None = None
    # where a threshold, margin or budget that is not the source's own comes from (said in the ledger's note)
    choice: str = ""
    # the claims of one replication whose p-values Holm adjusts together (claims.yaml's ``family``; None, or the
    # replication's own name: the whole replication): a source's claims, not unrelated sources' that share a model
    family: str | None = None
    # every seed was scored on the same examples (replicates of a procedure on one common test set): the
    # example-level interval is added although ``seeds_are`` says the seeds are not training seeds
    common_test: bool = False
    # what the claim is about: ``science`` (redundancy, prunability, what heads do) or ``engineering`` (speed,
    # time, memory, bytes: facts of the implementation and the machine); the ledger counts them apart
    about: str = "science"
    # the claim's seeds are those its ``a`` side ran on: ``b``'s other seeds, which other claims read (a part of a
    # replication trimmed to its first seeds against a baseline on more), are left out and the note says so
    seeds_of_a: bool = False
    # what the note and choice state about the claim's own runs (``{name}`` in their text: heads.report.facts),
    # read from the runs when the claim is judged
    facts: dict = field(default_factory=dict)

    @property
    def threshold(self) -> float:
        """The claim holds when the effect is ``direction`` of this: ``null + tolerance``."""
        return self.null + self.tolerance

    def holds(self, value: float) -> bool:
        """Whether one value meets the claim's condition (an exact test's check of each seed)."""
        if self.margin is not None:
            return abs(value - self.null) < self.margin
        return value > self.threshold if self.direction == "greater" else value < self.threshold

    def condition(self) -> str:
        if self.margin is not None:
            return f"within {self.null:+.4g} ± {self.margin:.4g}"
        return f"{'>' if self.direction == 'greater' else '<'} {self.threshold:+.4g}"

    def quantity(self) -> str:
        """The measured quantity in words (selectors' sources and fields)."""
        if self.not_tested:
            return ""

        def side(sel: Mapping) -> str:
            if sel.get("from", "run") == "run":
                where = "/".join(str(sel.get(k, "*")) for k in ("variant", "arm", "ratio"))
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
    if "pick" in sel and not isinstance(sel["pick"], Mapping):  # {arm: max}, not [max]: which key it orders by
        raise ClaimSpecError(f"{where}: pick must be a mapping of a key to min or max ({{arm: max}}), "
                             f"got {sel['pick']!r}")
    if "target" in claim and "target" not in sel and sel.get("from", "run") == "run":
        sel["target"] = claim["target"]  # the claim's time-to-target settings apply to both sides
    try:
        check_selector(sel, where)
    except SelectorError as exc:
        raise ClaimSpecError(str(exc)) from None
    return sel


def _number(raw: Mapping[str, Any], key: str, default: float | None, where: str) -> float | None:
    """``raw[key]`` as a finite number (``default`` when absent or null; a number written as quoted text counts):
    a list, a boolean, a word or a NaN would compare as no number does, so each is
    refused naming the key."""
    value = raw.get(key)
    if value is None:
        return default
    try:
        number = None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number):
        raise ClaimSpecError(f"{where}: {key} must be a finite number, got {value!r} (thresholds and bounds must be "
                             "numbers)")
    return number


def parse_precondition(name: str, raw: Any, where: str, task: str | None = None) -> Precondition:
    """One named precondition: ``{what, a: <selector>, [b: <selector>], at_least | at_most, why}`` (``task``: its
    selectors' where they name none)."""
    if not isinstance(raw, Mapping):
        raise ClaimSpecError(f"{where}: precondition {name!r} must be a mapping")
    unknown = sorted(set(raw) - PRECONDITION_KEYS)
    if unknown:
        raise ClaimSpecError(f"{where}: precondition {name!r}: unknown keys {unknown}; "
                             f"known: {sorted(PRECONDITION_KEYS)}")
    if "a" not in raw or not ({"at_least", "at_most"} & set(raw)):
        raise ClaimSpecError(f"{where}: precondition {name!r} needs a: and at_least or at_most")
    low = _number(raw, "at_least", None, f"{where}: precondition {name!r}")
    high = _number(raw, "at_most", None, f"{where}: precondition {name!r}")
    own = {"task": task} if task is not None else {}
    sel = _selector(raw["a"], own, f"{where}: precondition {name}.a")
    b = _selector(raw["b"], own, f"{where}: precondition {name}.b") if raw.get("b") is not None else None
    guards = raw.get("guards")
    if guards is not None and guards not in GUARDS:
        raise ClaimSpecError(f"{where}: precondition {name!r}: guards must be one of {list(GUARDS)} (the one "
                             f"verdict it blocks when not met), got {guards!r}")
    superseded = raw.get("superseded_by")
    if superseded is not None and not (isinstance(superseded, str) and superseded):
        raise ClaimSpecError(f"{where}: precondition {name!r}: superseded_by must name a precondition, got "
                             f"{superseded!r}")
    calibrate = raw.get("calibrate")
    if calibrate is not None:
        if (not isinstance(calibrate, Mapping) or not {"direct", "projected"} <= set(calibrate)
                <= {"direct", "projected", "pooled"} or not isinstance(calibrate["direct"], str)
                or not isinstance(calibrate.get("pooled", False), bool)):
            raise ClaimSpecError(f"{where}: precondition {name!r}: calibrate must be {{direct: <a precondition's "
                                 f"name>, projected: <selector>, pooled: <true|false, optional>}}, got {calibrate!r}")
        calibrate = {"direct": calibrate["direct"],
                     "projected": _selector(calibrate["projected"], {}, f"{where}: precondition {name}.calibrate"),
                     "pooled": calibrate.get("pooled", False)}
    return Precondition(name, str(raw.get("what", name)), sel, low, high, str(raw.get("why", "")).strip(), b,
                        guards, superseded, calibrate)


def parse_preconditions(raw: Any, where: str, task: str | None = None) -> dict[str, Precondition]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ClaimSpecError(f"{where}: preconditions must be a mapping of name to precondition")
    return {str(k): parse_precondition(str(k), v, where, task) for k, v in raw.items()}


def direct_of(pre: Precondition) -> str | None:
    """The name of the direct test ``pre`` defers to (``superseded_by``) or is calibrated by, if any."""
    return pre.superseded_by or (pre.calibrate or {}).get("direct")


def resolve_direct(named: Mapping[str, Precondition], where: str) -> dict[str, Precondition]:
    """``named`` with each ``superseded_by`` / ``calibrate.direct`` resolved (``Precondition.direct``), refused
    unless it names a known precondition that compares with a yardstick (a direct test: ``b``)."""
    out = dict(named)
    for key, pre in named.items():
        direct = direct_of(pre)
        if direct is None:
            continue
        if direct not in named:
            raise ClaimSpecError(f"{where}: precondition {pre.name!r} defers to unknown precondition {direct!r}; "
                                 f"known: {sorted(named)}")
        if named[direct].b is None:
            raise ClaimSpecError(f"{where}: precondition {pre.name!r} defers to {direct!r}, which has no yardstick "
                                 "(b:), so no direct test")
        out[key] = replace(pre, direct=named[direct])
    return out


def _requires(raw: Any, named: Mapping[str, Precondition], where: str) -> tuple[Precondition, ...]:
    if not isinstance(raw, list):
        raise ClaimSpecError(f"{where}: requires must be a list of precondition names")
    missing = [n for n in raw if n not in named]
    if missing:
        raise ClaimSpecError(f"{where}: requires unknown preconditions {missing}; known: {sorted(named)}")
    pres = tuple(named[n] for n in raw)
    # a projection that yields to a direct test must not yield to one the claim does not check: the claim would
    # then be judged with neither
    absent = sorted({p.superseded_by for p in pres if p.superseded_by} - set(raw))
    if absent:
        raise ClaimSpecError(f"{where}: requires a precondition superseded by {absent}, which it does not require")
    return pres


def parse_claim(raw: Mapping[str, Any], replication: str, where: str,
                named: Mapping[str, Precondition] | None = None) -> Claim:
    """One checked claim from its YAML mapping (``named``: the preconditions its ``requires`` may name)."""
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
              "note": str(raw.get("note", "")), "choice": str(raw.get("choice", "")).strip(),
              "family": _words(raw, "family", where), "seeds_are": _words(raw, "seeds_are", where),
              "common_test": _boolean(raw, "common_test", where), "about": _about(raw, where),
              "seeds_of_a": _boolean(raw, "seeds_of_a", where)}
    if raw.get("not_tested"):  # nothing is run: its note is not shown, so it states no facts
        return Claim(**common, not_tested=str(raw["not_tested"]).strip())
    try:
        common["facts"] = check_facts(raw.get("facts"), {"note": common["note"], "choice": common["choice"]},
                                      where)
    except FactError as exc:
        raise ClaimSpecError(str(exc)) from None
    kind = raw.get("kind", "value")
    if kind not in CLAIM_KINDS:
        raise ClaimSpecError(f"{where}: kind {kind!r} is not one of {sorted(CLAIM_KINDS)}")
    direction = raw.get("direction")
    if direction not in DIRECTIONS:
        raise ClaimSpecError(f"{where}: direction must be one of {list(DIRECTIONS)}, got {direction!r}")
    if "a" not in raw or (kind != "value") != ("b" in raw):
        raise ClaimSpecError(f"{where}: kind {kind} takes {'a: and b:' if kind != 'value' else 'a: only'}")
    tolerance = _number(raw, "tolerance", 0.0, where)
    null = _number(raw, "null_value", CLAIM_KINDS[kind], where)
    margin = _number(raw, "margin", None, where)
    test = raw.get("test", "directional")
    if test not in TESTS:
        raise ClaimSpecError(f"{where}: test must be one of {list(TESTS)}, got {test!r}")
    if (test == "equivalence" and margin is None) or (test == "directional" and margin is not None) or (
            margin is not None and margin <= 0):
        raise ClaimSpecError(f"{where}: an equivalence test takes a positive margin (an exact one may; a "
                             "directional one does not)")
    requires = _requires(raw["requires"], named or {}, where) if "requires" in raw else ()
    return Claim(**common, kind=kind, a=_selector(raw["a"], raw, f"{where}.a"),
                 b=_selector(raw["b"], raw, f"{where}.b") if "b" in raw else None, direction=direction,
                 tolerance=_finite(tolerance, "tolerance", where), null=_finite(null, "null_value", where),
                 relative=_boolean(raw, "relative", where), test=test,
                 margin=None if margin is None else _finite(margin, "margin", where), requires=requires,
                 declared="requires" in raw)


def _finite(value: float, key: str, where: str) -> float:
    """``value`` if finite: a NaN tolerance or margin compares false with everything (a claim judged by it would
    render "< +nan"), an infinite one makes every effect pass or fail."""
    if not math.isfinite(value):
        raise ClaimSpecError(f"{where}: {key} must be a finite number, got {value!r}")
    return value


ABOUT = ("science", "engineering")


def _about(raw: Mapping[str, Any], where: str) -> str:
    """``raw["about"]``: science (the default) or engineering."""
    value = raw.get("about", "science")
    if value not in ABOUT:
        raise ClaimSpecError(f"{where}: about must be one of {list(ABOUT)} (engineering: speed, time, memory, bytes; "
                             f"science: what the heads do), got {value!r}")
    return value


def _words(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    """``raw[key]`` as non-empty text, stripped (None when absent): an empty one or a number is refused."""
    value = raw.get(key)
    if value is None and key not in raw:
        return None
    if not (isinstance(value, str) and value.strip()):
        raise ClaimSpecError(f"{where}: {key} must be non-empty text, got {value!r}")
    return value.strip()


def _boolean(raw: Mapping[str, Any], key: str, where: str) -> bool:
    """``raw[key]`` if it is true or false (default false): a string such as "false" is not read as true."""
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ClaimSpecError(f"{where}: {key} must be true or false, got {value!r} ({type(value).__name__})")
    return value


def _read_yaml(path: Path) -> Any:
    """The project's one YAML reading (a `claims:` given twice is refused, not the first silently dropped)."""
    return read_yaml(path, ClaimSpecError)


def shared_preconditions(root: str | Path) -> dict[str, Precondition]:
    """The preconditions of ``root/preconditions.yaml`` (none when it is absent)."""
    path = Path(root) / SHARED
    if not path.is_file():
        return {}
    doc = _read_yaml(path)
    if not isinstance(doc, Mapping):
        raise ClaimSpecError(f"{path}: expected a mapping with a 'preconditions' mapping")
    return resolve_direct(parse_preconditions(doc.get("preconditions"), str(path)), str(path))


def load_claims(path: str | Path, shared: Mapping[str, Precondition] | None = None,
                task: str | None = None) -> list[Claim]:
    """The claims of one ``claims.yaml`` (replication name: the folder's); ``requires`` may name the shared
    preconditions (``shared``; by default read from the folder above) and the file's own ``preconditions:``.

    A file whose claims follow the task its runs are of (the battery's: a top-level ``task:``, the task of every
    claim and precondition naming none) is read on ``task`` where given: its ``tasks.<task>`` entry lays that
    task's own keys over the named preconditions and claims (a ``not_tested`` where the task cannot give the
    measure). Every entry of ``tasks`` is checked whatever ``task`` is; a task it has no entry for is refused."""
    path = Path(path)
    doc = _read_yaml(path)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("claims"), list):
        raise ClaimSpecError(f"{path}: expected a mapping with a 'claims' list")
    default, overlays = doc.get("task"), doc.get("tasks") or {}
    if not isinstance(overlays, Mapping) or (overlays and default is None):
        raise ClaimSpecError(f"{path}: tasks must map a task to what changes on it, beside a top-level task:")
    if shared is None:
        shared = shared_preconditions(path.parent.parent)
    for other in overlays:  # a typo in a task's entry fails whichever task is read
        if other != task:
            _read_claims(doc, path, shared, other)
    if default is None or task in (None, default):
        return _read_claims(doc, path, shared, default)
    if task not in overlays:
        raise ClaimSpecError(f"{path}: its claims are read on task {default!r}; it says nothing of task {task!r} "
                             f"(tasks.{task}: what each claim and precondition becomes there)")
    return _read_claims(doc, path, shared, task)


def _over(raw: Any, own: Any, what: str, where: str) -> dict:
    """``raw`` (a mapping of name to entry) with ``own``'s entries laid over the same names' keys."""
    own = own or {}
    if not isinstance(own, Mapping) or not all(isinstance(v, Mapping) for v in own.values()):
        raise ClaimSpecError(f"{where}: {what} must map a name to the keys that change")
    unknown = sorted(set(own) - set(raw or {}))
    if unknown:
        raise ClaimSpecError(f"{where}: {what} names {unknown}, which the file does not declare")
    return {k: {**v, **own.get(k, {})} for k, v in (raw or {}).items()}


def _read_claims(doc: Mapping, path: Path, shared: Mapping[str, Precondition], task: str | None) -> list[Claim]:
    """``doc``'s claims on ``task`` (its ``tasks`` entry laid over, where it is not the file's own)."""
    replication = str(doc.get("replication", path.parent.name))
    own = {} if task == doc.get("task") else doc["tasks"][task]
    where = f"{path}: tasks.{task}"
    if not isinstance(own, Mapping) or set(own) - {"preconditions", "claims", "seeds_are"}:
        raise ClaimSpecError(f"{where}: must map preconditions, claims and/or seeds_are to what changes on the task")
    raw_pre = _over(doc.get("preconditions"), own.get("preconditions"), "preconditions", where)
    by_id = {str(c.get("id")): c for c in doc["claims"] if isinstance(c, Mapping)}
    raw_claims = _over(by_id, own.get("claims"), "claims", where)
    named = resolve_direct({**shared, **parse_preconditions(raw_pre, str(path), task)}, str(path))
    seeds_are = own.get("seeds_are", doc.get("seeds_are"))  # a task's own text (its shards are of its own data)
    if seeds_are is not None and not (isinstance(seeds_are, str) and seeds_are.strip()):
        raise ClaimSpecError(f"{path}: seeds_are must say in words what a seed is, got {seeds_are!r}")
    claims = [parse_claim(_with_task(raw_claims.get(str(raw.get("id")), raw) if isinstance(raw, Mapping) else raw,
                                     task), replication, f"{path}:claims[{i}]", named)
              for i, raw in enumerate(doc["claims"])]
    # a claim's own seeds_are says what its seeds are where they differ from the file's (replicates of a procedure)
    return [replace(c, seeds_are=seeds_are.strip()) if seeds_are and c.seeds_are is None else c for c in claims]


def _with_task(raw: Any, task: str | None) -> Any:
    """A claim's mapping with the file's ``task`` where it names none."""
    return {**raw, "task": raw.get("task", task)} if isinstance(raw, Mapping) and task is not None else raw


def claim_order(claim: Claim) -> tuple:
    """Natural order of ids: A1 < A2 < A10, then the suffix."""
    parts = re.split(r"(\d+)", claim.id)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def load_all(replications: str | Path, names: list[str] | None = None,
             tasks: Mapping[str, str] | None = None) -> list[Claim]:
    """Every replication's claims (or only ``names``), in natural id order; ids must be unique. ``tasks``: a
    replication's task where its claims follow its runs' (:func:`load_claims`)."""
    root = Path(replications)
    files = sorted(root.glob("*/claims.yaml"))
    if names is not None:
        files = [f for f in files if f.parent.name in names]
    shared = shared_preconditions(root)  # read once for every replication
    claims = [c for f in files for c in load_claims(f, shared, (tasks or {}).get(f.parent.name))]
    seen: dict[str, str] = {}
    for c in claims:
        if c.id in seen:
            raise ClaimSpecError(f"claim id {c.id!r} appears in {seen[c.id]} and {c.replication}")
        seen[c.id] = c.replication
    return sorted(claims, key=claim_order)
