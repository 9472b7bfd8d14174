"""Strategies: defaults do nothing; training-time strategies prune physically, deterministically, and say so."""

import copy
import dataclasses
import json

import pytest
import torch
from conftest import batch_for, build_with_biases, heads_to_remove, logits, smoke

from heads.io import read_jsonl
from heads.strategies import STRATEGIES, build_strategy
from heads.strategies.l0 import _fold_gates
from heads.surgery import head_layout, install, num_heads, prune_heads, set_gates, sites
from heads.surgery.families import family_of
from heads.tasks import get_task
from heads.train.loop import Hook, Trainer


def cfg_for(data_root, name, params=None, *overrides):
    cfg = smoke("lm", data_root, "train.steps=20", f"strategy.name={name}", *overrides)
    cfg.strategy.params.update(params or {})
    return cfg


def run(data_root, tmp_path, name, params=None, hooks=(), *overrides):
    cfg = cfg_for(data_root, name, params, *overrides)
    strategy = build_strategy(name, cfg.strategy.params)
    trainer = Trainer(cfg, get_task("lm"), tmp_path, hooks=[*hooks, *strategy.hooks(cfg)])
    trainer.train()
    return trainer


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_default_parameters_do_nothing(name, data_root):
    strategy = build_strategy(name, {})
    assert strategy.hooks(cfg_for(data_root, "none")) == []
    assert dataclasses.is_dataclass(strategy.params)


@pytest.mark.parametrize(
    "name,params,expected_heads",
    [
        ("scratch", {"keep": 2}, 4),
        ("oneshot", {"ratio": 0.5}, 4),
        ("oneshot", {"ratio": 0.25, "proxy_steps": 5, "reinit": True}, 6),
        ("early", {"at_step": 10, "ratio": 0.25}, 6),
        ("early", {"at_step": 10, "ratio": 0.5, "scope": "per_site", "scorer": "magnitude"}, 4),
    ],
)
def test_training_time_pruning_removes_exact_counts(name, params, expected_heads, data_root, tmp_path):
    trainer = run(data_root, tmp_path, name, params)
    layout = head_layout(trainer.model)
    assert num_heads(layout) == expected_heads
    assert all(len(v) >= 1 for v in layout.values())
    events = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "prune"]
    assert sum(len(h) for e in events for h in e["removed"].values()) == 8 - expected_heads
    assert sum(p.numel() for p in trainer.model.parameters()) < sum(
        p.numel() for p in get_task("lm").build_model(trainer.cfg, trainer.tokenizer).parameters()
    )


def test_strategies_are_deterministic(data_root, tmp_path):
    a = run(data_root, tmp_path / "a", "oneshot", {"ratio": 0.5, "proxy_steps": 5})
    b = run(data_root, tmp_path / "b", "oneshot", {"ratio": 0.5, "proxy_steps": 5})
    assert head_layout(a.model) == head_layout(b.model)
    for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(x, y)


def test_scratch_with_a_matched_layout(data_root, tmp_path):
    names = [
        s.name
        for s in sites(
            get_task("lm").build_model(cfg_for(data_root, "none"), get_task("lm").tokenizer(cfg_for(data_root, "none")))
        )
    ]
    layout = {names[0]: [1, 3], names[1]: [0]}
    trainer = run(data_root, tmp_path, "scratch", {"layout": layout})
    assert head_layout(trainer.model) == layout


class Duplicate(Hook):
    """Make head 1 an exact copy of head 0 in every site: a redundancy the waves must find."""

    def on_start(self, trainer):
        model = trainer.model
        family = family_of(model)
        with torch.no_grad():
            for site in sites(model):
                proj = family.projections(model, site)
                d = site.head_dim
                for lin in (proj.q, proj.k, proj.v):
                    lin.weight[d : 2 * d] = lin.weight[:d]
                # equal output columns too: the twins then get equal gradients and stay twins while training
                proj.o.weight[:, d : 2 * d] = proj.o.weight[:, :d]


