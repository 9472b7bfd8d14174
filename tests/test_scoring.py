"""Scorers: registry, shapes and determinism on every family, and toys whose answer is known."""

import pytest
import torch
from conftest import batch_for, build, smoke

from heads.scoring import (
    AblationParams,
    Scorer,
    ablation_table,
    all_but_one,
    compute_scores,
    example_stats,
    get_scorer,
    js_matrices,
    list_scorers,
    redundancy_ratio,
    register_scorer,
    same_pattern_ratio,
    similarity_matrices,
    stratified_scores,
)
from heads.scoring.evaluate import evaluate_closures, fitting_chunk
from heads.scoring.losses import FIELDS
from heads.scoring.registry import _REGISTRY
from heads.scoring.session import scoring_mode
from heads.scoring.similarity import SimilarityParams
from heads.surgery import get_gates, head_layout, install, ones_gates, prune_heads, set_gates, sites
from heads.surgery.families import family_of
from heads.surgery.gates import gates
from heads.tasks import get_task

SCORERS = sorted(list_scorers())
# Weights larger than the default 0.02 so attention is far from uniform and heads differ.
INIT = {"llama": {"initializer_range": 0.2}, "bert": {"initializer_range": 0.2}, "marian": {"init_std": 0.5}}


def toy(family: str, **kw) -> torch.nn.Module:
    return build(family, **INIT[family], **kw)


def batches_for(family: str, n: int = 2, batch: int = 3) -> list[dict]:
    return [batch_for(family, batch=batch, seed=i) for i in range(n)]


def self_labelled(model, family: str, batch: dict) -> dict:
    """Labels = the model's own predictions: every head that shapes them then carries the signal."""
    with torch.no_grad():
        pred = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1)
    if family == "llama":  # position t predicts token t + 1
        labels = batch["labels"].clone()
        labels[:, 1:] = pred[:, :-1]
    else:
        labels = pred
    return {**batch, "labels": labels}


def make_useless(model, site, position: int) -> None:
    """Zero the head's o columns (and v rows): its output contributes exactly nothing."""
    proj = family_of(model).projections(model, site)
    d = site.head_dim
    with torch.no_grad():
        proj.o.weight[:, position * d : (position + 1) * d] = 0
        if site.group_size == 1:
            proj.v.weight[position * d : (position + 1) * d] = 0
            if proj.v.bias is not None:
                proj.v.bias[position * d : (position + 1) * d] = 0


def duplicate(model, site, a: int, b: int, with_output: bool = False) -> None:
    """Copy head a's q/k/v rows (``with_output``: and its o columns) into head b of the same site."""
    proj = family_of(model).projections(model, site)
    d = site.head_dim
    src, dst = slice(a * d, (a + 1) * d), slice(b * d, (b + 1) * d)
    with torch.no_grad():
        for lin in (proj.q, proj.k, proj.v):
            lin.weight[dst] = lin.weight[src]
            if lin.bias is not None:
                lin.bias[dst] = lin.bias[src]
        if with_output:
            proj.o.weight[:, dst] = proj.o.weight[:, src]


# --- registry -------------------------------------------------------------------------------------------


def test_registry_lists_every_scorer_with_a_description():
    expected = {"importance", "ablation", "similarity", "js", "confidence", "magnitude", "random"}
    described = list_scorers()
    assert expected <= set(described)
    assert all(described[name] for name in expected)


def test_registry_errors_name_what_is_known():
    with pytest.raises(KeyError, match="known scorers: .*importance"):
        get_scorer("nope")
    with pytest.raises(TypeError, match="parameters: \\['normalize', 'per_example'\\]"):
        get_scorer("importance").params(normalise=True)
    with pytest.raises(TypeError, match="takes ImportanceParams"):
        get_scorer("importance").score(build("llama"), batches_for("llama"), get_scorer("random").params())
    with pytest.raises(ValueError, match="already registered"):
        register_scorer("random")(type("Other", (Scorer,), {}))


