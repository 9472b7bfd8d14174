"""Task metrics against independent computations: BLEU and chrF on fixed strings against sacrebleu itself."""

import pytest
import sacrebleu

from heads.tasks.mt import corpus_scores

HYPS = ["the cat sat on the mat", "he went home", "and God saw the light, that it was good"]
REFS = ["the cat is on the mat", "he went home early", "And God saw the light, that it was good."]


def test_bleu_and_chrf_are_sacrebleus_corpus_scores():
    scores = corpus_scores(HYPS, REFS)
    assert scores["bleu"] == sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert scores["chrf"] == sacrebleu.corpus_chrf(HYPS, [REFS]).score
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
