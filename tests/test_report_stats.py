"""Seed statistics, the verdict rule, curve measures, table formatting and the claims vocabulary's checks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from heads.report.curves import curve_area, curve_series, interpolate, removable
from heads.report.fmt import Table, fmt
from heads.report.site_labels import site_kind, site_label
from heads.report.spec import ClaimSpecError, load_all, load_claims, parse_claim
from heads.report.stats import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    SUPPORTED,
    Estimate,
    decide,
    decide_binomial,
    decide_equivalence,
    effect_size,
    estimate,
    holm,
    interval,
    two_level,
)

REPLICATIONS = Path(__file__).resolve().parents[1] / "replications"


# -- intervals and verdicts ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [3, 5, 10])
def test_interval_covers_the_true_mean_95_percent_of_the_time(n):
    """Normal data with a known mean: the interval must cover it in 93-97 % of samples (a percentile bootstrap
    over the seeds covers about 74 % at n=3 and 85 % at n=5, and fails this)."""
    rng = np.random.default_rng(12)
    trials, mu = 4000, 0.3
    hits = 0
    for _ in range(trials):
        low, high = interval(rng.normal(mu, 0.7, size=n))
        hits += low <= mu <= high
    assert 0.93 <= hits / trials <= 0.97


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("seed_sd,example_sd", [(1.0, 1.0), (0.0, 1.0), (1.0, 0.05)])
def test_two_level_interval_covers_the_mean_over_seeds_and_examples(n, seed_sd, example_sd):
    """Every seed scored on the same 100 test examples: y[seed, i] = mu + seed effect + example effect + noise.
    The task's mean mu must be covered at least 93 % of the time whether seeds or examples dominate, and not
    wastefully more than 98.5 % (adding half-widths in quadrature is conservative at n = 3 where the two shares
    balance); a seed-only interval covers far less when the examples dominate: the test set is one sample."""
    rng = np.random.default_rng(7)
    trials, m, resamples, mu = 1000, 80, 100, 0.5
    hits = seed_only = 0
    for _ in range(trials):
        y = (mu + rng.normal(0, seed_sd, (n, 1)) + rng.normal(0, example_sd, (1, m))
             + rng.normal(0, 0.5, (n, m)))
        idx = rng.integers(0, m, (resamples, m))
        est = two_level(y.mean(1), y[:, idx].mean(-1).mean(0))
        hits += est.ci_low <= mu <= est.ci_high
        low, high = interval(y.mean(1))
        seed_only += low <= mu <= high
    assert 0.93 <= hits / trials <= 0.985
    if seed_sd == 0:
        assert seed_only / trials < 0.85


def test_two_level_gives_equal_seeds_the_examples_width_and_a_verdict():
    """Equal per-seed values no longer mean zero width: the examples' share remains, and the rule can decide."""
    replicates = np.random.default_rng(0).normal(0.8, 0.01, 500)
    est = two_level([0.8, 0.8, 0.8], replicates)
    assert est.examples and est.sd == 0 and est.dof == float("inf")
    assert est.ci_high - est.ci_low == pytest.approx(2 * 1.959964 * np.std(replicates, ddof=1), rel=1e-6)
    assert decide(est, "greater", 0.7).verdict == SUPPORTED
    assert estimate([0.8, 0.8, 0.8]).ci_low == estimate([0.8, 0.8, 0.8]).ci_high  # seeds alone: no width
    assert decide(estimate([0.8, 0.8, 0.8]), "greater", 0.7).verdict == INCONCLUSIVE
    # with spread between seeds the interval is wider than the seeds' alone, and the p-value agrees with it
    est = two_level([0.7, 0.8, 0.9], replicates)
    assert 2 < est.dof < float("inf") and est.ci_low < interval([0.7, 0.8, 0.9])[0]
    at_edge = decide(est, "greater", est.ci_low)
    assert at_edge.p_value == pytest.approx(0.025, rel=1e-6)
    # seeds that barely differ against the examples' spread: degrees of freedom at (or next to) infinity, no crash
    for eps in (3e-8, 1e-7, 3e-7, 1e-6):
        tight = two_level([0.5, 0.5 + eps, 0.5 - eps], replicates)
        assert decide(tight, "greater", 0.45).verdict == SUPPORTED and tight.dof > 1e6
    # no example noise: the seeds' Student-t interval exactly
    assert two_level([0.7, 0.8, 0.9], [0.5, 0.5]).ci_low == pytest.approx(interval([0.7, 0.8, 0.9])[0])
    with pytest.raises(ValueError, match="two seeds"):
        two_level([0.8], replicates)
    with pytest.raises(ValueError, match="two resamples"):
        two_level([0.8, 0.9], [0.1])


