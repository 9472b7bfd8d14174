"""``heads speed`` and ``heads roles`` on a tiny saved Llama and the smoke LM task (offline, seconds).

The Llama has one head built to attend to the previous token: its queries and
keys are constant (zero weights, bias only), the key turned against the query
by one position's RoPE angle in two frequency pairs, so their dot product for
query m and key n is a sum of cos(theta * (1 + n - m)), largest at n = m - 1.
"""

import argparse
import copy
import json
import math

import pytest
import torch
from conftest import batch_for, build

import heads.cli as cli_module
from heads import models
from heads.analysis import forward_inputs, head_roles, layout_at_ratio
from heads.cli import analysis
from heads.scoring import compute_scores
from heads.surgery import head_layout, num_heads, prune_heads, save, sites

SITE0 = "model.layers.0.self_attn"
SITE1 = "model.layers.1.self_attn"
POSITIONAL = 1  # the head of SITE0 made to attend to the previous token
REMOVED = {SITE0: [0, 2], SITE1: [3]}


def previous_token_llama() -> torch.nn.Module:
    model = models.llama(vocab=300, d=32, layers=2, heads=4, max_len=64, attention_bias=True).eval()
    attn = model.get_submodule(SITE0)
    d = attn.head_dim  # 8: RoPE pairs dims (i, i + d/2); pair 0 turns by 1 radian per position
    rows = slice(POSITIONAL * d, (POSITIONAL + 1) * d)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight[rows] = 0
            proj.bias[rows] = 0
        a = 20.0
        for pair, theta in ((0, 1.0), (1, 10000 ** (-2 / d))):  # the two fastest RoPE frequencies: no aliasing
            attn.q_proj.bias[POSITIONAL * d + pair] = a
            attn.k_proj.bias[POSITIONAL * d + pair] = a * math.cos(theta)
            attn.k_proj.bias[POSITIONAL * d + pair + d // 2] = a * math.sin(theta)
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory, data_root):
    root = tmp_path_factory.mktemp("analysis")
    full = previous_token_llama()
    save(full, root / "full")
    pruned = copy.deepcopy(full)
    prune_heads(pruned, REMOVED)
    save(pruned, root / "pruned")
    return {"root": root, "full": root / "full", "pruned": root / "pruned", "data": f"data.root={data_root}"}


@pytest.fixture
def cli(monkeypatch):
    """``heads.cli.main`` with these commands registered (whether or not the package wires them in yet)."""
    original = cli_module.build_parser

    def build_parser():
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "speed" not in sub.choices:
            analysis.register(sub)
        return parser

    monkeypatch.setattr(cli_module, "build_parser", build_parser)
    return cli_module.main