def test_register_a_new_scorer():
    @register_scorer("test-constant")
    class Constant(Scorer):
        """Every head scores 1."""

        def _score(self, model, batches, params):
            return {name: torch.ones(len(kept)) for name, kept in head_layout(model).items()}

    try:
        assert list_scorers()["test-constant"] == "Every head scores 1."
        scores = compute_scores("test-constant", build("llama"), [])
        assert all(torch.equal(s, torch.ones(4)) for s in scores.values())
    finally:
        _REGISTRY.remove("test-constant")


# --- every scorer on every family -----------------------------------------------------------------------


@pytest.mark.parametrize("name", SCORERS)
def test_scores_shape_and_determinism(name, family):
    model = toy(family)
    batches = batches_for(family)
    first = compute_scores(name, model, batches)
    # A fresh, identically seeded model left in train mode: scorers switch dropout off themselves.
    again = compute_scores(name, toy(family).train(), batches)
    layout = head_layout(model)
    assert list(first) == list(layout)
    for site, kept in layout.items():
        assert first[site].shape == (len(kept),) and first[site].dtype == torch.float32
        assert torch.isfinite(first[site]).all()
        assert torch.equal(first[site], again[site])


@pytest.mark.parametrize("name", SCORERS)
def test_scores_on_pruned_model_with_empty_site(name, family):
    model = toy(family)
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[0]: [0, 1, 2, 3], names[-1]: [1]})
    scores = compute_scores(name, model, batches_for(family))
    assert scores[names[0]].shape == (0,)
    assert scores[names[-1]].shape == (3,)
    assert all(torch.isfinite(s).all() for s in scores.values())


@pytest.mark.parametrize("name", SCORERS)
def test_scorer_leaves_mode_gates_and_attention_as_they_were(name):
    model = toy("marian").train()
    install(model)
    before = ones_gates(model)
    before[sites(model)[0].name][1] = 0.0
    set_gates(model, before)
    compute_scores(name, model, batches_for("marian", n=1))
    assert model.training
    assert model.config._attn_implementation == "heads_gated"
    assert all(get_gates(model)[k] is v for k, v in before.items())
    plain = toy("bert")
    compute_scores(name, plain, batches_for("bert", n=1))
    assert plain.config._attn_implementation == "sdpa" and not plain.training
    assert all(g is None for g in get_gates(plain).values())


def test_example_stats_reproduce_the_model_loss(family):
    model = toy(family)
    batch = batch_for(family)
    out = model(**batch)
    assert example_stats(model, batch, out.logits).corpus_loss().item() == pytest.approx(out.loss.item(), rel=1e-5)


def test_no_batches_is_an_error():
    with pytest.raises(ValueError, match="no batches"):
        compute_scores("importance", build("llama"), [])


# --- toys with known answers ----------------------------------------------------------------------------


def test_useless_heads_get_zero_importance_and_zero_ablation(family):
    model = toy(family)
    useless = {s.name: 2 for s in sites(model)}
    for site in sites(model):
        make_useless(model, site, useless[site.name])
    batches = [self_labelled(model, family, b) for b in batches_for(family)]
    importance = compute_scores("importance", model, batches)
    for site, pos in useless.items():
        assert importance[site][pos] == 0.0
        others = torch.cat([importance[site][:pos], importance[site][pos + 1 :]])
        assert (others > 0).all()
    table = ablation_table(model, batches, AblationParams(chunk=5))
    for row in table.rows:
        if row.position == useless[row.site]:
            assert row.delta_loss == 0.0 and row.p_value == 1.0 and not row.significant


def test_ablation_ranks_useless_heads_lowest_when_all_heads_help():
    """On self-labelled Llama every head's removal raises the loss, so the useless one is the lowest."""
    model = toy("llama")
    for site in sites(model):
        make_useless(model, site, 1)
    batches = [self_labelled(model, "llama", b) for b in batches_for("llama", batch=6)]
    scores = compute_scores("ablation", model, batches)
    for s in scores.values():
        assert s[1] == 0.0 and int(s.argmin()) == 1