def test_interval_matches_the_t_formula_and_widens_with_confidence():
    values = [0.1, 0.4, 0.2, 0.35, 0.15]
    low, high = interval(values)
    mean, sd = np.mean(values), np.std(values, ddof=1)
    assert (low + high) / 2 == pytest.approx(mean)
    assert (high - low) / 2 == pytest.approx(2.776445 * sd / np.sqrt(5), rel=1e-5)  # t(0.975, 4)
    wide = interval(values, confidence=0.99)
    assert wide[0] < low and wide[1] > high
    # wider than the seeds' range at n=3, where the bootstrap returned exactly the range
    three = [1.0, 2.0, 4.0]
    assert interval(three)[0] < min(three) and interval(three)[1] > max(three)


def test_intervals_need_two_finite_values():
    with pytest.raises(ValueError, match="two values"):
        interval([0.7])
    with pytest.raises(ValueError, match="non-finite"):
        estimate([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence"):
        interval([1.0, 2.0], confidence=1.5)
    assert estimate([0.7]) == Estimate(1, 0.7, None, None, None)
    assert estimate([]) == Estimate(0, None, None, None, None)


@pytest.mark.parametrize(("values", "direction", "threshold", "expected"), [
    ([0.5, 0.6, 0.55], "greater", 0.0, SUPPORTED),
    ([0.5, 0.6, 0.55], "less", 0.0, NOT_SUPPORTED),
    ([-0.5, -0.6, -0.55], "less", 0.0, SUPPORTED),
    ([-0.5, -0.6, -0.55], "greater", 0.0, NOT_SUPPORTED),
    ([-0.1, 0.2, 0.05], "greater", 0.0, INCONCLUSIVE),  # the interval straddles the threshold
    ([-0.1, 0.2, 0.05], "less", 0.0, INCONCLUSIVE),
    ([0.5, 0.6, 0.55], "greater", 0.55, INCONCLUSIVE),  # tolerance moves the threshold into the interval
    ([0.5, 0.6, 0.55], "less", 1.0, SUPPORTED),  # "costs under 1 point"
    ([0.95, 0.9, 0.93], "less", 1.0, SUPPORTED),  # a ratio below 1
    ([0.02, 1.65], "greater", 0.0, INCONCLUSIVE),  # two seeds: never a verdict
    ([0.5, 0.5, 0.5], "greater", 0.0, INCONCLUSIVE),  # no spread: never a verdict
])
def test_verdict_rule(values, direction, threshold, expected):
    assert decide(estimate(values), direction, threshold).verdict == expected


def test_decisions_carry_the_one_sided_p_value_and_say_why_they_are_not_definite():
    d = decide(estimate([0.5, 0.6, 0.55]), "greater", 0.0)
    assert d.verdict == SUPPORTED and d.p_value < 0.025
    t = stats.ttest_1samp([0.5, 0.6, 0.55], 0.0, alternative="greater")
    assert d.p_value == pytest.approx(t.pvalue)
    straddle = decide(estimate([-0.1, 0.2, 0.05]), "greater", 0.0)
    assert straddle.p_value > 0.025 and "threshold" in straddle.reason
    # a verdict against the claim carries the other side's p: the test that decided it, not the claimed side's
    against = decide(estimate([-0.5, -0.6, -0.55]), "greater", 0.0)
    assert against.verdict == NOT_SUPPORTED
    assert against.p_value == pytest.approx(stats.ttest_1samp([-0.5, -0.6, -0.55], 0.0, alternative="less").pvalue)
    assert against.p_value < 0.025
    same = decide(estimate([0.0278] * 3), "less", 0.2)
    assert same.p_value is None and "no spread" in same.reason
    few = decide(estimate([0.1, 0.2]), "greater", 0.0)
    assert few.p_value is None and "3 at least" in few.reason


@pytest.mark.parametrize(("values", "expected"), [
    ([0.001, -0.002, 0.0005], SUPPORTED),  # well inside +-1 %
    ([0.05, 0.06, 0.055], NOT_SUPPORTED),  # wholly above the band
    ([-0.05, -0.06, -0.055], NOT_SUPPORTED),  # wholly below: a big gain is not "the same" either
    ([0.0, 0.012, -0.01], INCONCLUSIVE),  # the interval leaves the band
])
def test_equivalence_is_two_one_sided_tests(values, expected):
    d = decide_equivalence(estimate(values), 0.0, 0.01)
    assert d.verdict == expected
    lower = stats.ttest_1samp(values, -0.01, alternative="greater").pvalue
    upper = stats.ttest_1samp(values, 0.01, alternative="less").pvalue
    tost = max(lower, upper)
    # outside the band: below its lower edge or above its upper one
    outside = min(1 - lower, 1 - upper)
    # the p that decided: TOST's for "the same", the outside test's for "not the same", the nearer otherwise
    expected_p = {SUPPORTED: tost, NOT_SUPPORTED: outside, INCONCLUSIVE: min(tost, outside)}[expected]
    assert d.p_value == pytest.approx(expected_p)
    assert (d.p_value < 0.025) == (expected != INCONCLUSIVE)
    with pytest.raises(ValueError, match="margin"):
        decide_equivalence(estimate(values), 0.0, 0.0)


def test_holm_matches_the_step_down_rule_and_keeps_the_order():
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> 0.02, 0.03, 0.06, 0.06 (monotone), back in the input order
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []
    with pytest.raises(ValueError, match="non-finite"):
        holm([float("nan")])


def test_binomial_against_the_claim_carries_the_other_sides_p():
    d = decide_binomial(20, 24, "less", 0.2)
    assert d.verdict == NOT_SUPPORTED
    assert d.p_value == pytest.approx(stats.binom.sf(19, 24, 0.2)) and d.p_value < 0.025


def test_verdict_rejects_unknown_direction():
    with pytest.raises(ValueError, match="direction"):
        decide(estimate([1.0, 2.0, 3.0]), "sideways", 0.0)


def test_effect_size_is_mean_over_sd():
    est = estimate([1.0, 2.0, 3.0])
    assert est.sd == pytest.approx(1.0)
    assert effect_size(est) == pytest.approx(2.0)
    assert effect_size(est, null=1.0) == pytest.approx(1.0)
    assert effect_size(estimate([1.0])) is None
    assert effect_size(estimate([2.0, 2.0])) is None


# -- curve measures ------------------------------------------------------------------------------------
def test_curve_measures():
    xs, ys = [0.0, 0.25, 0.5], [1.0, 0.9, 0.5]
    assert interpolate(xs, ys, 0.125) == pytest.approx(0.95)
    assert interpolate(xs, ys, 0.6) is None
    assert curve_area(xs, ys, 0.5) == pytest.approx((0.25 * 0.95 + 0.25 * 0.7) / 0.5)
    assert curve_area(xs, ys, 0.25) == pytest.approx(0.95)
    assert curve_area(xs, ys, 0.75) is None  # the curve stops earlier
    assert removable(xs, ys, 0.1) == 0.25
    assert removable(xs, ys, 0.05) == 0.0
    assert removable(xs, [1.0, 1.0, 1.0], 0.0) == 0.5


def test_curve_series_orients_lower_and_higher_is_better():
    low = curve_series({"metric": "perplexity", "points": [{"ratio": 0.5, "perplexity": 40.0},
                                                             {"ratio": 0.0, "perplexity": 20.0}]})
    assert low.ratios == [0.0, 0.5] and low.retained == [1.0, 0.5]
    high = curve_series({"metric": "bleu", "points": [{"ratio": 0.0, "bleu": 20.0}, {"ratio": 0.5, "bleu": 15.0}]})
    assert high.retained == [1.0, 0.75]
    assert curve_series({"metric": "bleu", "points": [{"ratio": 0.1, "bleu": 1.0}]}) is None  # no level 0


def test_site_labels_follow_the_families():
    assert site_label("model.layers.2.self_attn") == "L2.causal"
    assert site_label("model.decoder.layers.1.encoder_attn") == "dec1.cross"
    assert site_label("model.decoder.layers.0.self_attn") == "dec0.causal"
    assert site_label("model.encoder.layers.3.self_attn") == "enc3.self"
    assert site_label("bert.encoder.layer.5.attention.self") == "enc5.self"
    assert site_kind("something.else") == "unknown" and site_label("something.else") == "something.else"


def test_table_formatting_is_fixed():
    t = Table("t", ["a", "ratio", "b", "c"], [[1.0 / 3, 0.25, 7, None], [float("nan"), 0.5, True, "x|y"]])
    assert t.to_csv() == "a,ratio,b,c\n0.3333,0.250,7,\n,0.500,true,x|y\n"
    assert "| 0.3333 | 0.250 | 7 | – |" in t.to_markdown() and "x\\|y" in t.to_markdown()
    assert "No data" in Table("empty", ["a"]).to_markdown()
    assert fmt(float("inf")) == "inf" and fmt(2.0, ".1f") == "2.0"


# -- the claims vocabulary -----------------------------------------------------------------------------
def test_shipped_claims_load_and_cover_the_claims_list():
    claims = load_all(REPLICATIONS)
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids))
    families = {re.match(r"[A-E]\d", i).group(0) for i in ids}  # E: head layouts (shared CLAIMS.md)
    for needed in ("A1", "A2", "A3", "B1", "B2", "B3", "B4", "B5", "B6", "C1", "C2", "C3",
                   "D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8"):
        assert needed in families, needed
    assert {c.replication for c in claims} == {"michel2019", "voita2019", "overprovisioning", "training_time",
                                              "pretrained", "decoding", "scaling"}
    for c in claims:
        assert c.text and (c.not_tested or (c.task and c.a))
    # D7 as a whole (C2-pt-rare is judged now: a causal head's rare token is the rarest of its prefix)
    assert {c.id for c in claims if c.not_tested} == {"D7"}
    # every claim that can be tested says what its models must reach (``requires: []`` says: nothing)
    assert all(c.declared for c in claims if not c.not_tested)
    # a quality claim on translation needs a model that translates; a speed claim (decoding) holds whatever the
    # model's BLEU, and its replication runs no BLEU baseline to test it on
    assert all(any(p.name == "mt-translates" for p in c.requires) for c in claims
               if c.task == "mt" and c.replication != "decoding")
    for folder in ("michel2019", "voita2019", "overprovisioning", "training_time", "pretrained", "decoding"):
        for name in ("README.md", "reference.yaml", "claims.yaml"):
            assert (REPLICATIONS / folder / name).is_file()


