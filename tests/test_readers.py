"""Readers that refuse contradictions and read valid input as valid (issue 57, classes 6 and 8).

A record whose identity contradicts its place or its task, an unknown verdict, a string where a boolean belongs, a
NaN tolerance, an empty run tree: refused, one line naming the file and the field. A byte-order mark and CRLF read
as the same text; ``python -m tools.readme`` touches only its blocks; labels coded -1/+1 are two classes; a
translation row without its ``fr`` key is named as such."""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from test_report import BASE, _claim, _train_run, _write, stamp

from heads.cli import report as report_cli
from heads.data import hub
from heads.report import RunTree
from heads.report.claims import ClaimResult, write_ledger
from heads.report.collect import RunTreeError
from heads.report.fmt import Table
from heads.report.ledger import LedgerError, merge_baselines, merge_results, merged_environments, read_ledger
from heads.report.spec import ClaimSpecError, load_claims, parse_claim
from heads.report.stats import Estimate
from tools.readme import main as readme_main
from tools.readme import refresh

BOM = b"\xef\xbb\xbf"
LM = dict(metric="perplexity", final=3.0, sec_per_step=0.05, heads=8, params=1000)


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="heads")
    report_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _lm_tree(root: Path) -> Path:
    """Two lm baseline seeds, stamped with their identities as the workflow's run sheet does."""
    runs = root / "runs"
    for seed in (0, 1):
        _train_run(runs, "lm", "baseline/none/0.0", seed, value=math.exp(3.0), **LM)
    stamp(runs)
    return runs


# -- class 6: contradictions ------------------------------------------------------------------------------------
def test_an_mt_run_under_an_lm_baseline_label_is_refused_not_averaged(tmp_path):
    runs = _lm_tree(tmp_path)
    seed1 = runs / "lm" / "baseline" / "none" / "0.0" / "seed1"
    summary = json.loads((seed1 / "summary.json").read_text())
    # an mt run recorded with an lm baseline's identity: BLEU 0 would be averaged with perplexity 20
    _write(seed1 / "summary.json", {**summary, "task": "mt", "metric": "bleu", "value": 0.0, "eval": {"bleu": 0.0}})
    with pytest.raises(RunTreeError, match=r"^lm/baseline/none/0.0/seed1/summary.json: task 'mt' contradicts its "
                                           r"run.task 'lm'"):
        RunTree(runs)
    with pytest.raises(SystemExit, match=r"seed1/summary.json: task 'mt'"):
        _cli(["report", "--runs", str(runs), "--replication", "training_time", "--out", str(tmp_path / "out")])
    # the same record without its own task: its metric says what it is
    _write(seed1 / "summary.json", {**summary, "metric": "bleu", "value": 0.0})
    with pytest.raises(RunTreeError, match=r"seed1/summary.json: metric 'bleu' is not task 'lm''s"):
        RunTree(runs)
    # a config.json whose task is another's (its summary not yet written)
    (seed1 / "summary.json").unlink()
    config = json.loads((seed1 / "config.json").read_text())
    _write(seed1 / "config.json", {**config, "task": "mt"})
    with pytest.raises(RunTreeError, match=r"seed1/config.json: task 'mt' contradicts its run.task 'lm'"):
        RunTree(runs)


def test_a_record_whose_label_is_not_where_it_lies_is_refused(tmp_path):
    runs = _lm_tree(tmp_path)
    base = runs / "lm" / "baseline" / "none" / "0.0"
    shutil.copytree(base / "seed0", base / "seed2")  # seed 0's records copied to seed 2: read twice as seed 0
    with pytest.raises(RunTreeError, match=r"^lm/baseline/none/0.0/seed2/summary.json: run.label "
                                           r"'lm/baseline/none/0.0/seed0' is not where it lies"):
        RunTree(runs)
    shutil.rmtree(base / "seed2")
    assert len(RunTree(runs).runs) == 2
    # a tree read from a folder above the run tree still finds every label where it lies
    assert len(RunTree(tmp_path).runs) == 2
    # an analysis moved to another task's folder
    _write(runs / "mt" / "analysis" / "trivial" / "seed0.json", {"task": "lm", "baselines": {}, "run": {
        "label": "lm/analysis/trivial/seed0", "kind": "trivial", "task": "lm", "seed": 0}})
    with pytest.raises(RunTreeError, match=r"mt/analysis/trivial/seed0.json: run.label 'lm/analysis/trivial/seed0'"):
        RunTree(runs)
    # a record other readers skip (another replication's label) is not read, so not refused
    assert len(RunTree(runs, labels=["lm/baseline/none/0.0/seed0"]).runs) == 1