@pytest.mark.parametrize("task", ["lm", "mt", "cls"])
def test_importance_equals_plain_autograd_on_each_task(task, data_root):
    """Michel's I_h = mean over examples of |dL(x)/dgate_h|, written out here: one example at a time, gates as
    leaf tensors, the model's own loss (the example's mean token loss; the classifier's sentence loss)."""
    cfg = smoke(task, data_root)
    t = get_task(task)
    tokenizer = t.tokenizer(cfg)
    model = t.build_model(cfg, tokenizer).eval()
    examples = t.examples(cfg, tokenizer, "validation")[:6]
    batches = [t.collate(examples[:4]), t.collate(examples[4:])]  # padded batches of unequal length
    scored = compute_scores("importance", model, batches, normalize=False)

    totals = {name: torch.zeros(len(kept)) for name, kept in head_layout(model).items()}
    for example in examples:
        leaves = {name: torch.ones(len(kept), requires_grad=True) for name, kept in head_layout(model).items()}
        set_gates(model, leaves)
        loss = model(**t.collate([example])).loss
        for name, grad in zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True):
            totals[name] += grad.abs()
    set_gates(model, {name: None for name in leaves})
    for name, total in totals.items():
        expected = total / len(examples)
        assert (expected > 0).all()  # every head carries signal: the comparison is not of zeros
        assert torch.allclose(scored[name], expected, rtol=1e-4, atol=1e-8), name


def test_importance_leaves_no_parameter_gradients():
    model = toy("llama")
    compute_scores("importance", model, batches_for("llama"))
    assert all(p.grad is None for p in model.parameters())


def test_importance_is_l2_normalised_per_site(family):
    scores = compute_scores("importance", toy(family), batches_for(family))
    assert all(torch.linalg.vector_norm(s).item() == pytest.approx(1.0, rel=1e-5) for s in scores.values())


def test_duplicated_heads_are_found_by_similarity_and_js(family):
    model = toy(family)
    for site in sites(model):
        duplicate(model, site, 0, 3)
    batches = batches_for(family)
    sim, js = similarity_matrices(model, batches), js_matrices(model, batches)
    sim_scores, js_scores = compute_scores("similarity", model, batches), compute_scores("js", model, batches)
    for site in sim:
        assert sim[site][0, 3].item() == pytest.approx(1.0, abs=1e-5)
        assert js[site][0, 3].item() == pytest.approx(0.0, abs=1e-6)
        assert set(sim_scores[site].argsort()[:2].tolist()) == {0, 3}
        assert set(js_scores[site].argsort()[:2].tolist()) == {0, 3}
    assert redundancy_ratio(model, batches) >= 0.5
    assert same_pattern_ratio(model, batches) >= 0.5
    assert redundancy_ratio(toy(family), batches) < 0.5  # the untouched model has far fewer pairs


def test_residual_space_needs_the_output_columns_too():
    model = toy("llama")
    site = sites(model)[0]
    duplicate(model, site, 0, 1)
    batches = batches_for("llama")
    residual = SimilarityParams(space="residual")
    assert similarity_matrices(model, batches, residual)[site.name][0, 1] < 0.9  # different o columns
    duplicate(model, site, 0, 1, with_output=True)
    assert similarity_matrices(model, batches, residual)[site.name][0, 1].item() == pytest.approx(1.0, abs=1e-5)


def test_grouped_query_heads_of_one_group_can_be_duplicates():
    model = toy("llama", kv_heads=2)
    site = sites(model)[0]
    duplicate(model, site, 0, 1)  # only the query rows differ inside a group; k/v are shared
    batches = batches_for("llama")
    assert js_matrices(model, batches)[site.name][0, 1].item() == pytest.approx(0.0, abs=1e-6)
    assert similarity_matrices(model, batches)[site.name][0, 1].item() == pytest.approx(1.0, abs=1e-5)
    for name in SCORERS:
        assert all(s.shape == (4,) for s in compute_scores(name, model, batches).values())


def test_grouped_query_redundancy_is_measured_but_not_pruned_head_by_head():
    from heads.scoring.similarity import max_similarity
    from heads.strategies.common import redundant_to_remove

    model = toy("llama", kv_heads=2)
    duplicate(model, sites(model)[0], 0, 1)
    matrices = similarity_matrices(model, batches_for("llama"))
    assert max_similarity(matrices) == pytest.approx(1.0, abs=1e-5)  # measuring works (the dropout regime's probe)
    with pytest.raises(ValueError, match="grouped-query models lose whole groups only"):
        redundant_to_remove(model, matrices, threshold=0.9)