BASE = {"id": "X", "text": "t", "task": "lm", "kind": "value", "direction": "greater",
        "a": {"variant": "baseline", "field": "value"}}


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "mean"}, "kind 'mean'"),
    ({"direction": "up"}, "direction"),
    ({"colour": "red"}, "unknown keys"),
    ({"kind": "paired_difference"}, "takes a: and b:"),
    ({"b": {"variant": "x", "field": "value"}}, "takes a: only"),
    ({"a": {"from": "curve", "measure": "area"}}, "needs 'scorer'"),
    ({"a": {"from": "ablation", "measure": "share"}}, "measure: 'share'"),
    ({"a": {"from": "nowhere"}}, "from: 'nowhere'"),
    ({"a": {"variant": "baseline"}}, "needs 'field'"),
    ({"a": {"variant": "baseline", "field": "value", "scorer": "x"}}, "unknown for from: run"),
    ({"a": {"variant": "during", "field": "value", "pruned": "yes"}}, "pruned must be true or false"),
    ({"tolerance": "a bit"}, "must be numbers"),
    ({"task": None}, "no task"),
    ({"test": "bayes"}, "test must be one of"),
    ({"test": "equivalence"}, "positive margin"),
    ({"test": "equivalence", "margin": -0.1}, "positive margin"),
    ({"margin": 0.1}, "positive margin"),
    ({"requires": "mt-translates"}, "list of precondition names"),
    ({"requires": ["nowhere"]}, "unknown preconditions ['nowhere']"),
])
def test_bad_claims_are_named(change, message):
    with pytest.raises(ClaimSpecError, match=re.escape(message)):
        parse_claim({**BASE, **change}, "r", "here")


