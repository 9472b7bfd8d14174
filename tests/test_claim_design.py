"""Claim designs that can decide (issue 52): Holm within a source's ``family``, preconditions that ``guards`` one
verdict only, and per-claim ``seeds_are`` / ``common_test`` for replicates of a procedure on one test set."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_report import BASE, REPLICATIONS, SEEDS, _claim, _write, make_tree

from heads.report import RunTree, evaluate, load_all
from heads.report.claims import ClaimResult, _design_rules, adjust, evaluate_all, ledger_markdown
from heads.report.spec import ClaimSpecError, load_claims

LOSS = {**BASE, "field": "final_val_loss"}  # the synthetic LM baseline: 3.00, 3.01, 3.02 over the seeds


@pytest.fixture(scope="module")
def tree_root(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("runs"))


def _claims(tmp_path: Path, doc: dict) -> dict:
    """The claims of ``doc`` written as a replication's claims.yaml, by id."""
    path = tmp_path / "rep" / "claims.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return {c.id: c for c in load_claims(path, shared={})}


# -- 1. Holm within a family --------------------------------------------------------------------------------------

def _result(cid: str, p: float, verdict: str = "supported", **kw) -> ClaimResult:
    claim = _claim(id=cid, kind="value", a={**BASE, "field": "value"}, **kw)
    return ClaimResult(replace(claim, replication="r"), verdict, p_value=p, note="n")


def test_holm_adjusts_within_each_family_and_names_it():
    """Four tests over one replication sink a p of 0.012 (second smallest: x3 = 0.036); within its source's family
    of two it stands. A claim without ``family`` (or naming the replication) is in the replication's family, whose note
    reads as it always did; the note of a family names it and its size."""
    results = [_result("A", 0.001, family="michel"), _result("B", 0.012, family="michel"),
               _result("C", 0.02, family="voita"), _result("D", 0.001, "not supported"),
               _result("E", 0.02, family="r")]
    adjust(results)
    a, b, c, d, e = results
    assert (b.verdict, b.p_adjusted) == ("supported", pytest.approx(0.012))  # second of its family of two
    assert (c.verdict, c.p_adjusted) == ("supported", pytest.approx(0.02))  # a family of one
    assert d.p_adjusted == pytest.approx(0.002) and e.p_adjusted == pytest.approx(0.02)  # E named the replication
    flat = [_result(x, p) for x, p in (("A", 0.001), ("B", 0.012), ("C", 0.02), ("D", 0.02))]
    adjust(flat)  # no family: the replication's, as before
    assert flat[1].verdict == "inconclusive" and flat[1].p_adjusted == pytest.approx(0.036)
    assert "over the 4 tests of replication r (adjusted p 0.036" in flat[1].note
    sunk = [_result("A", 0.02, family="michel"), _result("B", 0.02, family="michel")]
    adjust(sunk)
    assert sunk[0].verdict == "inconclusive"
    assert "over the 2 tests of family 'michel' of replication r (adjusted p 0.04 >= 0.025)" in sunk[0].note


