"""Every kind of analysis the report reads, declared once: the command that writes it, how one seed's JSON
becomes tidy rows, and what a claim's selector (``from: KIND`` in claims.yaml) may ask of it.

A new analysis joins the report by one :class:`Kind` here (plus its flattener and, if claims read it, its
estimator); the table specs (``rows: KIND``), ``heads rows``, the selectors' checks and the claims' evaluation
all read this table. replications/README.md is the selector reference for claim authors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from heads.report import estimators, flatten

Estimator = Callable[[Any, Mapping[str, Any]], "float | estimators.Share | None"]


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One kind of tidy rows, and (``measures`` not empty) a source claims may select from.

    ``analysis``: the folder under ``analysis/`` and the kind its files record (two kinds of rows may read one
    analysis: a single-head ablation also holds its all-but-one results); ``command``: the ``heads`` command
    that writes it; ``flatten``: one seed's JSON to rows; ``measures``: what ``measure:`` may name (none: rows
    for tables only); ``keys``: the other keys a selector may name, ``required`` those it must; ``value``: one
    seed's rows (``reads_json``: its JSON) to the measure (None: a selector with its own path in
    :mod:`heads.report.measures`); ``label``: what a claim calls the result; ``arm``: the selector key naming
    the arm (a glob ``pick`` narrows by the arms' knobs; ``step``: a snapshot, ``first``, ``last`` or its step;
    None: the one arm), ``default`` its default."""

    analysis: str
    command: str
    flatten: flatten.Flatten
    measures: tuple[str, ...] = ()
    keys: frozenset[str] = frozenset()
    required: tuple[str, ...] = ()
    value: Estimator | None = None
    label: str = ""
    arm: str | None = None
    default: str = "*"
    reads_json: bool = False


_CURVE_MEASURES = ("area", "retained", "value", "removable", "step")
_CURVE_KEYS = ("measure", "field", "ratio", "upto", "budget")
_REDUNDANCY = ("redundancy_ratio", "max_similarity", "min_js", "split_half_r", "control_similarity", "control_js")

KINDS: dict[str, Kind] = {
    "ablation": Kind(
        analysis="ablation", command="ablate", flatten=flatten.heads,
        measures=("significant_share", "significant_count", "mean_delta_loss", "detectable", "above_budget_share",
                  "within_budget_share"),
        keys=frozenset({"measure", "site_kind", "alpha", "test", "budget"}), value=estimators.ablation,
        label="{task} ablation {measure}{sites}"),
    "all_but_one": Kind(
        analysis="ablation", command="ablate", flatten=flatten.all_but_one,
        measures=("harmless_share", "mean_delta", "max_delta"),
        keys=frozenset({"measure", "site_kind", "budget", "relative"}), value=estimators.all_but_one,
        label="{task} all-but-one {measure}{sites}"),
    "curve": Kind(
        analysis="curve", command="curve", flatten=flatten.curve, measures=_CURVE_MEASURES,
        keys=frozenset({"scorer", *_CURVE_KEYS}), required=("scorer",), value=estimators.curve_value,
        label="{task} curve {arm} {measure} {where}", arm="scorer", reads_json=True),
    "curve_at": Kind(
        analysis="curve_at", command="curve", flatten=flatten.curve, measures=_CURVE_MEASURES,
        keys=frozenset({"step", *_CURVE_KEYS}), value=estimators.curve_value,
        label="{task} curve_at {arm} {measure} {where}", arm="step", reads_json=True),
    # timings pair passes across repeats or jobs: measures.speed reads them, not a per-seed estimator
    "speed": Kind(
        analysis="speed", command="speed", flatten=flatten.timed, measures=("speedup", "cpu_speedup", "examples_per_s"),
        keys=frozenset({"measure", "ratio", "batch"})),
    # cached decoding: a variant's rounds paired with the unpruned model's (measures.decoding reads them)
    "decoding": Kind(
        analysis="decoding", command="decode-speed", flatten=flatten.decoding,
        measures=("speedup", "cpu_speedup", "log_speedup", "of_bound", "gain_share"),
        keys=frozenset({"measure", "model", "phase", "context", "batch"}), required=("model", "phase", "batch")),
    "roles": Kind(
        analysis="roles", command="roles", flatten=flatten.roles,
        measures=("kept_minus_pruned", "kept_mean", "pruned_mean", "classified", "classified_kept"),
        keys=frozenset({"lam", "pick", "measure", "field", "site_kind"}), value=estimators.roles,
        label="{task} roles {arm} {field} {measure}", arm="lam"),
    "memory": Kind(
        analysis="memory", command="memory", flatten=flatten.models({"reference": "baseline", "model": None}),
        measures=("batch_ratio", "peak_ratio", "optimizer_ratio", "largest_batch"), keys=frozenset({"arm", "measure"}),
        required=("arm",), value=estimators.model_row, label="{task} memory {arm} {measure}", arm="arm"),
    # the time-to-target ratios weigh the clock's step times by the runs' step counts (measures.time_to_target)
    "clock": Kind(
        analysis="clock", command="clock",
        flatten=flatten.models({"reference": "baseline", "model": None, "dropout": "baseline + dropout"}),
        measures=("step_ratio", "cpu_step_ratio", "throughput_ratio", "cpu_throughput_ratio", "time_to_target_ratio",
                  "cpu_time_to_target_ratio"),
        keys=frozenset({"arm", "model", "measure", "target"}), required=("arm",), value=estimators.model_row,
        label="{task} clock {arm} {model} {measure}", arm="arm"),
    "shift": Kind(
        analysis="shift", command="shift", flatten=flatten.shifted, measures=("change", "gap", "worst", "gap_nats"),
        keys=frozenset({"arm", "dataset", "measure"}), required=("arm",), value=estimators.shift,
        label="{task} shift {arm} {dataset} {measure}", arm="arm"),
    "redundancy": Kind(
        analysis="redundancy", command="redundancy", flatten=flatten.definitions, measures=_REDUNDANCY,
        keys=frozenset({"arm", "pick", "measure", "pooling", "space", "unit"}), value=estimators.definition,
        label="{task} redundancy {arm} {pooling}/{space} {measure}", arm="arm", default="base-mha"),
    "redundancy_at": Kind(
        analysis="redundancy_at", command="redundancy", flatten=flatten.definitions, measures=_REDUNDANCY,
        keys=frozenset({"step", "measure", "pooling", "space", "unit"}), value=estimators.definition,
        label="{task} redundancy at {arm} {pooling} {measure}", arm="step"),
    "redundancy_genre": Kind(analysis="redundancy_genre", command="redundancy", flatten=flatten.definitions),
    # masks evaluated on one common test set: measures._attach_mask_examples resamples its texts
    "mask": Kind(
        analysis="mask", command="mask", flatten=flatten.masks, measures=("loss", "delta_loss", "relative"),
        keys=frozenset({"arm", "unit", "order", "ratio", "measure"}), required=("arm",), value=estimators.mask,
        label="{task} mask {arm} {unit} {where} {measure}", arm="arm"),
}
# the run records' own selector (``from: run``, the default): not an analysis, so not a kind of rows above
RUN_KEYS = frozenset({"variant", "arm", "ratio", "field", "pick", "target", "pruned"})
SOURCES = ("run", *(name for name, kind in KINDS.items() if kind.measures))