def test_claim_files_are_checked(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "claims.yaml").write_text("claims:\n  - {id: A1, text: t, not_tested: why}\n")
    (tmp_path / "two" / "claims.yaml").write_text("claims:\n  - {id: A1, text: u, not_tested: why}\n")
    assert load_claims(tmp_path / "one" / "claims.yaml")[0].replication == "one"
    with pytest.raises(ClaimSpecError, match="appears in one and two"):
        load_all(tmp_path)
    (tmp_path / "two" / "claims.yaml").write_text("claims: [\n")
    with pytest.raises(ClaimSpecError, match="not valid YAML"):
        load_claims(tmp_path / "two" / "claims.yaml")
    (tmp_path / "two" / "claims.yaml").write_text("- a list\n")
    with pytest.raises(ClaimSpecError, match="'claims' list"):
        load_claims(tmp_path / "two" / "claims.yaml")


def test_preconditions_are_named_checked_and_shared(tmp_path):
    (tmp_path / "preconditions.yaml").write_text(
        "preconditions:\n"
        "  learned: {what: base accuracy, a: {task: cls, variant: baseline, field: value}, at_least: 0.75, why: w}\n")
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "claims.yaml").write_text(
        "preconditions:\n"
        "  converged: {a: {task: lm, variant: baseline, field: late_improvement}, at_most: 0.02}\n"
        "claims:\n"
        "  - {id: A1, text: t, task: cls, a: {variant: baseline, field: value}, direction: greater,\n"
        "     requires: [learned, converged]}\n"
        "  - {id: A2, text: t, task: cls, a: {variant: baseline, field: value}, direction: greater, requires: []}\n")
    one, two = load_claims(tmp_path / "one" / "claims.yaml")
    assert [p.name for p in one.requires] == ["learned", "converged"] and one.declared
    learned, converged = one.requires
    assert learned.holds(0.75) and not learned.holds(0.7) and learned.bound() == ">= 0.75"
    assert converged.holds(0.01) and not converged.holds(0.03) and converged.what == "converged"
    assert two.requires == () and two.declared
    (tmp_path / "preconditions.yaml").write_text("preconditions:\n  bad: {a: {task: lm, variant: b, field: v}}\n")
    with pytest.raises(ClaimSpecError, match="needs a: and at_least or at_most"):
        load_claims(tmp_path / "one" / "claims.yaml")
    (tmp_path / "preconditions.yaml").write_text("preconditions:\n  bad: {a: {task: lm, field: v}, at_least: 1}\n")
    with pytest.raises(ClaimSpecError, match="needs 'variant'"):
        load_claims(tmp_path / "one" / "claims.yaml")