def test_curriculum_and_dropout_regime_remove_duplicated_heads(data_root, tmp_path):
    waves = run(
        data_root, tmp_path / "c", "curriculum", {"max_ratio": 0.5, "waves": [[0.1, 0.99]]}, hooks=[Duplicate()]
    )
    removed = [e for e in read_jsonl(tmp_path / "c/events.jsonl") if e["event"] == "prune"]
    assert removed and removed[0]["step"] == 2
    assert all(set(h) & {0, 1} for h in removed[0]["removed"].values())
    assert num_heads(head_layout(waves.model)) < 8
    (wave,) = [e for e in read_jsonl(tmp_path / "c/events.jsonl") if e["event"] == "wave"]
    assert wave["max_similarity"] > 0.99 and wave["removed"] == sum(len(h) for h in removed[0]["removed"].values())
    regime = run(
        data_root, tmp_path / "d", "dropout_regime", {"high": 0.25, "low": 0.1, "threshold": 0.99}, hooks=[Duplicate()]
    )
    events = read_jsonl(tmp_path / "d/events.jsonl")
    redundancy = [e for e in events if e["event"] == "redundancy"][0]
    assert redundancy["redundancy_ratio"] > 0 and redundancy["max_similarity"] > 0.99
    dropouts = [e["attention"] for e in events if e["event"] == "dropout"]
    assert dropouts == [0.25, 0.1]
    assert num_heads(head_layout(regime.model)) < 8


def test_a_curriculum_wave_that_finds_no_redundant_pair_logs_how_close_it_came(data_root, tmp_path):
    trainer = run(data_root, tmp_path, "curriculum", {"max_ratio": 0.5, "waves": [[0.1, 0.999], [0.5, 0.99]]})
    events = read_jsonl(tmp_path / "events.jsonl")
    assert [e["event"] for e in events] == ["wave", "wave"]  # no prune event: nothing went
    assert all(e["removed"] == 0 and -1 <= e["max_similarity"] < e["threshold"] for e in events)
    assert num_heads(head_layout(trainer.model)) == 8


class Useless(Hook):
    """Zero the value rows and output columns of head 0 everywhere: its output is 0 whatever its gate."""

    def on_start(self, trainer):
        model = trainer.model
        family = family_of(model)
        with torch.no_grad():
            for site in sites(model):
                proj = family.projections(model, site)
                proj.v.weight[: site.head_dim] = 0
                proj.o.weight[:, : site.head_dim] = 0


def test_l0_closes_the_gates_of_useless_heads(data_root, tmp_path):
    trainer = run(data_root, tmp_path, "l0", {"lam": 0.001, "lr": 0.2, "init": 1.0}, [Useless()], "train.steps=40")
    layout = head_layout(trainer.model)
    assert all(0 not in kept for kept in layout.values())  # head 0 pruned everywhere
    gates = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "l0_gates"][0]["gates"]
    assert all(g[0] == 0.0 for g in gates.values())
    assert num_heads(layout) > 2  # useful heads survive a small penalty


def test_l0_gates_survive_a_checkpoint_in_site_order(data_root, tmp_path):
    """L0's gate parameters and their moments go through a checkpoint's JSON (sorted keys) and come back in the
    model's site order: the order the sampling noise is drawn in. Marian's sites sort differently from their order."""
    cfg = smoke("mt", data_root, "strategy.name=l0")
    first = Trainer(cfg, get_task("mt"), tmp_path / "a", hooks=build_strategy("l0", {"lam": 0.01}).hooks(cfg))
    (gates,) = first.hooks
    gates.on_start(first)
    loss = first.task.loss(first.model, next(first.batcher), cfg) + gates.penalty(first)
    loss.backward()
    first.optimizer.step()
    order = [s.name for s in sites(first.model)]
    assert list(gates.log_alpha) == order != sorted(order)

    state = json.loads(json.dumps(gates.state_dict(), sort_keys=True))  # as state.json holds it
    second = Trainer(cfg, get_task("mt"), tmp_path / "b", hooks=build_strategy("l0", {"lam": 0.01}).hooks(cfg))
    (again,) = second.hooks
    again.load_state_dict(state)
    again.on_resume(second)
    assert list(again.log_alpha) == order
    for name in order:
        assert torch.equal(again.log_alpha[name], gates.log_alpha[name])
        before, after = first.optimizer.state[gates.log_alpha[name]], second.optimizer.state[again.log_alpha[name]]
        assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert second.optimizer.param_groups[-1]["params"] == list(again.log_alpha.values())


