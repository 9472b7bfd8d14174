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

    def translate(k: int) -> list[str]:  # a decoder stub that reads the [k, H] gates the ablation sets
        gate = get_gates(model)[target]
        assert gate.shape[0] == k
        return [h for row in gate for h in (BROKEN if float(row[0]) == 0.0 else REFS)]

    result = bleu_ablation(model, translate, REFS, samples=200, chunk=3)
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
        bleu_ablation(model, lambda k: ["one"] * k, REFS)


@pytest.fixture(scope="module")
def mt_run(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("bleu") / "run"
    assert main(["train", "--task", "mt", "--preset", "smoke", "--out", str(out), f"data.root={data_root}",
                 "train.progress=false"]) == 0
    return out


def test_heads_ablate_test_bleu_records_the_bootstrap_per_head(mt_run, tmp_path):
    out = tmp_path / "a.json"
    assert main(["ablate", str(mt_run), "--batches", "1", "--test", "bleu", "--samples", "50", "--decode-chunk", "5",
                 "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert table["test"] == "bleu" and table["bootstrap"]["samples"] == 50
    # each phase's seconds, so a visit's record says where an ablation's time goes
    assert set(table["seconds"]) == {"ablation", "all_but_one", "bleu"}
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



@pytest.mark.parametrize("beams", [1, 3])
def test_decoding_under_stacked_gates_translates_each_copy_as_its_own_gates_do(data_root, beams):
    """Copies of the sentences decoded in one generate call under [K, H] gates (beam search expands rows in
    place, so the k-major layout holds) give copy k the translations of decoding under row k alone: the batched
    BLEU ablation is the one-at-a-time one, only faster."""
    import torch
    from conftest import smoke

    from heads.surgery import gates
    from heads.tasks import get_task

    cfg = smoke("mt", data_root, "eval.max_new_tokens=8", f"eval.beams={beams}", "data.batch_size=5")
    task = get_task("mt")
    tokenizer = task.tokenizer(cfg)
    data = task.examples(cfg, tokenizer, "validation")[:7]  # two batches of 5 and 2
    torch.manual_seed(0)
    model = install(task.build_model(cfg, tokenizer))
    with torch.no_grad():  # weights large enough that what a model says depends on its input and its heads
        for param in model.parameters():
            if param.dim() >= 2:  # matrices and embeddings; layer norms keep theirs
                param.normal_(0.0, 0.5)
    layout = head_layout(model)
    first = next(iter(layout))
    rows = [{n: torch.ones(len(k)) for n, k in layout.items()} for _ in range(3)]
    rows[1][first][0] = 0.0
    for name in layout:  # row 2: every site keeps only its first head
        rows[2][name][1:] = 0.0
    alone = []
    for row in rows:
        with gates(model, row):
            alone.append(task.translate(model, cfg, tokenizer, data))
    # the comparison says something: sentences get different translations, and the gates change them
    assert len(set(alone[0])) > 3 and alone[0] != alone[1] != alone[2]
    stacked = {name: torch.stack([row[name] for row in rows]) for name in layout}
    with gates(model, stacked):
        together = task.translate(model, cfg, tokenizer, data, copies=3)
    assert together == [h for hyps in alone for h in hyps]
    with pytest.raises(ValueError, match="copies"):
        task.translate(model, cfg, tokenizer, data, copies=0)


def test_heads_ablate_refuses_a_decode_chunk_below_one(mt_run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["ablate", str(mt_run), "--test", "bleu", "--decode-chunk", "0", "--out", str(tmp_path / "a.json")])
    assert "--decode-chunk must be >= 1" in capsys.readouterr().err