def test_late_improvement_is_the_relative_fall_over_the_last_half():
    from heads.report.collect import late_improvement

    rows = [{"step": 0, "val_loss": 7.0}, {"step": 100, "val_loss": 4.0}, {"step": 150, "val_loss": 3.5},
            {"step": 200, "val_loss": 3.3}, {"step": 210, "train_loss": 3.2}, {"step": 300, "val_loss": 3.2}]
    assert late_improvement(rows) == pytest.approx((3.5 - 3.2) / 3.2)  # the eval at or before step 150
    assert late_improvement(rows[:1]) is None and late_improvement([]) is None


def test_projected_improvement_extrapolates_a_power_law_one_doubling_ahead():
    """On a loss a + b t^-c the fall from T to 2T is the fall from T/2 to T times 2^-c, which the fall from T/4 to
    T/2 gives: the projection is exact for such a curve, whatever a, b and c."""
    from heads.report.collect import projected_improvement

    def loss(t: float) -> float:
        return 2.0 + 5.0 * t ** -0.7

    rows = [{"step": t, "val_loss": loss(t)} for t in (100, 200, 400, 800)]
    assert projected_improvement(rows) == pytest.approx((loss(800) - loss(1600)) / loss(800))
    flat = [{"step": t, "val_loss": 3.0} for t in (100, 200, 400)]
    assert projected_improvement(flat) == 0.0  # nothing fell over the last half: done
    noisy = [{"step": 100, "val_loss": 3.0}, {"step": 200, "val_loss": 3.1}, {"step": 400, "val_loss": 2.5}]
    # the earlier interval rose, so its ratio is unknown: the last half's own fall, the most a
    # decelerating curve could still lose, and never None (a seed left unmeasured hides the others)
    assert projected_improvement(noisy) == pytest.approx((3.1 - 2.5) / 2.5)
    rising = [{"step": 100, "val_loss": 3.0}, {"step": 200, "val_loss": 2.9}, {"step": 400, "val_loss": 2.95}]
    assert projected_improvement(rising) == 0.0  # the last half did not fall: it is done
    assert projected_improvement(rows[:2]) is None  # a quarter point is needed