def test_an_empty_run_tree_is_an_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    for argv in (["report", "--runs", str(empty), "--replication", "training_time", "--out", str(out)],
                 ["report", "--runs", str(empty), "--replication", "training_time", "--out", str(out),
                  "--figures-only"],
                 ["claims", "--runs", str(empty), "--out", str(out)],
                 ["rows", "--runs", str(empty)]):
        with pytest.raises(SystemExit, match="an empty run tree"):
            _cli(argv)
    assert not out.exists()
    runs = _lm_tree(tmp_path)
    with pytest.raises(SystemExit, match="no run or analysis of the --tasks / --labels given"):
        _cli(["rows", "--runs", str(runs), "--tasks", "mt"])
    assert _cli(["rows", "--runs", str(runs), "--tasks", "lm", "--out", str(tmp_path / "rows.csv")]) == 0


def _ledger(folder: Path, verdict: str = "supported") -> tuple[Path, dict]:
    claim = _claim(id="X1", kind="value", a={**BASE, "field": "value"})
    result = ClaimResult(claim, verdict, Estimate(3, 0.5, 0.2, 0.8, 0.1), per_seed={0: 0.4, 1: 0.5, 2: 0.6},
                         note="n", p_value=0.001, p_adjusted=0.001)
    baselines = Table("Baselines", ["task", "model", "metric", "value", "ci_low", "ci_high", "n_seeds", "name",
                                    "n_failed"], [["lm", "baseline", "perplexity", 20.0, 19.0, 21.0, 3,
                                                   "baseline/none/0.0", 0]])
    write_ledger([result], folder, baselines=baselines)
    (folder / "environments.json").write_text(json.dumps({"records": {"lm/x": {"threads": 1}}}))
    return folder / "claims.csv", {"X1": claim}


def _bom_crlf(path: Path) -> None:
    """``path`` as a spreadsheet or a Windows editor saves it: a byte-order mark and CRLF line ends."""
    path.write_bytes(BOM + path.read_bytes().replace(b"\n", b"\r\n"))


def test_a_ledger_saved_with_a_byte_order_mark_and_crlf_reads_the_same(tmp_path):
    ledger, claims = _ledger(tmp_path / "rep")
    want = [(r.claim.id, r.verdict, r.estimate.mean, r.per_seed) for r in read_ledger(ledger, claims)]
    for name in ("claims.csv", "claims.json", "baselines.csv", "environments.json"):
        _bom_crlf(ledger.with_name(name))
    got = [(r.claim.id, r.verdict, r.estimate.mean, r.per_seed) for r in read_ledger(ledger, claims)]
    assert got == want
    assert merge_baselines([ledger.with_name("baselines.csv")]).rows[0][:3] == ["lm", "baseline", "perplexity"]
    assert merged_environments([ledger.parent]) is None  # read, one environment
    ledger.with_name("claims.json").unlink()  # a ledger older than claims.json: read from its CSV
    assert [(r.claim.id, r.verdict) for r in read_ledger(ledger, claims)] == [("X1", "supported")]