def test_speed_rows_and_fields(saved, cli, tmp_path):
    out = tmp_path / "speed.json"
    assert cli(["speed", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"],
                "--ratios", "0.5", "--batches", "1", "4", "--repeats", "2", "--examples", "4", "--warmup", "0",
                "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert sorted((r["ratio"], r["batch"]) for r in rows) == [(0.0, 1), (0.0, 4), (0.5, 1), (0.5, 4)]
    for r in rows:
        assert {"ratio", "batch", "examples_per_s", "seconds", "params", "heads", "speedup", "load_avg",
                "times", "examples", "threads", "seconds_min", "cpu_seconds", "speedup_min", "cpu_speedup"} <= set(r)
        assert r["examples"] == 4 and len(r["times"]) == 2 and r["threads"] == 1
        assert r["examples_per_s"] > 0 and r["seconds"] > 0 and r["max_len"] == 32
        assert r["heads"] == (8 if r["ratio"] == 0 else 4)
        if r["ratio"] == 0:
            assert r["speedup"] == r["speedup_min"] == r["cpu_speedup"] == 1.0
        else:
            assert r["speedup"] == pytest.approx(
                r["examples_per_s"] / next(x["examples_per_s"] for x in rows if x["ratio"] == 0
                                           and x["batch"] == r["batch"]))
    full, half = (next(r["params"] for r in rows if r["ratio"] == q and r["batch"] == 1) for q in (0.0, 0.5))
    assert half == full - 2 * 2 * (4 * 8 * 32 + 3 * 8)  # two sites lose 2 heads: q,k,v rows, o columns, q,k,v biases


def test_speed_by_importance_prunes_a_layout_of_that_size(saved, cli, tmp_path):
    out = tmp_path / "speed.json"
    assert cli(["speed", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"],
                "--ratios", "0.25", "--batches", "2", "--repeats", "1", "--examples", "2", "--warmup", "0",
                "--scorer", "importance", "--score-batches", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["ratio"], r["heads"], r["scorer"]) for r in rows] == [(0.0, 8, "importance"), (0.25, 6, "importance")]


def test_layout_at_ratio_uniform_keeps_first_heads_and_scores_keep_the_best():
    model = build("llama", heads=4)
    assert layout_at_ratio(model, 0.5) == {s.name: [0, 1] for s in sites(model)}
    assert layout_at_ratio(model, 0.0) == head_layout(model)
    prune_heads(model, {SITE0: [0]})
    assert layout_at_ratio(model, 0.25)[SITE0] == [1, 2]  # a pruned site: its first remaining heads (3 - 1)
    scores = {SITE0: torch.tensor([0.1, 0.9, 0.5]), SITE1: torch.tensor([0.2, 0.8, 0.3, 0.7])}
    assert layout_at_ratio(model, 3 / 7, scores) == {SITE0: [2, 3], SITE1: [1, 3]}
    with pytest.raises(ValueError, match="ratio"):
        layout_at_ratio(model, 1.5)


def test_roles_find_the_previous_token_head(saved, cli, tmp_path):
    out = tmp_path / "roles.json"
    assert cli(["roles", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "2",
                "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    heads = result["heads"]
    assert len(heads) == 8 and all(h["kept"] for h in heads)
    assert all(0.0 <= h["confidence"] <= 1.0 + 1e-6 for h in heads)
    assert all(h["kind"] == "causal" and h["label"] in ("L0.causal", "L1.causal") for h in heads)
    by = {(h["site"], h["head"]): h for h in heads}
    target = by[(SITE0, POSITIONAL)]
    # Every query but the first of each 32-token window (it has only itself to look at).
    assert target["previous"] == pytest.approx(31 / 32) and target["next"] == 0.0
    assert target["positional"] == target["previous"] and target["is_positional"]
    assert target["confidence"] > 0.9
    assert [k for k, h in by.items() if h["is_positional"]] == [(SITE0, POSITIONAL)]
    summary = result["summary"]
    assert summary["kept"]["heads"] == 8 and summary["pruned"]["heads"] == 0
    assert summary["kept"]["positional_heads"] == 1 and summary["pruned"]["confidence"] is None


def test_roles_of_a_pruned_model_against_its_reference(saved, cli, tmp_path):
    out = tmp_path / "roles.json"
    assert cli(["roles", str(saved["pruned"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "1",
                "--reference", str(saved["full"]), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    kept = {(h["site"], h["head"]): h["kept"] for h in result["heads"]}
    assert len(kept) == 8
    assert kept == {(s, h): h not in REMOVED[s] for s in (SITE0, SITE1) for h in range(4)}
    assert result["summary"]["kept"]["heads"] == 5 and result["summary"]["pruned"]["heads"] == 3
    assert result["summary"]["kept"]["positional_heads"] == 1  # the previous-token head was kept
    # Without the reference only the pruned model's own heads appear.
    assert cli(["roles", str(saved["pruned"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "1",
                "--out", str(out)]) == 0
    own = json.loads(out.read_text())["heads"]
    assert sorted((h["site"], h["head"]) for h in own) == sorted(k for k, v in kept.items() if v)


def test_roles_reject_a_reference_with_other_heads(saved, cli, tmp_path):
    with pytest.raises(SystemExit, match="heads \\[0, 2\\] its reference does not"):
        cli(["roles", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "1",
             "--reference", str(saved["pruned"])])


def test_cross_sites_have_no_positional_role_and_padding_is_left_out():
    model = build("marian")
    batch = batch_for("marian")
    roles = head_roles(model, [batch])
    by = {s.name: s for s in sites(model)}
    assert {s.kind for s in by.values()} == {"self", "causal", "cross"}
    for name, entry in roles.items():
        assert (entry["positional"] is None) == (by[name].kind == "cross"), name
        assert bool(((entry["confidence"] >= 0) & (entry["confidence"] <= 1 + 1e-6)).all())
        queries = int(batch["attention_mask"].sum()) if by[name].stack == "encoder" else batch["labels"].numel()
        assert entry["rows"] == queries, name
    confidence = compute_scores("confidence", model, [batch])  # the scorer's reading of the same quantity
    for name, entry in roles.items():
        torch.testing.assert_close(entry["confidence"], confidence[name])


def test_forward_inputs_drop_what_the_model_does_not_take():
    bert = build("bert", labels=None)
    batch = batch_for("bert")
    assert "labels" not in forward_inputs(bert, batch)
    marian = build("marian")
    mt = {k: v for k, v in batch_for("marian").items() if k != "decoder_input_ids"}
    inputs = forward_inputs(marian, mt, labels=False)
    assert "labels" not in inputs and inputs["decoder_input_ids"].shape == mt["labels"].shape


def test_rare_token_share_against_the_attention_maps_themselves():
    # Voita et al.'s rare-token role, recomputed here from the model's own attention maps (eager,
    # output_attentions): the share of real queries whose largest weight falls on their sentence's rarest token.
    from heads.analysis.roles import token_counts

    model = build("bert")
    batch = batch_for("bert")
    counts = token_counts([batch_for("bert", batch=8, seed=s) for s in range(3)], 256)
    assert counts.sum() == sum(int(batch_for("bert", batch=8, seed=s)["attention_mask"].sum()) for s in range(3))
    roles = head_roles(model, [batch], counts)
    mask = batch["attention_mask"].bool()
    freq = counts[batch["input_ids"]].masked_fill(~mask, float("inf"))
    rarest = freq.argmin(-1)  # [B]
    model.set_attn_implementation("eager")
    with torch.no_grad():
        maps = model(**{k: v for k, v in batch.items() if k != "labels"}, output_attentions=True).attentions
    for site, attn in zip(sites(model), maps, strict=True):  # one self site per layer, in order
        top = attn.argmax(-1)  # [B, H, T]
        hits = (top == rarest[:, None, None]).permute(0, 2, 1)[mask]  # [real queries, H]
        torch.testing.assert_close(roles[site.name]["rare"], hits.float().mean(0))
    # without frequencies, no rare-token role; cross sites never have one (causal sites: the rarest token before
    # the query, tests/test_masking.py)
    assert all(entry["rare"] is None for entry in head_roles(model, [batch]).values())
    marian = build("marian")
    rare = head_roles(marian, [batch_for("marian")], token_counts([batch_for("marian")], 256))
    assert {s.kind for s in sites(marian) if rare[s.name]["rare"] is not None} == {"self", "causal"}


def test_redundancy_command_writes_one_row_per_definition(saved, cli, tmp_path, capsys):
    out = tmp_path / "redundancy.json"
    assert cli(["redundancy", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "2",
                "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [r["pooling"] for r in result["rows"]] == ["token", "mean"] and result["batches"] == 2
    assert all(0.0 <= r["redundancy_ratio"] <= 1.0 and r["threshold"] == 0.85 for r in result["rows"])
    assert "environment" in result and "redundant" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a cosine threshold outside (0, 1] is refused before anything loads
        cli(["redundancy", str(saved["full"]), "--task", "lm", "--preset", "smoke", "--threshold", "1.5"])


def test_redundancy_on_domains_is_stratified_with_each_domains_own_ratio_and_the_pooled_one(saved, cli, tmp_path):
    """D7's redundancy view: a head is redundant (stratified) only if it is in every genre; each genre's own ratio
    and the genres pooled are kept beside it, recomputed here from the same batches the command drew."""
    from heads.analysis.redundancy import redundancy
    from heads.loading import domain_batches, model_for_task
    from heads.surgery import load

    out = tmp_path / "genres.json"
    genres = ["lm_wisdom", "lm_letters"]
    assert cli(["redundancy", str(saved["full"]), "--task", "lm", "--preset", "smoke", saved["data"], "--batches", "2",
                "--domains", *genres, "--threshold", "0.2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["domains"] == genres and result["batches"] == 4
    views = {(r["view"], r["pooling"]): r for r in result["rows"]}
    assert set(views) == {(v, p) for v in ("stratified", "pooled") for p in ("token", "mean")}
    loaded = model_for_task(str(saved["full"]), "lm", "smoke", overrides=[saved["data"]], head=False)
    domains = domain_batches(loaded, genres, "validation", 2, "test")
    model = load(saved["full"])
    for pooling in ("token", "mean"):
        strat = views[("stratified", pooling)]
        assert set(strat["domains"]) == set(genres)
        assert strat["redundancy_ratio"] <= min(d["redundancy_ratio"] for d in strat["domains"].values())
        for genre in genres:
            own = redundancy(model, domains[genre], poolings=[pooling], threshold=0.2)[0]
            assert strat["domains"][genre]["redundancy_ratio"] == pytest.approx(own["redundancy_ratio"])
        pooled = redundancy(model, [b for g in genres for b in domains[g]], poolings=[pooling], threshold=0.2)[0]
        assert views[("pooled", pooling)]["redundancy_ratio"] == pytest.approx(pooled["redundancy_ratio"])
    # at this threshold a quarter of the heads look redundant on the genres pooled, none in every genre
    assert views[("pooled", "mean")]["redundancy_ratio"] > views[("stratified", "mean")]["redundancy_ratio"]
    with pytest.raises(SystemExit, match="columns"):  # a corpus the task cannot read, refused by name
        cli(["redundancy", str(saved["full"]), "--task", "lm", "--preset", "smoke", "--domains", "mt"])


def test_shift_command_scores_both_models_in_domain_and_on_each_shifted_corpus(saved, cli, tmp_path, capsys):
    out = tmp_path / "shift.json"
    assert cli(["shift", str(saved["pruned"]), "--reference", str(saved["full"]), "--datasets", "lm_kjv",
                "--task", "lm", "--preset", "smoke", saved["data"], "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    home, kjv = result["in_domain"], result["shifted"]["lm_kjv"]
    assert home["dataset"] is None and kjv["dataset"] == "lm_kjv" and home["metric"] == "perplexity"
    # the same reference scored on other text: another perplexity; the gap is the shifted change minus the home one
    assert kjv["reference"] != home["reference"]
    assert kjv["gap"] == pytest.approx(kjv["change"] - home["change"])
    assert "gap" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a corpus with other columns than the task reads is refused by name
        cli(["shift", str(saved["pruned"]), "--reference", str(saved["full"]), "--datasets", "mt",
             "--task", "lm", "--preset", "smoke", saved["data"]])


# -- memory (D8) ---------------------------------------------------------------------------------------
def test_largest_batch_searches_up_by_doubling_then_bisects():
    from heads.analysis.memory import largest_batch

    calls = []

    def peak(size: int) -> int:  # linear in the batch: 100 fixed + 10 per example
        calls.append(size)
        return 100 + 10 * size

    assert largest_batch(peak, 100 + 10 * 37, 16, 128)[0] == 37
    assert calls[:3] == [16, 32, 64] and len(calls) <= 9  # doubling to the first miss, then ~log2(32) halvings
    assert largest_batch(peak, 10**9, 16, 100)[0] == 100  # all fit: the limit
    assert largest_batch(peak, 100 + 10 * 5, 16, 128)[0] == 5  # the start does not fit: down from it
    assert largest_batch(peak, 50, 16, 128)[0] == 0  # not even one example
    found, seen = largest_batch(peak, 100 + 10 * 20, 16, 64, known={16: 1})
    assert found == 20 and seen[16] == 1  # a peak measured already is not measured again
    with pytest.raises(ValueError):
        largest_batch(peak, 10, 0, 8)


def test_memory_of_a_pruned_model_is_lower_and_measured_the_same_twice():
    from heads.analysis.memory import Trainer, memory_rows

    full = previous_token_llama()
    pruned = copy.deepcopy(full)
    prune_heads(pruned, REMOVED)

    def batch_of(size: int) -> dict:
        ids = torch.randint(0, full.config.vocab_size, (size, 16), generator=torch.Generator().manual_seed(size))
        return {"input_ids": ids, "labels": ids}

    runs = [memory_rows({"reference": Trainer(copy.deepcopy(full), batch_of),
                         "model": Trainer(copy.deepcopy(pruned), batch_of)}, cap_batch=4, limit=16) for _ in range(2)]
    ref, model = runs[0]["models"]["reference"], runs[0]["models"]["model"]
    assert runs[0]["models"]["model"]["measured"] == runs[1]["models"]["model"]["measured"]  # deterministic bytes
    assert ref["largest_batch"] == 4 and ref["peak_bytes"] == runs[0]["cap_bytes"]
    assert model["peak_bytes"] < ref["peak_bytes"] and model["optimizer_bytes"] < ref["optimizer_bytes"]
    assert model["largest_batch"] >= 4 and model["batch_ratio"] == model["largest_batch"] / 4
    # the optimizer holds exactly two moments per trainable parameter, the removed heads' gone with them
    assert model["optimizer_bytes"] == 2 * model["param_bytes"]
    with pytest.raises(ValueError):
        memory_rows({"reference": Trainer(full, batch_of)}, cap_batch=8, limit=4)


def test_memory_command_compares_a_pruned_model_with_its_reference(saved, cli, tmp_path, capsys):
    out = tmp_path / "memory.json"
    assert cli(["memory", str(saved["pruned"]), "--reference", str(saved["full"]), "--cap-batch", "2", "--limit", "4",
                "--task", "lm", "--preset", "smoke", saved["data"], "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    ref, model = result["models"]["reference"], result["models"]["model"]
    assert result["cap_batch"] == 2 and ref["largest_batch"] == 2 and model["heads"] < ref["heads"]
    assert model["peak_bytes"] < ref["peak_bytes"] and 1 <= model["batch_ratio"] <= 2
    assert "environment" in result and "largest batch" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="below --cap-batch"):
        cli(["memory", str(saved["pruned"]), "--reference", str(saved["full"]), "--cap-batch", "4", "--limit", "2",
             "--task", "lm", "--preset", "smoke", saved["data"]])


# -- the training-step clock (D1, D4) ---------------------------------------------------------------------
def test_clock_times_models_interleaved_and_pairs_each_repeat(monkeypatch):
    """Ratios are paired within a repeat: load that drifts between repeats cancels, and the order rotates."""
    from heads.analysis import clock

    now = {"t": 0.0}
    order: list[str] = []
    load = iter([1.0] * 3 + [3.0] * 3 + [2.0] * 3)  # the machine's slowdown, one value per timed block

    class Fake:
        device = torch.device("cpu")

        def __init__(self, name: str, cost: float) -> None:
            self.name, self.cost, self.slow = name, cost, 1.0

        def step(self, batch) -> None:
            now["t"] += self.cost * self.slow

    fakes = {"reference": Fake("reference", 2.0), "model": Fake("model", 1.5), "dropout": Fake("dropout", 2.5)}
    real = clock._time_steps

    def timed(trainer, batch, steps):
        order.append(trainer.name)
        trainer.slow = next(load)
        return real(trainer, batch, steps)

    monkeypatch.setattr(clock, "_time_steps", timed)
    monkeypatch.setattr(clock.time, "perf_counter", lambda: now["t"])
    monkeypatch.setattr(clock.time, "process_time", lambda: now["t"] / 2)
    out = clock.clock_rows(fakes, {}, steps=4, repeats=3, warmup=0)
    assert order == ["reference", "model", "dropout", "model", "dropout", "reference", "dropout", "reference", "model"]
    model, dropout = out["models"]["model"], out["models"]["dropout"]
    assert model["step_seconds"] == [1.5, 4.5, 3.0] and out["models"]["reference"]["step_s"] == 4.0
    assert model["step_ratio"] == pytest.approx(0.75) and model["cpu_step_ratio"] == pytest.approx(0.75)
    assert dropout["throughput_ratio"] == pytest.approx(0.8) and out["models"]["reference"]["step_ratio"] == 1.0
    with pytest.raises(ValueError, match="reference"):
        clock.clock_rows({"model": fakes["model"]}, {}, steps=1, repeats=1)
    with pytest.raises(ValueError, match="steps"):
        clock.clock_rows(fakes, {}, steps=0, repeats=1)


def test_clock_command_times_the_pruned_model_its_reference_and_dropout(saved, cli, tmp_path, capsys):
    out = tmp_path / "clock.json"
    assert cli(["clock", str(saved["pruned"]), "--reference", str(saved["full"]), "--dropout", "0.25", "--batch", "2",
                "--steps", "1", "--repeats", "2", "--task", "lm", "--preset", "smoke", saved["data"],
                "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    models = result["models"]
    assert set(models) == {"reference", "model", "dropout"} and result["dropout"] == 0.25 and result["batch"] == 2
    assert models["model"]["heads"] < models["reference"]["heads"] == models["dropout"]["heads"]
    for row in models.values():
        assert len(row["step_seconds"]) == 2 and row["step_s"] > 0 and row["step_ratio"] > 0
    assert models["reference"]["step_ratio"] == 1.0 and "environment" in result
    assert "a step" in capsys.readouterr().out
    for bad, message in ((["--steps", "0"], "--steps"), (["--dropout", "1.5"], "--dropout"),
                         (["--batch", "0"], "--batch")):
        with pytest.raises(SystemExit, match=message):
            cli(["clock", str(saved["pruned"]), "--reference", str(saved["full"]), "--task", "lm", "--preset", "smoke",
                 saved["data"], *bad])


# -- genres as domains (D7) ----------------------------------------------------------------------------
def test_prune_by_similarity_on_genres_pooled_or_stratified(saved, cli, tmp_path):
    from heads.scoring import compute_scores, stratified_scores
    from heads.surgery import load

    common = ["--task", "lm", "--preset", "smoke", saved["data"], "--strategy", "posthoc", "--param", "ratio=0.25",
              "scorer=similarity", "--split", "train", "--domains", "lm_wisdom", "lm_letters"]
    removed = {}
    for how in ("pooled", "stratified"):
        out = tmp_path / how
        assert cli(["prune", str(saved["full"]), *common, *(["--stratify"] if how == "stratified" else []),
                    "--out", str(out)]) == 0
        record = json.loads((out / "pruning.json").read_text())
        assert record["domains"] == ["lm_wisdom", "lm_letters"] and record["stratified"] == (how == "stratified")
        removed[how] = record["removed"]
        assert sum(map(len, removed[how].values())) == 2  # 25 % of the 8 heads
        assert num_heads(head_layout(load(out))) == 6
    # the choice follows the scores: stratified = the highest keep-score over genres, pooled = the genres' batches
    # together (recomputed here from the same batches the command drew)
    from heads.loading import domain_batches, model_for_task

    loaded = model_for_task(str(saved["full"]), "lm", "smoke", overrides=[saved["data"]])
    domains = domain_batches(loaded, ["lm_wisdom", "lm_letters"], "train", 8, "test")
    model = load(saved["full"])
    pooled = compute_scores("similarity", model, [b for d in domains.values() for b in d])
    strat = stratified_scores("similarity", model, domains)
    for how, scores in (("pooled", pooled), ("stratified", strat)):
        flat = sorted((float(v), site, h) for site, vals in scores.items() for h, v in enumerate(vals))
        assert {(site, h) for _, site, h in flat[:2]} == {(s, h) for s, hs in removed[how].items() for h in hs}, how
    with pytest.raises(SystemExit, match="--stratify needs --domains"):
        cli(["prune", str(saved["full"]), "--task", "lm", "--preset", "smoke", "--strategy", "posthoc",
             "--stratify", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="columns"):  # a corpus the task cannot read, refused by name
        cli(["prune", str(saved["full"]), *common[:-2], "mt", "--out", str(tmp_path / "y")])