def test_heads_removed_by_kind_of_site():
    from heads.report.collect import removed_by_kind

    enc, dec_self, cross = ("model.encoder.layers.0.self_attn", "model.decoder.layers.0.self_attn",
                            "model.decoder.layers.0.encoder_attn")
    full = {enc: [0, 1, 2, 3], dec_self: [0, 1, 2, 3], cross: [0, 1, 2, 3]}
    kept = {enc: [2], dec_self: [0, 1, 2, 3], cross: [0, 3]}
    assert removed_by_kind(kept, full) == {"heads_removed_share.self": 0.75, "heads_removed_share.causal": 0.0,
                                           "heads_removed_share.cross": 0.5}
    assert removed_by_kind(None, full) == {} and removed_by_kind(kept, None) == {}


def test_random_orders_average_level_by_level():
    from heads.strategies.iterative import mean_curve

    a = [{"level": 0, "ratio": 0.0, "bleu": 10.0, "removed": {}}, {"level": 1, "ratio": 0.25, "bleu": 8.0,
                                                                     "removed": {"s": [1]}}]
    b = [{"level": 0, "ratio": 0.0, "bleu": 10.0, "removed": {}}, {"level": 1, "ratio": 0.25, "bleu": 6.0,
                                                                     "removed": {"s": [0]}},
         {"level": 2, "ratio": 0.5, "bleu": 1.0, "removed": {}}]
    assert mean_curve([a, b]) == [{"level": 0, "ratio": 0.0, "bleu": 10.0, "orders": 2},
                                  {"level": 1, "ratio": 0.25, "bleu": 7.0, "orders": 2}]


