"""Cached decoding of pruned models (``heads decode-speed``, heads.analysis.decoding): the cache bytes, the bounds
and the paired rounds on tiny models, and how the report reads the rounds (issue 56)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import build

from heads.analysis import decoding as D
from heads.flops import flops_per_token
from heads.report import decoding as R
from heads.report.collect import RunTree
from heads.report.measures import measure
from heads.sheet import RunSpec, command_line
from heads.surgery import head_layout, install, set_gates


def _gqa(seed: int = 0):
    """A tiny grouped-query Llama: 6 query heads in 3 key/value groups of 2, 2 layers."""
    return build("llama", d=48, heads=6, kv_heads=3, layers=2, seed=seed)


def _stream(n: int = 600) -> torch.Tensor:
    return torch.randint(3, 250, (n,), generator=torch.Generator().manual_seed(0))


def test_cache_bytes_are_the_shapes_formula_and_shrink_only_with_groups():
    model = _gqa()
    context, batch = 20, 3
    inputs = D.context_batch(_stream(), context, batch)
    head_dim, layers = 8, 2
    for spec, kv_heads in (("full", 3), ("ratio:0.3333", 2), ("ratio:0.6667", 1), ("query:1", 3)):
        dec = D.decoder_of(D.variant(model, spec))
        with torch.no_grad():
            state = dec.prefill(inputs)
        # keys and values, every layer, fp32: 2 x layers x kv heads x head_dim x tokens x 4 bytes
        assert dec.cache_bytes(state) == 2 * layers * kv_heads * head_dim * context * batch * 4, spec
    q_only = D.variant(model, "query:1")
    assert D.head_counts(q_only) == {"heads": 2 * 3, "kv_heads": 2 * 3}  # a query head of each group gone
    assert D.head_counts(D.variant(model, "ratio:0.6667")) == {"heads": 2 * 2, "kv_heads": 2 * 1}


def test_dropping_query_heads_equals_gating_them_off():
    model = _gqa()
    ids = _stream()[:24].view(2, 12)
    dropped = D.variant(model, "query:1")
    gated = install(D.variant(model, "full"))
    # the last head of every group (heads 1, 3, 5) closed at every layer
    gate = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    set_gates(gated, {f"model.layers.{i}.self_attn": gate for i in range(2)})
    with torch.no_grad():
        assert torch.allclose(dropped(input_ids=ids).logits, gated(input_ids=ids).logits, atol=1e-5)
    assert dropped.model.layers[0].self_attn.q_proj.out_features == 3 * 8
    assert dropped.model.layers[0].self_attn.k_proj.out_features == 3 * 8  # every group's keys kept


def test_cached_greedy_decoding_is_the_full_recompute_and_rewinds():
    model = D.variant(_gqa(), "ratio:0.3333")
    dec = D.decoder_of(model)
    inputs = D.context_batch(_stream(), 10, 2)
    with torch.no_grad():
        state = dec.prefill(inputs)
        tokens = dec.decode(state, 5)
        assert state.cache.get_seq_length() == 15
        dec.rewind(state)
        assert state.cache.get_seq_length() == 10
        again = dec.decode(state, 5)
        seq = torch.cat([inputs["input_ids"], state.first, tokens[:, :-1]], dim=1)
        full = model(input_ids=seq).logits[:, 10:].argmax(-1)  # each position's next token, no cache
    assert torch.equal(tokens, again)
    assert torch.equal(full, tokens)


def test_translation_decoding_is_the_teacher_forced_argmax():
    model = D.variant(build("bergamot"), "ratio:0.5")
    dec = D.decoder_of(model)
    sources = [torch.arange(5, 5 + n) for n in (7, 4, 9)]
    inputs = D.source_batch(sources, 3, pad=0)
    with torch.no_grad():
        state = dec.prefill(inputs)
        tokens = dec.decode(state, 6)
        previous = torch.cat([torch.zeros(3, 1, dtype=torch.long), tokens[:, :-1]], dim=1)
        forced = model(**inputs, decoder_input_ids=previous).logits.argmax(-1)
    assert torch.equal(forced, tokens)
    assert inputs["attention_mask"].sum().item() == 7 + 4 + 9
    # the cache a step reads: each decoder layer's cross keys and values over the padded source
    c = model.config
    kept = 2  # half of 4 heads
    assert dec.cache_bytes(state) == c.decoder_layers * 2 * 3 * kept * (c.d_model // 4) * 9 * 4


def test_prefill_flops_are_the_closed_form_counts():
    model = _gqa()
    pruned = D.variant(model, "ratio:0.3333")
    context = 16
    inputs = D.context_batch(_stream(), context, 1)
    c = model.config
    for m in (model, pruned):
        with torch.no_grad():
            _, counted = D.prefill_flops(D.decoder_of(m), inputs)
        per_token = flops_per_token(c, head_layout(m), context, backward=False,
                                    architecture=type(m).__name__).forward
        # the walker applies the output layer to every token; a prefill only to the last
        assert counted == pytest.approx(per_token * context - 2 * c.hidden_size * c.vocab_size * (context - 1))


def test_decode_bound_comes_from_real_sizes():
    model = _gqa()
    tied = build("llama", d=48, heads=6, kv_heads=3, layers=2, tie_word_embeddings=True)
    embed = model.get_input_embeddings().weight
    assert D.decode_weight_bytes(model) == D.weight_bytes(model) - embed.numel() * 4  # a lookup reads one row
    assert D.decode_weight_bytes(tied) == D.weight_bytes(tied)  # the tied table is read whole by the head
    berg = build("bergamot")
    encoder = sum(p.numel() for p in berg.get_encoder().parameters())
    cross_kv = sum(p.numel() for layer in berg.model.decoder.layers
                   for proj in (layer.encoder_attn.k_proj, layer.encoder_attn.v_proj) for p in proj.parameters())
    assert D.decode_weight_bytes(berg) == D.weight_bytes(berg) - 4 * (encoder + cross_kv)

    models = {"full": D.variant(model, "full"), "kv": D.variant(model, "ratio:0.6667")}
    cell = D.Cell(24, 2, False)
    out = D.measure_decoding(models, {cell: D.context_batch(_stream(), 24, 2)}, rounds=3, new_tokens=4, seed=1)
    rows = {(r["model"], r["phase"]): r for r in out["rows"]}

    def per_token(m, kv_heads):  # bytes a decoded token moves: the step's weights over the batch + its cache
        return D.decode_weight_bytes(m) / 2 + 2 * 2 * kv_heads * 8 * 4 * (24 + 1.5)

    expected = per_token(models["full"], 3) / per_token(models["kv"], 1)
    assert rows[("kv", "decode")]["bound"] == pytest.approx(expected)
    assert rows[("kv", "decode")]["of_bound"] == pytest.approx(rows[("kv", "decode")]["speedup"] / expected)
    assert ("kv", "prefill") not in rows  # this cell's prefill ran once, untimed
    assert out["same_tokens_every_round"] is True


class _Logger:
    """A decoder that records when it runs (what run_rounds interleaves)."""

    kind = "causal"

    def __init__(self, name, log):
        self.name, self.log = name, log

    def prefill(self, inputs):
        self.log.append((self.name, "prefill"))

    def decode(self, state, n):
        self.log.append((self.name, "decode"))
        return torch.zeros(1, n)

    def rewind(self, state):
        self.log.append((self.name, "rewind"))


def test_a_paired_round_runs_every_variant_once_per_cell_in_its_recorded_order():
    log: list = []
    names = ["full", "a", "b", "c"]
    decoders = {n: _Logger(n, log) for n in names}
    cells = {D.Cell(8, 1, True): {}, D.Cell(16, 2, False): {}}
    states = {n: dict.fromkeys(cells) for n in names}
    out = D.run_rounds(decoders, cells, states, rounds=6, new_tokens=2, seed=3)
    timed = [entry for entry in log if entry[1] != "rewind"][2 * len(names):]  # after the warm-up decodes
    at = 0
    for orders in out.orders:
        for cell in cells:
            order = orders[cell.key]
            assert sorted(order) == sorted(names)
            for name in order:  # a timed prefill where the cell times it, then the decode, then the next variant
                want = [(name, "prefill")] * cell.prefill + [(name, "decode")]
                assert timed[at:at + len(want)] == want
                at += len(want)
    assert at == len(timed)
    assert len({tuple(o["8x1"]) for o in out.orders}) > 1  # shuffled, not rotated alike every round
    again = D.run_rounds(decoders, cells, states, rounds=6, new_tokens=2, seed=3)
    assert again.orders == out.orders  # the seed decides the orders
    assert all(len(v) == 6 for v in out.wall.values()) and len(out.wall) == 4 * 2 + 4


def test_log_ratio_interval_and_per_round_measures():
    ratio, low, high = D.log_ratio_interval([math.log(1.1)] * 2 + [math.log(1.3)] * 2)
    assert ratio == pytest.approx(math.sqrt(1.1 * 1.3)) and low < ratio < high
    ref, row = {"times": [2.0, 3.0], "cpu_times": [2.0, 2.0]}, {"times": [1.0, 2.0], "cpu_times": [1.0, 1.0],
                                                                "bound": 4.0}
    assert R.per_round(row, ref, "speedup") == [2.0, 1.5]
    assert R.per_round(row, ref, "cpu_speedup") == [2.0, 2.0]
    assert R.per_round(row, ref, "gain_share") == pytest.approx([0.5, math.log(1.5) / math.log(4)])
    assert R.per_round(row, ref, "of_bound") == [0.5, 0.375]


def _job(tmp_path, rows, task="lm", arm="smollm2"):
    ident = {"label": f"{task}/analysis/decoding/seed0", "kind": "decoding", "task": task, "seed": 0,
             "variant": "decoding", "arm": arm, "ratio": 0.0, "knob": None, "from_run": None}
    path = tmp_path / task / "analysis" / "decoding" / "seed0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run": ident, "reference": "full", "rows": rows}))
    return RunTree(tmp_path)


def test_the_claims_read_one_value_per_paired_round(tmp_path):
    base = {"phase": "decode", "batch": 1, "context": 512}
    tree = _job(tmp_path, [{**base, "model": "full", "times": [1.0, 1.2, 1.1], "bound": 1.0},
                           {**base, "model": "kv", "times": [0.8, 1.0, 1.0], "bound": 1.25}])
    got = measure(tree, {"from": "decoding", "task": "lm", "model": "kv", "phase": "decode", "batch": 1,
                         "measure": "speedup"})
    assert got.values == pytest.approx({0: 1.25, 1: 1.2, 2: 1.1})
    assert R.PER_ROUND in got.notes
    none = measure(tree, {"from": "decoding", "task": "lm", "model": "kv", "phase": "prefill", "batch": 1,
                          "measure": "speedup"})
    assert not none.values and none.missing


def test_the_sheet_runs_a_shipped_model_without_a_source_run():
    e = RunSpec(label="lm/analysis/decoding/seed0", command="decode-speed", replication="decoding", task="lm",
                seed=0, variant="decoding", arm="smollm2",
                options={"model": "smollm2", "task": True, "variants": ["kv1of3=ratio:0.3333"], "threads": 1})
    line = command_line(e, "results/pretrained/runs", "pretrained", "resources/data", threads=2,
                        overrides="o.json")
    assert line.startswith("heads decode-speed --task lm --preset pretrained --threads 1 --model smollm2 ")
    assert "--variants kv1of3=ratio:0.3333" in line and line.count("--threads") == 1  # its own, as it times
    assert line.endswith(" --overrides-file o.json")  # the data root its shipped model is cached under
    assert "--out results/pretrained/runs/lm/analysis/decoding/seed0.json" in line
