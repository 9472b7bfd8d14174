"""Task metrics against independent computations: BLEU and chrF on fixed strings against sacrebleu itself, and
scored against whole references."""

import copy
import json

import numpy as np
import pytest
import sacrebleu
from conftest import smoke

from heads.cli.common import UserError
from heads.tasks import get_task
from heads.tasks.mt import corpus_scores

HYPS = ["the cat sat on the mat", "he went home", "and God saw the light, that it was good"]
REFS = ["the cat is on the mat", "he went home early", "And God saw the light, that it was good."]


def test_bleu_and_chrf_are_sacrebleus_corpus_scores():
    scores = corpus_scores(HYPS, REFS)
    assert scores["bleu"] == sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert scores["chrf"] == sacrebleu.corpus_chrf(HYPS, [REFS]).score
    assert (scores["hyp_len"], scores["ref_len"]) == (19, 21)  # 13a tokens: "good." is two
    assert scores["sentences"] == 3 and scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    # the order matters (the hypotheses are shorter: brevity penalty; chrF weighs recall): hypotheses first
    assert scores["bleu"] != sacrebleu.corpus_bleu(REFS, [HYPS]).score
    assert scores["chrf"] != sacrebleu.corpus_chrf(REFS, [HYPS]).score
    # corpus-level statistics, not an average of sentence scores
    sentence_mean = sum(sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(HYPS, REFS, strict=True)) / 3
    assert scores["bleu"] != pytest.approx(sentence_mean)


def test_known_values():
    assert corpus_scores(REFS, REFS)["bleu"] == pytest.approx(100.0)
    assert corpus_scores(REFS, REFS)["chrf"] == pytest.approx(100.0)
    assert corpus_scores(["xyzzy plugh"], ["the cat is on the mat"])["bleu"] == 0.0
    # case counts: "And" vs "and" and the final "." are misses
    assert corpus_scores(HYPS[2:], REFS[2:])["bleu"] < 100.0


def test_references_are_whole_verses_even_past_seq_len(data_root):
    """The model sees a verse cut to seq_len; BLEU scores against the whole verse."""
    cfg = smoke("mt", data_root, "data.seq_len=8", "eval.max_examples=8", "eval.max_new_tokens=6")
    task = get_task("mt")
    tokenizer = task.tokenizer(cfg)
    examples, refs = task.examples(cfg, tokenizer, "validation"), task.references(cfg, tokenizer, "validation")
    assert refs == [text.strip() for text in task.splits(cfg)["validation"]["tgt"]]  # one per example, in order
    decoded = [tokenizer.decode(t, skip_special_tokens=True).strip() for _, t in examples]
    cut = [i for i, (d, r) in enumerate(zip(decoded, refs, strict=True)) if d != r]
    assert cut and all(len(tokenizer(refs[i], add_special_tokens=False)["input_ids"]) > 7 for i in cut)
    # the model's target is the verse's start, cut by bytes (mid-character, hence a trailing U+FFFD at times)
    assert all(refs[i].startswith(decoded[i].rstrip("\ufffd")) for i in cut)

    model = task.build_model(cfg, tokenizer)
    result = task.evaluate(model, cfg, tokenizer, "validation")
    hyps = task.translate(model, cfg, tokenizer, examples[:8])
    assert result["bleu"] == corpus_scores(hyps, refs[:8])["bleu"] and result["sentences"] == 8
    assert result["chrf"] == corpus_scores(hyps, refs[:8])["chrf"]
    # a model this small scores 0 against any reference; the reference length says which ones were used
    assert result["ref_len"] == sacrebleu.corpus_bleu(hyps, [refs[:8]]).ref_len
    assert result["ref_len"] > sacrebleu.corpus_bleu(hyps, [decoded[:8]]).ref_len


def test_word_overlap_baseline_is_a_logistic_regression_on_overlap_features():
    from heads.analysis.overlap import fit_logistic, overlap_baseline, overlap_features, predict

    assert overlap_features("The cat sat", "the cat ran away") == [2 / 5, 2 / 3, 2 / 4, 3 / 4]
    pairs = [("a b c d", "a b c d", 1), ("a b c d", "a b c e", 1), ("a b c d", "w x y z", 0), ("a b", "y z", 0)]
    assert overlap_baseline(pairs, pairs)["accuracy"] == 1.0
    with pytest.raises(ValueError, match="two labels"):
        overlap_baseline([*pairs, ("a", "b", 2)], pairs)
    # the same fit as an independent implementation (scikit-learn's, penalty matched: C = 1 / l2)
    from sklearn import linear_model  # the test extra installs it
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    y = (x @ [1.0, -2.0, 0.5, 0.0] + rng.normal(size=200) > 0).astype(float)
    w = fit_logistic(x, y, l2=1.0)
    ref = linear_model.LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(x, y)
    # sklearn leaves the intercept unpenalised; ours penalises it too, so compare the predictions and the slopes
    assert np.mean(predict(w, x) == ref.predict(x)) >= 0.99
    assert np.allclose(w[:4], ref.coef_[0], atol=0.05)