def test_table_intervals_stay_inside_what_a_bounded_metric_can_take():
    from heads.report.tables import ci

    near_one = [0.99, 0.97, 1.0]
    mean, low, high = ci(near_one, "accuracy")
    raw = ci(near_one)
    assert raw[2] > 1.0 and high == 1.0 and low == raw[1] and mean == raw[0]  # only the bound moves
    assert ci([0.1, 0.0, 0.3], "bleu")[1] == 0.0 and ci([0.1, 0.0, 0.3])[1] < 0.0
    assert ci([0.1, 0.0, 0.3], "not-a-metric") == ci([0.1, 0.0, 0.3])  # unknown metrics: no bounds assumed


def test_exact_claims_check_a_deterministic_count_on_every_seed():
    """Byte counts fixed by the layout have no interval: every seed must agree, then meet the condition."""
    from heads.report.stats import decide_exact

    def below(v):
        return v < 1.0

    assert decide_exact([0.95, 0.95, 0.95], below, "< 1").verdict == SUPPORTED
    assert decide_exact([1.0, 1.0, 1.0], below, "< 1").verdict == NOT_SUPPORTED
    disagree = decide_exact([0.95, 0.96, 0.95], below, "< 1")
    assert disagree.verdict == INCONCLUSIVE and "not a deterministic count" in disagree.reason
    assert decide_exact([0.95, 0.95], below, "< 1").verdict == INCONCLUSIVE
    band = parse_claim({"id": "X", "text": "x", "task": "lm", "kind": "value", "test": "exact", "null_value": 2.0,
                        "margin": 0.01, "direction": "less", "a": {"variant": "during", "field": "f"}}, "t", "t")
    assert band.holds(2.0002) and not band.holds(3.0) and band.condition() == "within +2 ± 0.01"
    with pytest.raises(ClaimSpecError, match="directional one does not"):
        parse_claim({"id": "X", "text": "x", "task": "lm", "kind": "value", "margin": 0.01, "direction": "less",
                     "a": {"variant": "during", "field": "f"}}, "t", "t")


def test_optimizer_bytes_are_the_first_prunes_own(tmp_path):
    """D8's fields: optimizer-state bytes after / before the prune, and moment bytes per parameter byte after,
    as the prune event logged them (the metrics either side are not decoded: a run may log none there)."""
    from heads.report.collect import Run, _memory_at_prune

    run = Run("lm", "during", "oneshot", 0.25, "0.25", 0, tmp_path)
    run.metrics = [{"step": 0, "optimizer_mb": 0.0, "param_mb": 5.004},
                   {"step": 20, "optimizer_mb": 10.009, "param_mb": 5.004},
                   {"step": 40, "optimizer_mb": 9.509, "param_mb": 4.754}]
    run.events = [{"step": 30, "event": "prune", "removed": {"l0": [1]}}]  # a prune that logged no sizes
    assert _memory_at_prune(run) == {"optimizer_mb_ratio": None, "moments_per_param": None}
    run.events = [{"step": 5, "event": "prune", "removed": {"l0": [1]}, "optimizer_mb_before": 10.0,
                   "optimizer_mb_after": 9.0, "param_mb_after": 4.5},
                  {"step": 9, "event": "prune", "removed": {"l0": [2]}, "optimizer_mb_before": 9.0,
                   "optimizer_mb_after": 8.0, "param_mb_after": 4.0}]
    assert _memory_at_prune(run) == {"optimizer_mb_ratio": 0.9, "moments_per_param": 2.0}  # the first one's
    # pruned before any moment existed: nothing to compare
    run.events = [{"step": 0, "event": "prune", "removed": {"l0": [1]}}]
    assert _memory_at_prune(run) == {"optimizer_mb_ratio": None, "moments_per_param": None}