def test_an_unknown_verdict_is_refused_naming_the_file_and_claim(tmp_path):
    ledger, claims = _ledger(tmp_path / "rep")
    records = ledger.with_name("claims.json")
    doc = json.loads(records.read_text())
    doc["results"][0]["verdict"] = "maybe"
    records.write_text(json.dumps(doc))
    ledger.write_text(ledger.read_text().replace(",supported,", ",maybe,"))  # both edited alike
    with pytest.raises(LedgerError, match=r"claims.json: claim X1: verdict 'maybe' is not one of supported, not "
                                          r"supported, inconclusive, failed, not tested at this scale"):
        merge_results([ledger], list(claims.values()))
    records.unlink()
    with pytest.raises(LedgerError, match=r"claims.csv: claim X1: verdict 'maybe' is not one of"):
        merge_results([ledger], list(claims.values()))


@pytest.mark.parametrize(("extra", "message"), [
    ({"relative": "false"}, r"relative must be true or false, got 'false' \(str\)"),
    ({"relative": 1}, r"relative must be true or false, got 1 \(int\)"),
    ({"tolerance": float("nan")}, r"tolerance must be a finite number, got nan"),
    ({"tolerance": float("inf")}, r"tolerance must be a finite number, got inf"),
    ({"null_value": float("nan")}, r"null_value must be a finite number"),
    ({"test": "equivalence", "margin": float("nan")}, r"margin must be a finite number"),
])
def test_a_claim_with_a_string_boolean_or_a_nan_bound_is_refused(extra, message):
    raw = {"id": "X", "text": "x", "task": "lm", "kind": "value", "direction": "greater",
           "a": {**BASE, "field": "value"}, **extra}
    with pytest.raises(ClaimSpecError, match=r"^here \(X\): " + message):
        parse_claim(raw, "test", "here")


def test_a_claim_with_a_boolean_and_finite_bounds_still_parses():
    raw = {"id": "X", "text": "x", "task": "lm", "kind": "paired_difference", "direction": "less",
           "a": {**BASE, "field": "value"}, "b": {**BASE, "field": "value"}}
    claim = parse_claim({**raw, "relative": True, "tolerance": 0.1}, "test", "here")
    assert claim.relative is True and claim.threshold == pytest.approx(0.1)
    assert parse_claim(raw, "test", "here").relative is False


def test_claims_yaml_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "rep" / "claims.yaml"
    path.parent.mkdir()
    path.write_text('claims:\n  - {id: R1, text: t, task: lm, kind: paired_difference, direction: less,\n'
                    '     a: {variant: baseline, arm: none, ratio: 0.0, field: value},\n'
                    '     b: {variant: baseline, arm: none, ratio: 0.0, field: value}, relative: "false"}\n'
                    '  - {id: R2, text: t, task: lm, direction: less, tolerance: .nan,\n'
                    '     a: {variant: baseline, arm: none, ratio: 0.0, field: value}}\n')
    with pytest.raises(ClaimSpecError, match=r"claims.yaml:claims\[0\] \(R1\): relative must be true or false"):
        load_claims(path, shared={})
    path.write_text(path.read_text().replace('relative: "false"', "relative: false"))
    with pytest.raises(ClaimSpecError, match=r"claims.yaml:claims\[1\] \(R2\): tolerance must be a finite number"):
        load_claims(path, shared={})


def test_a_precondition_with_a_nan_bound_is_refused():
    from heads.report.spec import parse_precondition

    with pytest.raises(ClaimSpecError, match=r"precondition 'p': at_most must be a finite number"):
        parse_precondition("p", {"a": {**BASE, "task": "lm", "field": "value"}, "at_most": float("nan")}, "here")


# -- class 8: valid input read as valid -------------------------------------------------------------------------
README = ("# Title\n\nText before.\n\n<!-- ledger: rep/claims.csv brief -->\nold text\n<!-- /ledger -->\n\n"
          "Text after, no final newline")


