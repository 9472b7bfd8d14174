"""Tables declared as data (heads.report.table_spec): filters, groups, order, aggregates, and clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from heads.report.collect import RunTree
from heads.report.render import render_replication, tables
from heads.report.table_spec import Column, TableSpec, TableSpecError

REPLICATIONS = Path(__file__).resolve().parents[1] / "replications"


def _spec(**raw) -> TableSpec:
    return TableSpec.parse("t", {"title": "T", "rows": "runs", **raw}, "report.yaml")


def _values(text: str, group: list[dict], everything: list[dict] | None = None) -> list:
    return Column.parse(text, "here").values(group, everything or group)


def test_aggregates_skip_failed_runs_but_count_them():
    group = [{"seed": 0, "v": 1.0, "ok": True}, {"seed": 1, "v": 3.0, "ok": False},
             {"seed": 2, "v": 100.0, "failed": True, "ok": None}]
    assert _values("n = n_ok", group) == [2] and _values("n = n_failed", group) == [1]
    assert _values("m = mean v", group) == [2.0] and _values("m = median v", group) == [2.0]
    assert _values("r = tally ok", group) == ["1/2"]  # the failed run's None is not counted
    assert _values("s = majority ok", group) == [""]  # one of three rows
    assert _values("f = first v", group) == [1.0] and _values("c = count v", group) == [2]
    mean, low, high = _values("a b c = ci v", group)
    assert mean == 2.0 and low < 1.0 < 3.0 < high


def test_a_nan_or_infinity_in_a_row_is_left_out_of_means_and_intervals_not_a_crash():
    """JSON written by Python may carry NaN: the aggregates read the finite numbers alone."""
    group = [{"seed": 0, "v": 1.0}, {"seed": 1, "v": float("nan")}, {"seed": 2, "v": 3.0},
             {"seed": 3, "v": float("inf")}]
    assert _values("m = mean v", group) == [2.0] and _values("c = count v", group) == [2]
    mean, low, high = _values("a b c = ci v", group)
    assert mean == 2.0 and low < 1.0 < 3.0 < high


def test_conditional_columns_and_the_mode_and_only_value():
    group = [{"seed": s, "pooling": p, "x": x, "head": h, "cap": 32}
             for s, p, x, h in [(0, "token", 0.1, 3), (0, "mean", 0.5, 1), (1, "mean", 0.7, 1), (1, "token", 0.3, 3)]]
    assert _values("t = mean x where pooling=token", group) == [pytest.approx(0.2)]
    assert _values("b = mode head", group) == [1]  # a tie: the smaller head
    assert _values("c = only cap", group) == [32]
    assert _values("c = only x", group) == [None]  # rows disagree
    assert _values("n = seeds", group) == [2]
    assert _values("n = count x where pooling=none", group) == [0]


def test_vs_baseline_pairs_each_run_with_its_seeds_baseline():
    base = [{"task": "lm", "seed": s, "variant": "baseline", "arm": "none", "ratio": 0.0, "t": 10.0 * (s + 1)}
            for s in (0, 1)]
    runs = [{"task": "lm", "seed": 0, "t": 5.0}, {"task": "lm", "seed": 1, "t": 30.0}, {"task": "lm", "seed": 2,
                                                                                         "t": 1.0}]
    assert _values("r = vs_baseline t", runs, base + runs) == [pytest.approx((0.5 + 1.5) / 2)]
    # the group's mean over the baseline runs' mean (a throughput against the baseline's)
    assert _values("r = over_baseline t", runs, base + runs) == [pytest.approx(12.0 / 15.0)]
    # a fallback where the aggregate gives nothing: a field of the group's first row
    assert _values("d = mean dropout or knob", [{"seed": 0, "knob": 0.25}]) == [0.25]
    assert _values("d = mean dropout or knob", [{"seed": 0, "knob": 0.25, "dropout": 0.3}]) == [0.3]
    # other runs than the group's: its task's baseline, or the runs started from the group's
    scratch = [{"task": "lm", "seed": s, "variant": "scratch", "from_run": f"lm/l0/seed{s}", "t": 2.0 + s}
               for s in (0, 1)]
    l0 = [{"task": "lm", "seed": s, "path": f"lm/l0/seed{s}", "t": 9.0} for s in (0, 1)]
    everything = base + l0 + scratch
    assert _values("b = mean t of baseline", l0, everything) == [15.0]
    assert _values("s = mean t of started where variant=scratch", l0, everything) == [2.5]
    assert _values("n = n_ok of started where variant=baseline", l0, everything) == [0]


def test_filters_groups_and_site_order_over_a_run_tree(tmp_path):
    from test_report import make_tree

    tree = RunTree(make_tree(tmp_path))
    table = _spec(where=[{"variant": ["posthoc", "scratch"], "ratio": ">0.3"}, {"variant": "base*"}],
                  by=["task", "variant"], sort=["task", "variant"],
                  columns=["task", "variant", "n = n_ok", "m lo hi = ci value metric"]).build(tree)
    assert table.columns == ["task", "variant", "n", "m", "lo", "hi"]
    keys = [tuple(r[:2]) for r in table.rows]
    assert keys == sorted(keys) and {v for _, v in keys} == {"baseline", "baseline_2x", "posthoc", "scratch"}
    ratios = _spec(where={"variant": "posthoc", "ratio": ">0.3"}, by=["ratio"], columns=["ratio"]).build(tree)
    assert ratios.rows and all(r[0] > 0.3 for r in ratios.rows)
    # sorted by a column the table computes (descending), not only by the rows' own fields
    heads = _spec(where={"task": "lm"}, by=["variant"], sort=["-h"], columns=["variant", "h = mean heads"]).build(tree)
    assert [r[1] for r in heads.rows] == sorted((r[1] for r in heads.rows), reverse=True) and len(heads.rows) > 2
    # a field no row has is a column that stays empty: the tree's problems say so (heads report prints them)
    typo = _spec(by=["task"], columns=["task", "v = mean vaule"]).build(tree)
    assert all(r[1] is None for r in typo.rows)
    assert any("no runs row has 'vaule'" in p for p in tree.problems)
    ablation = TableSpec.parse("a", {"title": "A", "rows": "ablation", "by": ["task", "site"], "sort": ["task", "site"],
                                     "columns": ["task", "label"]}, "here").build(tree)
    labels = [r[1] for r in ablation.rows if r[0] == "mt"]
    assert labels == sorted(labels, key=lambda x: (not x.startswith("enc"), x))  # encoder sites first


@pytest.mark.parametrize("raw, message", [
    ({"by": ["task"], "columns": ["task"], "colour": "red"}, "unknown keys \\['colour'\\]"),
    ({"by": ["task"]}, "missing \\['columns'\\]"),
    ({"by": ["task"], "columns": ["x = total v"]}, "'total' is not one of"),
    ({"by": ["task"], "columns": ["x = ci v"]}, "ci gives three columns"),
    ({"by": ["task"], "columns": ["x = mean"]}, "mean needs the field it aggregates"),
    ({"by": ["task"], "columns": ["x = mean v of cousins"]}, "'of' takes one of"),
    ({"by": ["task"], "per_seed": ["n = count"], "columns": ["m = mean v"]}, "read \\['v'\\], which neither"),
    ({"by": ["task"], "columns": ["x y z = mean v"]}, "ci gives three columns"),
    ({"by": ["task"], "columns": ["task"], "rows": "weather"}, "rows 'weather' is not one of"),
])
def test_a_spec_off_the_vocabulary_is_refused_with_where_and_why(raw, message):
    with pytest.raises(TableSpecError, match=message):
        _spec(**raw)


def test_a_replication_declares_a_new_table_in_its_folder_alone(tmp_path):
    """A new table is a few lines of report.yaml: no Python, and it renders with the rest."""
    from test_report import make_tree

    reps = tmp_path / "replications"
    shutil.copytree(REPLICATIONS / "training_time", reps / "training_time")
    doc = yaml.safe_load((reps / "training_time" / "report.yaml").read_text())
    doc["tables"] = {"speeds": {"title": "Throughput", "rows": "runs", "where": {"variant": "during"},
                                "by": ["task", "arm"], "columns": ["task", "arm", "tps = mean tokens_per_s"]}}
    doc["figures"] = []
    (reps / "training_time" / "report.yaml").write_text(yaml.safe_dump(doc))
    (reps / "training_time" / "claims.yaml").unlink()
    tree = RunTree(make_tree(tmp_path / "tree"))
    written = render_replication("training_time", tree, tmp_path / "out", reps)
    assert [p.name for p in written] == ["speeds.csv", "speeds.md"]
    rows = tables("training_time", tree, reps)("speeds").rows
    assert rows and all(r[2] > 0 for r in rows)
    doc["tables"] = {"nope": None}  # empty: a built-in table, and there is none of that name
    (reps / "training_time" / "report.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(TableSpecError, match="have no renderer"):
        render_replication("training_time", tree, tmp_path / "out", reps)


def test_a_figure_whose_table_or_columns_are_not_declared_fails_when_report_yaml_is_read(tmp_path):
    """The issue's example: `figures: [curves]` with the `curve` table renamed used to pass the dry run and fail
    the render with a bare `heads: report: curve`; now reading report.yaml says what the figure needs."""
    from heads.report.render import artefacts

    reps = tmp_path / "reps"
    shutil.copytree(REPLICATIONS / "michel2019", reps / "michel2019")
    path = reps / "michel2019" / "report.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["tables"]["curves_renamed"] = doc["tables"].pop("curve")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(TableSpecError, match=r"figure curves draws table 'curve', which tables: does not declare"):
        artefacts("michel2019", reps)
    doc["tables"]["curve"] = doc["tables"].pop("curves_renamed")
    doc["tables"]["curve"]["columns"] = [c for c in doc["tables"]["curve"]["columns"] if c != "metric"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(TableSpecError, match=r"figure curves needs columns \['metric'\] of table 'curve'"):
        artefacts("michel2019", reps)


def test_every_figure_reads_only_the_columns_it_declares(tmp_path):
    """Each figure drawn from rows that hold only its declared columns (heads.report.figures.NEEDS): reading any
    other raises, so the declaration checked up front is the one the code relies on."""
    from test_report import make_tree

    from heads.report.figures import FIGURES, NEEDS
    from heads.report.render import _declared, replications
    from heads.report.tables import Tables

    class Declared(dict):
        def __init__(self, row: dict, allowed: tuple[str, ...], figure: str):
            super().__init__({k: v for k, v in row.items() if k in allowed})
            self.figure = figure

        def __getitem__(self, key):
            if key not in self:
                raise AssertionError(f"figure {self.figure} reads {key!r}, which NEEDS does not declare")
            return super().__getitem__(key)

        get = __getitem__

    tree = RunTree(make_tree(tmp_path / "tree"))
    drawn = set()
    for name in replications(REPLICATIONS):
        specs, figures = _declared(name, REPLICATIONS)
        for figure in figures:
            declared = Tables(tree, specs)
            full = declared.records
            declared.records = lambda table, figure=figure, full=full: [
                Declared(r, NEEDS[figure][table], figure) for r in full(table)] if table in NEEDS[figure] else \
                pytest.fail(f"figure {figure} draws table {table!r}, which NEEDS does not declare")
            assert FIGURES[figure](declared, tmp_path / f"{figure}.png").is_file()
            drawn.add(figure)
    assert drawn == set(FIGURES) == set(NEEDS)


def test_tidy_rows_carry_their_arm_and_seed_and_load_into_pandas(tmp_path):
    from test_report import make_tree

    from heads.report.rows import by_seed, frame, rows

    tree = RunTree(make_tree(tmp_path))
    clock = rows(tree, "clock")
    assert clock and {r["role"] for r in clock} == {"reference", "model", "dropout"}
    assert all(r["step_ms"] == pytest.approx(r["step_s"] * 1e3) for r in clock if "step_s" in r)
    seeded = by_seed(tree, "clock", clock[0]["task"], clock[0]["arm"])
    assert sorted(seeded) == sorted({r["seed"] for r in clock if r["arm"] == clock[0]["arm"]})
    runs = frame(tree)
    assert len(runs) == len(tree.runs) and {"task", "variant", "seed", "value", "failed"} <= set(runs.columns)
    with pytest.raises(KeyError, match="no rows of kind 'weather'"):
        by_seed(tree, "weather", "lm", "none")


def test_heads_rows_shows_a_spec_author_the_fields_and_refuses_an_unknown_kind(tmp_path, capsys):
    import argparse

    from test_report import make_tree

    from heads.cli import report as report_cli

    def cli(argv: list[str]) -> int:
        parser = argparse.ArgumentParser(prog="heads")
        report_cli.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(argv)
        return args.func(args)

    runs = make_tree(tmp_path)
    assert cli(["rows", "--runs", str(runs), "--kind", "memory", "--tasks", "lm"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert {"task", "arm", "seed", "model", "role", "peak_mb"} <= set(header.split(",")) and lines
    assert all(line.startswith("lm,") for line in lines)
    assert cli(["rows", "--runs", str(runs), "--out", str(tmp_path / "runs.csv")]) == 0
    assert (tmp_path / "runs.csv").read_text().startswith("task,variant,arm,ratio,seed")
    with pytest.raises(SystemExit, match="unknown kind 'weather'"):
        cli(["rows", "--runs", str(runs), "--kind", "weather"])


def test_an_all_but_one_row_without_a_loss_has_no_delta_instead_of_failing_the_report():
    from heads.report.flatten import all_but_one as _all_but_one

    found = list(_all_but_one({"all_but_one": {"model.layers.0.self_attn": {"baseline_loss": 2.0, "loss": None},
                                               "model.layers.1.self_attn": {"baseline_loss": 2.0, "loss": 3.0}}},
                              "none", None))
    assert [(r["delta"], r["relative_delta"]) for r in found] == [(None, None), (1.0, 0.5)]


def test_an_all_but_one_row_with_a_nan_best_head_keeps_its_delta():
    """int(NaN) raised and failed the whole render; the best head is then unknown, the loss change still read."""
    from heads.report.flatten import all_but_one as _all_but_one

    data = {"all_but_one": {"model.encoder.layers.0.self_attn": {"best_head": float("nan"), "loss": 2.5,
                                                                  "baseline_loss": 2.0}}}
    (row,) = _all_but_one(data, "none", None)
    assert row["best_head"] is None and row["delta"] == 0.5 and row["relative_delta"] == 0.25


def test_a_mapping_where_a_value_belongs_is_left_out_of_only_and_mode():
    """A corrupt field (a {} where a batch size belongs) made the set of values unhashable and failed the render."""
    group = [{"seed": 0, "cap": 32}, {"seed": 1, "cap": {}}, {"seed": 2, "cap": 32}]
    assert _values("c = only cap", group) == [32] and _values("c = mode cap", group) == [32]
    assert _values("m = mode x", [{"seed": 0, "x": 3}, {"seed": 1, "x": "a"}]) == [3]  # a tie across types


@pytest.mark.parametrize("kind", ["ablation", "shift", "redundancy", "roles", "speed", "memory"])
def test_an_analysis_whose_list_of_rows_is_a_number_gives_no_rows_instead_of_failing(kind):
    """A NaN where an analysis keeps its rows (``rows``, ``heads``, ``shifted``, ``models``) is nothing to read."""
    from heads.report.kinds import KINDS

    bad = {key: float("nan") for key in ("rows", "heads", "shifted", "in_domain", "models", "all_but_one")}
    assert list(KINDS[kind].flatten(bad, "none", None)) == []


def test_every_figure_has_its_caption_beside_it_and_a_task_may_give_its_own(tmp_path):
    """report.yaml maps each figure to the caption the HTML report prints under it (the figure rule's params):
    the battery's speed figure reads "key/value groups" on SmolLM2 and "encoder" on MPNet's retrieval task."""
    from heads.report.render import artefacts, caption, replications

    for name in replications(REPLICATIONS):
        for figure in artefacts(name, REPLICATIONS)["figures"]:
            assert len(caption(name, figure, REPLICATIONS).split()) >= 8, (name, figure)
    assert "key/value groups" in caption("pretrained", "speed", REPLICATIONS, "lm")
    assert "encoder" in caption("pretrained", "speed", REPLICATIONS, "retrieval")
    assert caption("pretrained", "curves", REPLICATIONS, "retrieval") == caption("pretrained", "curves", REPLICATIONS)
    assert "MiniLM" in caption("michel2019", "speed", REPLICATIONS)

    rep = tmp_path / "mine"
    rep.mkdir()
    spec = "tables:\n  curve:\n" + "".join(f"    {line}\n" for line in (
        "title: Curves", "caption: The curves.", "rows: curve", "by: [task, scorer, ratio]",
        "columns: [task, scorer, ratio, metric, mean ci_low ci_high = ci value metric]"))
    (rep / "report.yaml").write_text(spec + "figures: [curves]\n")  # names alone: where would the words go?
    with pytest.raises(TableSpecError, match="figures must map each figure's name to its caption"):
        artefacts("mine", tmp_path)
    (rep / "report.yaml").write_text(spec + "figures: {curves: The curves.}\ntasks: {mt: {figures: {ablation: A}}}\n")
    with pytest.raises(TableSpecError, match=r"tasks.mt.figures: \['ablation'\] are not among figures"):
        artefacts("mine", tmp_path)
    with pytest.raises(TableSpecError, match="no figure 'speed'"):
        (rep / "report.yaml").write_text(spec + "figures: {curves: The curves.}\n")
        caption("mine", "speed", tmp_path)