def test_family_defaults_to_the_replication_and_must_be_text(tmp_path):
    got = _claims(tmp_path, {"claims": [
        {"id": "P", "text": "p", "task": "lm", "kind": "value", "a": LOSS, "direction": "less", "family": " michel "},
        {"id": "Q", "text": "q", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"}]})
    assert got["P"].family == "michel" and got["Q"].family is None
    for bad in ("", "  ", 3, None, ["michel"]):
        with pytest.raises(ClaimSpecError, match="family must be non-empty text"):
            _claim(kind="value", a=LOSS, family=bad)


# -- 2. preconditions that guard one verdict ----------------------------------------------------------------------

def _guarded(tmp_path: Path, guards: str | None, at_most: float = 2.0, selector: dict | None = None) -> dict:
    """Claims on the LM baseline's loss (3.00-3.02) under a precondition it fails (at most 2.0) that guards
    ``guards``: one whose test gives supported, one not supported, one inconclusive."""
    pre = {"what": "a stand-in for power", "a": {"from": "run", "task": "lm", **(selector or LOSS)},
           "at_most": at_most, "why": "low power can only hide an effect"}
    if guards is not None:
        pre["guards"] = guards
    claim = {"text": "t", "task": "lm", "kind": "value", "a": LOSS, "requires": ["power"]}
    return _claims(tmp_path, {"preconditions": {"power": pre}, "claims": [
        {**claim, "id": "G-supported", "direction": "greater", "tolerance": 2.5},
        {**claim, "id": "G-refuted", "direction": "less", "tolerance": 2.5},
        {**claim, "id": "G-open", "direction": "less", "tolerance": 3.01}]})


def test_a_precondition_guarding_supported_blocks_that_verdict_alone(tree_root, tmp_path):
    """B1's case: low power can only hide significant heads, so the power check guards 'supported'; a claim its
    test refutes anyway is 'not supported' whatever the power, and the column and note say what the precondition
    would have withheld. The test's 'supported' is withheld as today; without guards every verdict is."""
    tree = RunTree(tree_root)
    got = {k: evaluate(c, tree) for k, c in _guarded(tmp_path, "supported").items()}
    refuted, blocked, still_open = got["G-refuted"], got["G-supported"], got["G-open"]
    assert refuted.verdict == "not supported" and refuted.p_value is not None
    assert refuted.precondition.startswith("not met: a stand-in for power: mean 3.01, seeds 3 to 3.02, needs <= 2 "
                                           "on every seed (blocks supported only); low power can only hide")
    assert refuted.note.startswith("a precondition that guards 'supported' only was not met (see its column): it "
                                   "would have withheld 'supported', not the 'not supported' the claim gave")
    assert still_open.verdict == "inconclusive" and "would have withheld 'supported'" in still_open.note
    assert blocked.verdict == "not tested at this scale" and blocked.p_value is None
    assert blocked.note.startswith("the models do not meet the precondition (see its column)")
    assert blocked.precondition == refuted.precondition
    # the blocked claim ran no test that counts: it is no member of the Holm family
    results = evaluate_all(list(_guarded(tmp_path, "supported").values()), tree)
    assert [r.p_adjusted is None for r in results] == [True, False, False]
    # without guards (as before): every verdict withheld, the column as it always read
    for r in (evaluate(c, tree) for c in _guarded(tmp_path, None).values()):
        assert r.verdict == "not tested at this scale" and r.note.startswith("the models do not meet")
        assert r.precondition.startswith("not met: a stand-in for power: mean 3.01, seeds 3 to 3.02, needs <= 2 on "
                                         "every seed; low power") and "blocks" not in r.precondition


def test_a_precondition_guarding_not_supported_and_one_that_is_met_or_unmeasured(tree_root, tmp_path):
    tree = RunTree(tree_root)
    got = {k: evaluate(c, tree) for k, c in _guarded(tmp_path, "not supported").items()}
    assert got["G-supported"].verdict == "supported"
    assert got["G-refuted"].verdict == "not tested at this scale"
    # met: nothing is withheld and nothing is said
    met = {k: evaluate(c, tree) for k, c in _guarded(tmp_path, "supported", at_most=4.0).items()}
    assert met["G-supported"].verdict == "supported" and met["G-supported"].precondition.startswith("met: ")
    assert "guards" not in met["G-supported"].note
    # not measured: the guarded verdict is inconclusive, the other stands
    absent = {"variant": "nothing", "arm": "none", "ratio": 0.0, "field": "value"}
    lost = {k: evaluate(c, tree) for k, c in _guarded(tmp_path, "supported", selector=absent).items()}
    assert lost["G-supported"].verdict == "inconclusive" and lost["G-supported"].p_value is None
    assert lost["G-supported"].note.startswith("a precondition could not be measured")
    assert lost["G-refuted"].verdict == "not supported" and "was not measured" in lost["G-refuted"].note
    assert lost["G-refuted"].precondition.startswith("not measured: a stand-in for power: ")
    assert lost["G-refuted"].precondition.endswith("(blocks supported only)")


def test_guards_is_checked(tmp_path):
    for bad in ("maybe", True, "Supported", ["supported"]):
        with pytest.raises(ClaimSpecError, match="guards must be one of"):
            _guarded(tmp_path, bad)
    assert _guarded(tmp_path, "not supported")["G-open"].requires[0].guards == "not supported"


# -- 3. replicates of a procedure on one common test set ----------------------------------------------------------

def test_a_claims_own_seeds_are_overrides_the_files(tmp_path):
    claim = {"text": "t", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"}
    got = _claims(tmp_path, {"seeds_are": "shards of the text", "claims": [
        {**claim, "id": "S"}, {**claim, "id": "R", "seeds_are": " replicates of the procedure ", "common_test": True}]})
    assert (got["S"].seeds_are, got["S"].common_test) == ("shards of the text", False)
    assert (got["R"].seeds_are, got["R"].common_test) == ("replicates of the procedure", True)
    for key, bad, match in (("seeds_are", "", "seeds_are must be non-empty text"),
                            ("common_test", "yes", "common_test must be true or false")):
        with pytest.raises(ClaimSpecError, match=match):
            _claim(kind="value", a=LOSS, **{key: bad})


def test_common_test_adds_the_example_level_interval_to_seeds_that_are_not_training_seeds(tree_root, tmp_path):
    """Seeds that are shards of the text already sample it: no second interval. Seeds that are replicates of a
    procedure each scored on the same examples do not: with common_test the two-level interval applies (the equal
    per-seed differences alone have no spread and decide nothing)."""
    from heads.examples import record

    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)
    for s in SEEDS:  # the test of test_report's two-level claim: one pair turned wrong on every seed
        right = 160 + 2 * s
        base = [1] * right + [0] * (200 - right)
        for group, column in (("baseline/none/0.0", base), ("posthoc/importance/0.5", [0] + base[1:])):
            _write(runs / "cls" / group / f"seed{s}" / "examples.json",
                   record({"correct": column, "loss": [0.5] * 200}, {"accuracy": sum(column) / 200}))
    spec = {"kind": "paired_difference", "task": "cls", "direction": "greater", "tolerance": -0.02,
            "a": {"variant": "posthoc", "arm": "importance", "ratio": 0.5, "field": "value"},
            "b": {**BASE, "field": "value"}, "seeds_are": "replicates of the procedure"}
    tree = RunTree(runs)
    shards = evaluate(_claim(**spec), tree)
    assert shards.verdict == "inconclusive" and not shards.estimate.examples
    common = evaluate(_claim(**spec, common_test=True), tree)
    assert common.verdict == "supported" and common.estimate.examples and "two-level" in common.method
    assert "seeds are replicates of the procedure" in common.note


# -- ledgers that use none of the keys read as before -------------------------------------------------------------

def test_the_rule_speaks_of_the_new_keys_only_where_a_ledger_uses_them(tmp_path):
    claims = load_all(REPLICATIONS)
    users = {c.id for c in claims if c.family or c.common_test or any(p.guards for p in c.requires)}
    # the pretrained ledger uses them, and the translation model's A1 (Holm within its source's family)
    assert users - {c.id for c in claims if c.replication == "pretrained"} == {"A1-mt-curve-30", "A1-mt-curve-50"}
    shipped = [c for c in claims if c.replication not in ("pretrained", "michel2019")]
    assert _design_rules([ClaimResult(c, "inconclusive") for c in shipped]) == []
    plain = ledger_markdown([ClaimResult(shipped[0], "inconclusive")])
    used = [ClaimResult(c, "inconclusive") for c in _guarded(tmp_path, "supported").values()]
    used.append(ClaimResult(_claim(kind="value", a=LOSS, family="michel", common_test=True), "inconclusive"))
    text = ledger_markdown(used)
    for words in ("adjusted over that family alone", "guards one verdict only", "one common test set"):
        assert words in text and words not in plain


# -- 4. engineering claims counted apart ----------------------------------------------------------------------------

def test_about_is_science_or_engineering(tmp_path):
    got = _claims(tmp_path, {"claims": [
        {"id": "P", "text": "p", "task": "lm", "kind": "value", "a": LOSS, "direction": "less", "about": "engineering"},
        {"id": "Q", "text": "q", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"}]})
    assert got["P"].about == "engineering" and got["Q"].about == "science"
    with pytest.raises(ClaimSpecError, match="about must be one of"):
        _claim(kind="value", a=LOSS, about="speed")


def test_the_readme_block_counts_engineering_claims_apart(tmp_path):
    """The summary a README shows says how many of its claims are engineering facts, read from the specs of the
    repository the ledger lies in; the brief form names the claims not run at the preset, and those not run yet,
    in one line each."""
    from tools.readme import block

    repo = tmp_path / "repo"
    (repo / "replications" / "r").mkdir(parents=True)
    (repo / "replications" / "r" / "claims.yaml").write_text(yaml.safe_dump({"claims": [
        {"id": "S", "text": "s", "task": "lm", "kind": "value", "a": LOSS, "direction": "less", "about": "engineering"},
        {"id": "T", "text": "t", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"},
        {"id": "U", "text": "u", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"},
        {"id": "V", "text": "v", "task": "lm", "kind": "value", "a": LOSS, "direction": "less"}]}))
    ledger = repo / "results" / "tiny" / "claims.csv"
    ledger.parent.mkdir(parents=True)
    head = "claim,replication,verdict,effect,ci_low,ci_high,paper_value,n_seeds,method,p_value,p_adjusted\n"
    ledger.write_text(head + "S,r,supported,0.1,0.05,0.2,,3,t,0.01,0.01\nT,r,inconclusive,,,,,0,,,\n"
                      "U,r,not run at this preset,,,,,0,,,\nV,r,not run yet,,,,,0,,,\n")
    text = block(ledger, brief=True)
    assert text.startswith("4 claims: 1 supported, 1 inconclusive, 1 not run yet, 1 not run at this preset")
    assert "Not run yet (their replication's target has not run since they were declared): V." in text
    assert "Of these, 1 are engineering claims (speed, time, memory, bytes" in text and ": 1 supported." in text
    assert text.rstrip().endswith("Not run at this preset (their replication runs at another preset): U.")