def test_readme_keeps_crlf_a_byte_order_mark_and_a_missing_final_newline_outside_its_blocks(tmp_path, capsys):
    _ledger(tmp_path / "rep")
    lf = tmp_path / "LF.md"
    lf.write_text(README)
    rendered = refresh(lf)
    assert rendered.startswith("# Title\n\nText before.\n\n<!-- ledger: rep/claims.csv brief -->\n\n1 claims: 1 "
                               "supported")
    assert rendered.endswith("\n\n<!-- /ledger -->\n\nText after, no final newline")
    crlf = tmp_path / "CRLF.md"
    crlf.write_bytes(BOM + README.replace("\n", "\r\n").encode())
    assert refresh(crlf).encode() == BOM + rendered.replace("\n", "\r\n").encode()
    # the CLI writes just that, and then finds it current
    assert readme_main([str(crlf)]) == 0
    assert crlf.read_bytes() == BOM + rendered.replace("\n", "\r\n").encode()
    assert readme_main([str(crlf), "--check"]) == 0 and "current" in capsys.readouterr().out
    # a file without blocks is never rewritten: not its CRLF, not its missing final newline
    for text in ("plain\r\nno blocks\r\nno final newline", "plain\nno final newline"):
        plain = tmp_path / "plain.md"
        plain.write_bytes(text.encode())
        assert readme_main([str(plain)]) == 0 and plain.read_bytes() == text.encode()
    assert "its rendered blocks are current" in capsys.readouterr().out


def _labels_csv(folder: Path, values: tuple) -> None:
    for split, n in {"train": 12, "validation": 4, "test": 4}.items():
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"{split}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text_a", "text_b", "label"])
            writer.writerows([f"a {split} {i}", f"b {i}", values[i % len(values)]] for i in range(n))


def test_labels_coded_minus_one_plus_one_are_two_classes_none_lost(tmp_path):
    folder = tmp_path / "pm"
    _labels_csv(folder, (-1, 1))
    report: dict = {}
    data = hub.load("cls", dataset=str(folder), cache_dir=str(tmp_path / "cache"), report=report)
    assert {split: len(d) for split, d in data.items()} == {"train": 12, "validation": 4, "test": 4}
    assert data["train"].features["label"].names == ["-1", "1"]  # sorted values -> ids 0..k-1
    assert data["train"]["label"][:4] == [0, 1, 0, 1] and report["dropped"]["train"]["unlabelled"] == 0
    assert report["label_values"] == {"-1": -1, "1": 1}
    named = hub.load("cls", dataset=str(folder), cache_dir=str(tmp_path / "cache"), labels=["neg", "pos"])
    assert named["train"].features["label"].names == ["neg", "pos"] and named["train"]["label"][:2] == [0, 1]
    assert len(named["test"]) == 4
    # -1 only where train never has it is still GLUE's "no label" (hidden test labels): dropped and counted
    glue = tmp_path / "glue"
    _labels_csv(glue, (0, 1))
    _labels_csv(tmp_path / "unlabelled", (-1,))
    shutil.copy(tmp_path / "unlabelled" / "test.csv", glue / "test.csv")
    report = {}
    data = hub.load("cls", dataset=str(glue), cache_dir=str(tmp_path / "cache"), report=report)
    assert data["train"].features["label"].names == ["0", "1"] and report["dropped"]["test"]["unlabelled"] == 4


def test_a_translation_row_without_its_key_is_named_with_the_key(tmp_path):
    file = tmp_path / "pairs.jsonl"
    rows = [{"translation": {"en": f"sentence {i}", "fr": f"phrase {i}"}} for i in range(20)]
    del rows[5]["translation"]["fr"]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    splits = {"train": "train[:60%]", "validation": "train[60%:80%]", "test": "train[80%:]"}
    with pytest.raises(hub.DataError, match=r"row 6 of split 'train' has no key 'fr' in column 'translation' "
                                            r"\(data.columns.tgt='translation.fr'\); that row has \['en'\]"):
        hub.load("mt", dataset=str(file), columns={"src": "translation.en", "tgt": "translation.fr"}, splits=splits,
                 cache_dir=str(tmp_path / "cache"))
    rows[5]["translation"]["fr"] = None  # a null value is a blank text: dropped and counted, as before
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report: dict = {}
    data = hub.load("mt", dataset=str(file), columns={"src": "translation.en", "tgt": "translation.fr"},
                    splits=splits, cache_dir=str(tmp_path / "cache2"), report=report)
    assert len(data["train"]) == 11 and report["dropped"]["train"]["blank"] == 1
