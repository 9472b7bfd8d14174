"""Michel et al.'s translation ablation on BLEU (heads.scoring.bleu_ablation): each head masked alone, decoded,
and tested against the full model by sacrebleu's paired bootstrap."""

from __future__ import annotations

import json

import pytest
from conftest import build
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from heads.cli import main
from heads.scoring.bleu_ablation import bleu_ablation
from heads.surgery import get_gates, head_layout, install

REFS = [f"the {w} went up to the house of the lord on day {i}" for i, w in
        enumerate(["king", "priest", "people", "prophet", "servant", "woman", "man", "son"] * 5)]
BROKEN = [r.split(" on ")[0] for r in REFS]  # what the model says without the head that matters


def test_the_head_that_changes_translations_is_significant_and_the_others_are_not():
    model = install(build("marian"))
    target = next(iter(head_layout(model)))  # the first site's first head is made to matter

    def translate() -> list[str]:  # a decoder stub that reads the gates the ablation sets
        gate = get_gates(model)[target]
        return BROKEN if gate is not None and float(gate[0]) == 0.0 else list(REFS)

    result = bleu_ablation(model, translate, REFS, samples=200)
    assert result.baseline_bleu == pytest.approx(100.0) and result.sentences == len(REFS)
    assert len(result.rows) == sum(map(len, head_layout(model).values()))
    matters = [r for r in result.rows if (r.site, r.position) == (target, 0)]
    rest = [r for r in result.rows if (r.site, r.position) != (target, 0)]
    assert matters[0].delta_bleu < -10 and matters[0].p_value < 0.01
    # sacrebleu itself, on the same two systems and resamples, gives the same p
    _, ref = PairedTest([("base", list(REFS)), ("cut", BROKEN)], {"BLEU": BLEU()}, [REFS], test_type="bs",
                        n_samples=200)()
    assert matters[0].p_value == pytest.approx(ref["BLEU"][1].p_value)
    # unchanged translations are no evidence: p = 1 (sacrebleu alone would say 1/201, "significant")
    assert all(r.delta_bleu == 0.0 and r.p_value == 1.0 for r in rest)
    assert all(g is None for g in get_gates(model).values()), "the gates are put back"


def test_a_mismatch_of_translations_and_references_is_refused():
    model = install(build("marian"))
    with pytest.raises(ValueError, match="translations for"):
        bleu_ablation(model, lambda: ["one"], REFS)


@pytest.fixture(scope="module")
def mt_run(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("bleu") / "run"
    assert main(["train", "--task", "mt", "--preset", "smoke", "--out", str(out), f"data.root={data_root}",
                 "train.progress=false"]) == 0
    return out


def test_heads_ablate_test_bleu_records_the_bootstrap_per_head(mt_run, tmp_path):
    out = tmp_path / "a.json"
    assert main(["ablate", str(mt_run), "--batches", "1", "--test", "bleu", "--samples", "50", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert table["test"] == "bleu" and table["bootstrap"]["samples"] == 50
    assert table["bleu_signature"].startswith("nrefs:1") and table["bleu_sentences"] > 0
    for row in table["heads"]:
        assert {"delta_bleu", "bleu", "p_value", "p_value_loss", "delta_loss"} <= set(row)
        assert row["significant"] == (row["p_value"] < 0.05)
        assert row["bleu"] - table["baseline_bleu"] == pytest.approx(row["delta_bleu"])


def test_heads_ablate_test_bleu_is_refused_for_a_task_that_does_not_translate(tmp_path, data_root, capsys):
    run = tmp_path / "lm"
    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), f"data.root={data_root}",
                 "train.progress=false", "train.steps=2"]) == 0
    with pytest.raises(SystemExit):
        main(["ablate", str(run), "--batches", "1", "--test", "bleu", "--out", str(tmp_path / "a.json")])
    assert "does not translate" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()
