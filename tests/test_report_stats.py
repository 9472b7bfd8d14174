"""Seed statistics, the verdict rule, curve measures, table formatting and the claims vocabulary's checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from heads.report.fmt import Table, fmt
from heads.report.measures import curve_area, curve_series, interpolate, removable
from heads.report.sites import site_kind, site_label
from heads.report.spec import ClaimSpecError, load_all, load_claims, parse_claim
from heads.report.stats import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    SUPPORTED,
    Estimate,
    bootstrap_ci,
    effect_size,
    estimate,
    verdict,
)

REPLICATIONS = Path(__file__).resolve().parents[1] / "replications"


# -- bootstrap and verdicts ----------------------------------------------------------------------------
def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.1, 0.4, 0.2, 0.35, 0.15]
    low, high = bootstrap_ci(values)
    assert (low, high) == bootstrap_ci(values)
    assert min(values) <= low < sum(values) / len(values) < high <= max(values)
    assert bootstrap_ci(values, seed=1) != (low, high)  # the seed is what fixes it
    wide = bootstrap_ci(values, level=0.99)
    assert wide[0] <= low and wide[1] >= high


def test_one_value_and_constant_values_give_a_point_interval():
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    est = estimate([0.7])
    assert est == Estimate(1, 0.7, 0.7, 0.7, None)
    assert verdict(est, "greater", 0.0) == INCONCLUSIVE  # one seed: never a verdict
    assert estimate([]) == Estimate(0, None, None, None, None)
    assert verdict(estimate([]), "less", 0.0) == INCONCLUSIVE
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="non-finite"):
        estimate([1.0, float("nan")])


@pytest.mark.parametrize(("values", "direction", "threshold", "expected"), [
    ([0.5, 0.6, 0.55], "greater", 0.0, SUPPORTED),
    ([0.5, 0.6, 0.55], "less", 0.0, NOT_SUPPORTED),
    ([-0.5, -0.6, -0.55], "less", 0.0, SUPPORTED),
    ([-0.5, -0.6, -0.55], "greater", 0.0, NOT_SUPPORTED),
    ([-0.1, 0.2, 0.05], "greater", 0.0, INCONCLUSIVE),  # the CI straddles the threshold
    ([-0.1, 0.2, 0.05], "less", 0.0, INCONCLUSIVE),
    ([0.5, 0.6, 0.55], "greater", 0.55, INCONCLUSIVE),  # tolerance moves the threshold into the CI
    ([0.5, 0.6, 0.55], "less", 1.0, SUPPORTED),  # "costs under 1 point"
    ([0.95, 0.9, 0.93], "less", 1.0, SUPPORTED),  # a ratio below 1
    ([1.0, 1.0, 1.0], "less", 1.0, INCONCLUSIVE),  # on the threshold: neither side
])
def test_verdict_rule(values, direction, threshold, expected):
    assert verdict(estimate(values), direction, threshold) == expected


def test_verdict_rejects_unknown_direction():
    with pytest.raises(ValueError, match="direction"):
        verdict(estimate([1.0, 2.0]), "sideways", 0.0)


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
    families = {re.match(r"[A-D]\d", i).group(0) for i in ids}
    for needed in ("A1", "A2", "A3", "B1", "B2", "B3", "B4", "B5", "B6", "C1", "C2", "C3",
                   "D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8"):
        assert needed in families, needed
    assert {c.replication for c in claims} == {"michel2019", "voita2019", "overprovisioning", "training_time"}
    for c in claims:
        assert c.text and (c.not_tested or (c.task and c.a))
    assert {c.id for c in claims if c.not_tested} == {"A3", "D7"}
    for folder in ("michel2019", "voita2019", "overprovisioning", "training_time"):
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