def test_no_retained_share_over_a_model_that_scores_almost_nothing():
    """A BLEU of 0.05 that moves to 1.4 would 'retain' 28x: below 1 % of the metric's range the values stand,
    the share is not computed, and measures built on it have nothing to measure."""
    from heads.report.estimators import curve_value as _curve_value
    from heads.task_metrics import retained_defined

    noise = {"metric": "bleu", "points": [{"ratio": 0.0, "bleu": 0.05}, {"ratio": 0.25, "bleu": 1.4}]}
    curve = curve_series(noise)
    assert curve.values == [0.05, 1.4] and curve.retained == [None, None]
    for measure in ("area", "removable", "retained"):
        assert _curve_value(noise, {"measure": measure, "ratio": 0.25, "upto": 0.25}) is None
    assert _curve_value(noise, {"measure": "value", "ratio": 0.25}) == 1.4
    translates = {"metric": "bleu", "points": [{"ratio": 0.0, "bleu": 20.0}, {"ratio": 0.25, "bleu": 18.0}]}
    assert curve_series(translates).retained == [1.0, 0.9]
    assert retained_defined("bleu", 1.0) and not retained_defined("bleu", 0.99)
    assert retained_defined("accuracy", 0.5) and retained_defined("perplexity", 1000.0)


def test_clopper_pearson_interval_and_binomial_decision():
    from scipy import stats as st

    from heads.report.stats import clopper_pearson, decide_binomial

    low, high = clopper_pearson(0, 72)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 72))  # no zero width at a count of 0
    low, high = clopper_pearson(5, 20)
    assert st.binom.sf(4, 20, low) == pytest.approx(0.025) and st.binom.cdf(5, 20, high) == pytest.approx(0.025)
    assert clopper_pearson(20, 20)[1] == 1.0
    # coverage: the exact interval covers a true share at least 95 % of the time (it is conservative)
    rng = np.random.default_rng(0)
    for p, n in ((0.05, 30), (0.3, 72)):
        ks = rng.binomial(n, p, 4000)
        covered = np.mean([lo <= p <= hi for lo, hi in (clopper_pearson(int(k), n) for k in ks)])
        assert covered >= 0.95, (p, n, covered)
    assert decide_binomial(0, 72, "less", 0.2).verdict == SUPPORTED
    assert decide_binomial(72, 72, "less", 0.2).verdict == NOT_SUPPORTED
    assert decide_binomial(0, 5, "less", 0.2).verdict == INCONCLUSIVE  # five units cannot tell 0 from 0.2
    assert decide_binomial(18, 20, "greater", 0.5).verdict == SUPPORTED
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)


def test_a_bracketed_quantity_is_definite_only_where_both_ends_agree():
    from heads.report.stats import decide_at_resolution, estimate

    def decide_less(e):
        return decide(e, "less", 1.0)

    low, high = estimate([0.80, 0.82, 0.81]), estimate([0.85, 0.87, 0.86])
    both = decide_at_resolution(low, high, decide_less)
    assert both.verdict == SUPPORTED
    assert both.p_value == pytest.approx(max(decide_less(low).p_value, decide_less(high).p_value))
    straddles = decide_at_resolution(low, estimate([1.02, 1.05, 0.98]), decide_less)
    assert straddles.verdict == INCONCLUSIVE and "ends disagree" in straddles.reason


def test_the_early_window_is_the_one_the_run_says_else_a_tenth():
    """What the report calls a run's early throughput covers the steps before its strategy first acted: the
    run's own warmup_end (the report never infers it from the log); without one, the first 10 % of its steps."""
    from heads.report.collect import Run, _early_window

    run = Run("lm", "during", "dropout0.25", 0.0, "0.0", 0, Path("."))
    run.summary = {"steps": 400, "warmup_end": 100}
    run.events = [{"step": 40, "event": "wave", "removed": 0}]
    assert _early_window(run) == 100  # the run's word over the log
    run.summary = {"steps": 700}  # a run from before warmup_end was recorded: its events are not decoded
    assert _early_window(run) == 70
    run.summary, run.events = {"steps": 500, "warmup_end": None}, []  # never acted after its start
    assert _early_window(run) == 50