def test_heads_trivial_scores_word_overlap_on_the_examples_the_model_is_scored_on(data_root, tmp_path):
    from heads.cli import main

    out = tmp_path / "trivial.json"
    assert main(["trivial", "--task", "cls", "--preset", "smoke", f"data.root={data_root}", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    cfg = smoke("cls", data_root)
    result = record["baselines"]["word_overlap"]
    assert record["task"] == "cls" and result["examples"] == min(cfg.eval.max_examples,
                                                                 len(get_task("cls").splits(cfg)["validation"]))
    assert 0.5 < result["accuracy"] <= 1.0  # the offline paraphrase task: overlap alone nearly solves it
    assert record["environment"]["deterministic"] is True  # as every training job's (no spurious "differ")
    with pytest.raises(UserError, match="has no trivial baseline"):
        main(["trivial", "--task", "lm", "--preset", "smoke", f"data.root={data_root}", "--out", str(tmp_path / "x")])


@pytest.mark.parametrize("task_name,metrics", [("cls", ("accuracy", "loss")),
                                               ("lm", ("loss", "perplexity", "bits_per_token")),
                                               ("mt", ("bleu", "chrf"))])
def test_example_columns_give_the_headline_metrics_back(data_root, tmp_path, task_name, metrics):
    """What evaluate keeps per example (heads.examples) recomputes its headline numbers, and a resample of the
    units gives another value: the material of intervals that count the test set's sampling."""
    from heads.examples import ExampleValues, record, split_off
    from heads.io import write_json

    cfg = smoke(task_name, data_root, "eval.max_examples=12", "eval.max_new_tokens=6")
    task = get_task(task_name)
    tokenizer = task.tokenizer(cfg)
    result, columns = split_off(task.evaluate(task.build_model(cfg, tokenizer), cfg, tokenizer, "validation"))
    assert columns is not None and "per_example" not in result
    write_json(tmp_path / "examples.json", record(columns, result))
    values = ExampleValues.read(tmp_path / "examples.json")
    assert values is not None and values.units >= 2
    for name in metrics:
        assert values.supports(name)
        assert values.metric(name) == pytest.approx(result[name], rel=1e-6, abs=1e-9), name
    assert not values.supports("no_such_metric")
    idx = np.random.default_rng(0).integers(0, values.units, values.units)
    assert all(np.isfinite(values.metric(name, idx)) for name in metrics)


def test_an_lm_window_starts_as_the_tokenizer_starts_a_text(data_root):
    """Gemma's tokenizer puts <bos> before a text and the model saw it first in every training sequence: each
    window then starts with it (seq_len tokens in all) and the windows' texts stay aligned; a tokenizer that adds
    nothing (SmolLM2's, our BPE) leaves the windows as they were."""
    from tokenizers import processors

    from heads.tasks.lm import text_prefix
    from tests.conftest import smoke

    task = get_task("lm")
    cfg = smoke("lm", data_root)
    plain = task.tokenizer(cfg)
    assert text_prefix(plain) == []
    before, owners = task.encode(cfg, plain, "test"), task.clusters(cfg, plain, "test")
    bos = plain.convert_tokens_to_ids(plain.bos_token)
    starting = copy.deepcopy(plain)
    starting.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{plain.bos_token} $A", special_tokens=[(plain.bos_token, bos)])
    assert text_prefix(starting) == [bos]
    windows = task.encode(cfg, starting, "test")
    n = cfg.data.seq_len
    assert all(len(w) == n and w[0] == bos for w in windows) and len(windows) >= len(before)
    stream = task._stream(cfg, plain, "test")[0]
    assert [t for w in windows for t in w[1:]] == stream[: len(windows) * (n - 1)]
    assert len(task.clusters(cfg, starting, "test")) == len(windows) and len(owners) == len(before)