@pytest.mark.parametrize("prune", [True, False], ids=["closed-pruned", "closed-kept"])
def test_l0_folding_the_gates_into_the_weights_computes_what_the_gated_model_did(every_family, prune):
    model = install(build_with_biases(every_family))
    inputs = batch_for(every_family)
    g = torch.Generator().manual_seed(0)
    values = {name: 0.1 + 0.9 * torch.rand(len(kept), generator=g) for name, kept in head_layout(model).items()}
    closed = heads_to_remove(model)  # whole key/value groups, as pruning needs under grouped-query attention
    for name, heads in closed.items():
        values[name][heads] = 0.0
    set_gates(model, values)
    gated = logits(model, inputs)
    set_gates(model, {name: None for name in values})
    assert not torch.allclose(logits(model, inputs), gated, atol=1e-3)  # the gates matter here
    if prune:
        prune_heads(model, closed)
    _fold_gates(model, {name: v[v > 0] for name, v in values.items()} if prune else values)
    assert torch.allclose(logits(model, inputs), gated, atol=1e-5)


@pytest.mark.parametrize("name", ["curriculum", "dropout_regime"])
def test_redundancy_strategies_take_the_similarity_definition(name, data_root, tmp_path):
    """pooling=mean reaches the strategies' probes (their events say which definition decided), and a pooling
    that does not exist is refused before any step."""
    params = ({"max_ratio": 0.5, "waves": [[0.5, 0.999]]} if name == "curriculum"
              else {"high": 0.25, "low": 0.1, "warmup_fraction": 0.5, "threshold": 0.999})
    run(data_root, tmp_path, name, {**params, "pooling": "mean"})
    events = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] in ("wave", "redundancy")]
    assert events and all(e["pooling"] == "mean" for e in events)
    from heads.config import ConfigError
    from heads.strategies import build_strategy

    with pytest.raises(ConfigError, match="pooling"):
        build_strategy(name, {**params, "pooling": "max"})


@pytest.mark.parametrize("scorer", ["importance", "random"])
def test_a_curve_evaluated_together_under_stacked_gates_is_the_level_by_level_curve(data_root, scorer):
    """``together``: every level evaluated at once on the unpruned model, each under gates closing the heads
    pruned by then (one decoding pass), gives the pruned models' own numbers (masked == pruned), the same
    heads removed at every level."""
    cfg = smoke("mt", data_root, "eval.max_new_tokens=8", "eval.max_examples=12", "data.batch_size=8")
    task = get_task("mt")
    tokenizer = task.tokenizer(cfg)
    torch.manual_seed(0)
    model = task.build_model(cfg, tokenizer)
    with torch.no_grad():  # weights large enough that the translations depend on the input and the heads
        for param in model.parameters():
            if param.dim() >= 2:
                param.normal_(0.0, 0.5)
    batches = [task.collate(task.examples(cfg, tokenizer, "validation")[:8])]

    def evaluate(m) -> dict:
        return task.evaluate(m, cfg, tokenizer, "validation")

    def levels(m, rows) -> list[dict]:
        return task.evaluate_levels(m, cfg, tokenizer, "validation", rows)

    params = {"scorer": scorer, "step": 0.25, "max_ratio": 0.75, "batches": 1}
    one = build_strategy("iterative", params).curve(copy.deepcopy(model), batches, evaluate)
    together = build_strategy("iterative", {**params, "together": True}).curve(copy.deepcopy(model), batches, evaluate,
                                                                                levels)
    assert len(one) == len(together) == 4
    assert len({p["chrf"] for p in one}) > 1, "the levels translate differently (else the test says nothing)"
    for a, b in zip(one, together, strict=True):
        assert (a["pruned"], a["removed"]) == (b["pruned"], b["removed"])
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
        assert (a["bleu"], a["chrf"], a["hyp_len"]) == (b["bleu"], b["chrf"], b["hyp_len"])
    with pytest.raises(Exception, match="together"):
        build_strategy("iterative", {**params, "together": True}).curve(copy.deepcopy(model), batches, evaluate)