def test_one_head_site_scores_are_defined():
    model = toy("bert")
    site = sites(model)[0].name
    prune_heads(model, {site: [0, 1, 2]})
    batches = batches_for("bert", n=1)
    assert compute_scores("js", model, batches)[site].tolist() == [1.0]  # nothing like it: maximal divergence
    assert compute_scores("similarity", model, batches)[site].tolist() == [0.0]  # similar to nothing


# --- ablation -------------------------------------------------------------------------------------------


def test_batched_ablation_equals_a_loop_of_gated_forwards(family):
    model = install(toy(family))
    batch = batch_for(family)
    table = ablation_table(model, [batch], AblationParams(chunk=3))  # 3 does not divide the head count
    g = ones_gates(model)
    with torch.no_grad(), gates(model, g):
        base = model(**batch).loss.item()
    assert table.baseline_loss == pytest.approx(base, abs=1e-5)
    for row in table.rows:
        closed = {k: v.clone() for k, v in g.items()}
        closed[row.site][row.position] = 0.0
        with torch.no_grad(), gates(model, closed):
            assert row.delta_loss == pytest.approx(model(**batch).loss.item() - base, abs=1e-5)


def test_a_chunk_over_the_logits_budget_takes_more_forwards_with_the_same_numbers(family):
    """A stacked forward holds at most ``max_logits`` logits (a GPU visit's batch of 512 would otherwise hold
    ~17 GB per ablation): the batch is repeated fewer times and every closure's stats stay what they were."""
    model = install(toy(family))
    batch = batch_for(family)
    closures = [{site.name: [p]} for site in sites(model) for p in range(2)]
    sizes: list[int] = []
    hook = model.register_forward_hook(lambda mod, args, kwargs, out: sizes.append(out.logits.numel()),
                                       with_kwargs=True)
    with scoring_mode(model):
        base, whole = evaluate_closures(model, [batch], closures, chunk=4)
        per_copy, stacked = sizes[0], max(sizes[1:])
        assert stacked == 4 * per_copy  # the whole chunk fits the default budget
        sizes.clear()
        base_fit, fit = evaluate_closures(model, [batch], closures, chunk=4, max_logits=2 * per_copy + 1)
    hook.remove()
    assert max(sizes) == 2 * per_copy and len(sizes) == 1 + -(-len(closures) // 2)
    for field in FIELDS:
        assert torch.allclose(getattr(fit, field), getattr(whole, field), atol=1e-5)
        assert torch.equal(getattr(base_fit, field), getattr(base, field))
    assert fitting_chunk(8, 10**9) == 1 and fitting_chunk(8, 0) == 8  # never below one copy


def test_ablation_significance_separates_useless_from_signal_heads():
    model = toy("llama")
    site = sites(model)[-1]
    make_useless(model, site, 0)
    batches = [self_labelled(model, "llama", b) for b in batches_for("llama", n=2, batch=8)]
    table = ablation_table(model, batches)
    rows = {(r.site, r.position): r for r in table.rows}
    assert table.examples == 16
    assert not rows[site.name, 0].significant and rows[site.name, 0].p_value == 1.0
    strongest = max(table.rows, key=lambda r: r.delta_loss)
    assert strongest.delta_loss > 0.1 and strongest.significant and strongest.p_value < 1e-3
    by_accuracy = ablation_table(model, batches, AblationParams(test="accuracy"))
    assert not {(r.site, r.position): r for r in by_accuracy.rows}[site.name, 0].significant
    assert by_accuracy.rows[table.rows.index(strongest)].delta_accuracy < 0
    assert table.scores()[strongest.site][strongest.position] == strongest.delta_loss


def test_all_but_one_keeps_the_best_head_per_site(family):
    model = install(toy(family))
    names = [s.name for s in sites(model)]
    prune_heads(model, {names[0]: [0, 1, 2, 3], names[-1]: [0, 1, 2]})  # an empty and a one-head site
    batch = batch_for(family)
    result = all_but_one(model, [batch], chunk=5)
    assert set(result) == set(names[1:])
    assert result[names[-1]].best_head == 3 and result[names[-1]].delta_loss == pytest.approx(0.0, abs=1e-6)
    site = names[1]
    losses = {}
    for pos, head in enumerate(head_layout(model)[site]):
        g = ones_gates(model)
        g[site][:] = 0.0
        g[site][pos] = 1.0
        with torch.no_grad(), gates(model, g):
            losses[head] = model(**batch).loss.item()
    best = min(losses, key=losses.get)
    assert result[site].best_head == best
    assert result[site].loss == pytest.approx(losses[best], abs=1e-5)


# --- domain strata --------------------------------------------------------------------------------------


def test_stratified_scores_keep_a_head_important_in_any_domain():
    @register_scorer("test-by-domain")
    class ByDomain(Scorer):
        """Scores carried by the batches themselves."""

        def _score(self, model, batches, params):
            return {name: next(iter(batches))["fake"].clone() for name in head_layout(model)}

    try:
        model = build("llama")
        domains = {
            "prose": [{"fake": torch.tensor([0.1, 0.9, 0.2, 0.8])}],
            "code": [{"fake": torch.tensor([0.1, 0.2, 0.9, 0.3])}],
        }
        scores = stratified_scores("test-by-domain", model, domains)
        # head 2 is redundant on prose but the only one doing code: it must not be the lowest
        assert all(s.tolist() == pytest.approx([0.1, 0.9, 0.9, 0.8]) for s in scores.values())
    finally:
        _REGISTRY.remove("test-by-domain")


def test_stratified_redundancy_needs_redundancy_in_every_domain(monkeypatch):
    import heads.scoring.similarity as similarity

    eye = torch.eye(3)
    pair = eye.clone()
    pair[0, 1] = pair[1, 0] = 0.95
    fake = {"a": {"s": pair}, "b": {"s": eye}}
    monkeypatch.setattr(similarity, "similarity_matrices", lambda model, batches, params=None: fake[batches[0]])
    assert redundancy_ratio(None, ["a"]) == pytest.approx(2 / 3)
    assert redundancy_ratio(None, {"prose": ["a"], "code": ["b"]}) == 0.0
    assert redundancy_ratio(None, {"prose": ["a"], "again": ["a"]}) == pytest.approx(2 / 3)
    with pytest.raises(TypeError, match="not a single batch"):
        redundancy_ratio(None, batch_for("llama"))


def test_stratified_similarity_is_max_over_domains():
    model = toy("llama")
    domains = {"one": batches_for("llama", n=1), "two": [batch_for("llama", seed=5)]}
    scores = stratified_scores("similarity", model, domains)
    per = [compute_scores("similarity", model, b) for b in domains.values()]
    for site in scores:
        assert torch.equal(scores[site], torch.maximum(per[0][site], per[1][site]))


def test_confidence_is_a_mean_max_weight(family):
    scores = compute_scores("confidence", toy(family), batches_for(family))
    assert all(((s > 0) & (s <= 1)).all() for s in scores.values())


@pytest.mark.parametrize("name", ["similarity", "js", "confidence"])
def test_padding_positions_do_not_count(name, family):
    model = toy(family)
    batch = batch_for(family)
    if family == "marian":  # decoder padding as a seq2seq collator leaves it: labels -100, no decoder mask
        batch["labels"][1, 5:] = -100
    first = compute_scores(name, model, [batch])
    garbage = {k: v.clone() for k, v in batch.items()}
    garbage["input_ids"][garbage["attention_mask"] == 0] = 7
    if family == "marian":
        garbage["decoder_input_ids"][1, 5:] = 9
    again = compute_scores(name, model, [garbage])
    for site in first:
        assert torch.allclose(first[site], again[site], atol=1e-5)


def test_mean_pooled_similarity_is_the_reports_definition_computed_independently():
    """pooling="mean" (the practitioner report's): each head's output averaged over a sequence's real positions,
    cosine between heads per sequence, averaged over sequences; checked against a direct computation from the
    captured per-position outputs, and padding left out."""
    from heads.scoring.capture import head_outputs
    from heads.scoring.session import scoring_mode

    model = toy("bert")
    batches = batches_for("bert")
    batches[0]["attention_mask"][0, -3:] = 0  # a padded sequence: its pad positions must not enter the mean
    mean = similarity_matrices(model, batches, SimilarityParams(pooling="mean"))
    token = similarity_matrices(model, batches)
    per_sequence = {}

    for batch in batches:
        rows = []

        def sink(name, x, rows=rows):
            rows.append((name, x))

        with scoring_mode(model):
            head_outputs(model, [batch], sink)
        lengths = batch["attention_mask"].sum(1).tolist()
        for name, x in rows:  # x: [real positions of the batch, H, D], sequence after sequence
            start = 0
            for n in lengths:
                pooled = torch.nn.functional.normalize(x[start : start + n].double().mean(0), dim=-1)
                per_sequence.setdefault(name, []).append(pooled @ pooled.T)
                start += n
    for name, ms in per_sequence.items():
        assert torch.allclose(mean[name].double(), torch.stack(ms).mean(0), atol=1e-5)
    # pooled outputs share a common component: heads look more alike than position by position
    off = ~torch.eye(4, dtype=torch.bool)
    assert sum(float(m[off].mean()) for m in mean.values()) > sum(float(m[off].mean()) for m in token.values())
    with pytest.raises(ValueError, match="pooling"):
        similarity_matrices(model, batches, SimilarityParams(pooling="max"))
    assert compute_scores("similarity", model, batches, pooling="mean").keys() == mean.keys()


def test_redundancy_reports_every_definition_and_compares_whole_groups_in_a_grouped_query_model():
    from heads.analysis.redundancy import redundancy

    model = toy("llama")
    for site in sites(model):
        duplicate(model, site, 0, 3)
    batches = batches_for("llama")
    rows = redundancy(model, batches, poolings=("token", "mean"))
    assert [r["pooling"] for r in rows] == ["token", "mean"] and all(r["unit"] == "head" for r in rows)
    for r in rows:  # the copies are redundant under either definition, and counted per site
        assert r["redundancy_ratio"] >= 0.5 and r["max_similarity"] == pytest.approx(1.0, abs=1e-5)
        assert all(s["units"] == 4 and s["redundant"] >= 2 for s in r["sites"].values())
    # a grouped-query model: two heads sharing values look alike by construction; its units are the groups
    gqa = toy("llama", kv_heads=2)
    duplicate(gqa, sites(gqa)[0], 0, 1)  # a duplicate inside one group: no longer a pair of units
    (row,) = redundancy(gqa, batches, poolings=("token",))
    assert row["unit"] == "group" and all(s["units"] == 2 for s in row["sites"].values())
    assert row["max_similarity"] < 0.99
    # stratified by domain: a head is redundant only if it is in every domain, each domain's ratio kept
    (strat,) = redundancy(model, {"a": batches[:1], "b": batches[1:]}, poolings=("token",))
    assert set(strat["domains"]) == {"a", "b"} and strat["redundancy_ratio"] <= min(
        d["redundancy_ratio"] for d in strat["domains"].values())
    with pytest.raises(ValueError, match="threshold"):
        redundancy(model, batches, threshold=0.0)


def test_a_copied_key_value_group_is_a_redundant_unit_whatever_the_order_of_its_heads():
    from heads.analysis.redundancy import redundancy

    model = toy("llama", kv_heads=2)  # 4 heads in 2 groups of 2
    site = sites(model)[0]
    proj, d = family_of(model).projections(model, site), site.head_dim
    with torch.no_grad():  # group 1 := group 0 with its two heads swapped
        for lin in (proj.k, proj.v):
            lin.weight[d:2 * d] = lin.weight[:d]
        q = proj.q.weight.clone()
        proj.q.weight[2 * d:3 * d], proj.q.weight[3 * d:4 * d] = q[d:2 * d], q[:d]
    (row,) = redundancy(model, batches_for("llama"), poolings=("token",))
    assert row["unit"] == "group" and row["sites"][site.name]["redundant"] == 2
    assert row["max_similarity"] == pytest.approx(1.0, abs=1e-5)
