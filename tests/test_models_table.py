"""The cross-model table (heads models): each model's layout beside its masking costs, from rendered tables."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from heads import models
from heads.cli import main
from heads.cli.common import UserError
from heads.report.models import (
    Layout,
    cross_model_table,
    earlier_rows,
    layout_of,
    masking_rows,
    redundancy_of,
    removable_of,
)

COLUMNS = ["task", "job", "order", "unit", "ratio", "n_replicates", "heads_closed", "loss", "ci_low", "ci_high",
           "relative", "relative_ci_low", "relative_ci_high", "perplexity"]


def _masking(folder: Path, task: str, rows: list[tuple]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "masking.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerow([task, "importance", "none", "none", "0.000", 10, 0, 3.0, 3.0, 3.0, 0, 0, 0, 20.0])
        for job, order, unit, ratio, rel in rows:
            w.writerow([task, job, order, unit, f"{ratio:.3f}", 10, 5, 3.3, 3.2, 3.4, rel, rel - 0.01, rel + 0.01,
                        27.0])
    return folder


def test_a_layout_says_mha_gqa_or_mqa_from_the_sites():
    mha = layout_of(models.llama(vocab=64, d=32, layers=2, heads=4, seed=0), "a", "lm")
    gqa = layout_of(models.llama(vocab=64, d=32, layers=2, heads=4, kv_heads=2, seed=0), "b", "lm")
    mqa = layout_of(models.llama(vocab=64, d=32, layers=2, heads=4, kv_heads=1, seed=0), "c", "lm")
    assert (mha.attention, gqa.attention, mqa.attention) == ("MHA", "GQA", "MQA")
    assert (gqa.sites, gqa.heads, gqa.groups) == (2, 8, 4) and gqa.params > 0


def test_one_row_per_model_unit_and_order_with_its_cost_at_each_share(tmp_path):
    rows = masking_rows(_masking(tmp_path / "a", "lm", [("importance", "importance", "head", 0.3, 0.2),
                                                         ("importance", "importance", "head", 0.5, 0.5),
                                                         ("oracle", "oracle", "group", 0.3, 0.08)]) / "masking.csv")
    table = cross_model_table([(Layout("m", "lm", 100, 2, 8, 4), rows)])
    got = {(r[7], r[8], r[9]): dict(zip(table.columns, r, strict=True)) for r in table.rows}
    assert set(got) == {("importance", "head", "importance"), ("oracle", "group", "oracle")}
    head = got[("importance", "head", "importance")]
    assert head["attention"] == "GQA" and head["cost_30"] == 0.2 and head["cost_50"] == 0.5
    assert head["cost_30_ci_low"] == pytest.approx(0.19)
    assert got[("oracle", "group", "oracle")]["cost_50"] is None  # not measured there: empty, not zero
    from heads.report.models import cross_model_figure

    png = cross_model_figure(table, tmp_path / "models.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert cross_model_figure(table, tmp_path / "again.png").read_bytes() == png.read_bytes()  # same bytes


def _table(tmp_path: Path, model: str, params: int) -> Path:
    """A rendered cross-model table of one model (as its own battery writes it: results/<preset>/<model>/)."""
    rows = masking_rows(_masking(tmp_path / f"{model}-masking", "lm",
                                 [("importance", "importance", "head", 0.3, 0.2),
                                  ("oracle", "oracle", "head", 0.5, 0.4)]) / "masking.csv")
    table = cross_model_table([(Layout(model, "lm", params, 2, 8, 8), rows)])
    return table.write(tmp_path / model, "models")[0]


def test_a_model_rendered_apart_joins_the_table_as_it_was_rendered_in_model_order(tmp_path):
    """Another model's battery wrote its own row (its layout read when it ran); the preset's table takes it as it
    is, typed as if measured here, without loading that model: the same bytes as rendering both together."""
    zeta, alpha = _table(tmp_path, "zeta", 300), _table(tmp_path, "alpha", 100)
    rows = earlier_rows(alpha)
    assert rows[0][:7] == ["alpha", "lm", "MHA", 100, 2, 8, 8] and isinstance(rows[0][11], float)
    assert rows[0][-1] is None and rows[1][11] is None  # a share not measured stays empty, not zero
    joined = cross_model_table([], earlier=earlier_rows(zeta) + rows)
    assert [r[0] for r in joined.rows] == ["alpha", "alpha", "zeta", "zeta"]
    both = "".join(p.read_text() for p in (alpha, zeta)).replace(alpha.read_text().splitlines()[0] + "\n", "")
    assert joined.to_csv() == alpha.read_text().splitlines()[0] + "\n" + both
    twice = "alpha/lm/importance/head/importance, alpha/lm/oracle/head/oracle given twice"
    with pytest.raises(ValueError, match=twice):
        cross_model_table([], earlier=rows + rows)
    (tmp_path / "odd.csv").write_text("model,task\nx,lm\n")
    with pytest.raises(ValueError, match="not the cross-model table's"):
        earlier_rows(tmp_path / "odd.csv")


def test_each_model_s_redundant_heads_sit_beside_its_costs_read_from_its_redundancy_table(tmp_path):
    folder = _masking(tmp_path / "a", "lm", [("importance", "importance", "head", 0.3, 0.2),
                                             ("importance", "importance", "group", 0.3, 0.3)])
    assert redundancy_of(folder) == (None, None, None)  # its replication measures none: empty cells
    cols = "task,arm,unit,space,pooling,threshold,n_shards,redundancy_ratio,ci_low,ci_high"
    (folder / "redundancy.csv").write_text(f"{cols}\nlm,base,group,residual,mean,0.85,4,0.0,0.0,0.0\n"
                                           "lm,base,head,residual,mean,0.85,4,0.0333,0.02,0.05\n"
                                           "lm,base,head,value,mean,0.85,4,0.5,0.4,0.6\n")
    assert redundancy_of(folder) == (0.0333, 0.02, 0.05)
    table = cross_model_table([(Layout("m", "lm", 100, 2, 8, 4), masking_rows(folder / "masking.csv"))],
                              redundancy=[redundancy_of(folder)])
    assert table.columns[-3:] == ["redundant_heads", "redundant_heads_ci_low", "redundant_heads_ci_high"]
    assert [row[-3:] for row in table.rows] == [[0.0333, 0.02, 0.05]] * 2  # the model's, on each of its rows
    cols += ",control_similarity"  # a planted copy the measure did not find: no share, rather than a false zero
    (folder / "redundancy.csv").write_text(f"{cols}\nlm,base,head,residual,mean,0.85,4,0.0,0.0,0.0,0.79\n")
    assert redundancy_of(folder) == (None, None, None)
    (folder / "redundancy.csv").write_text(f"{cols}\nlm,base,head,residual,mean,0.85,4,0.1,0.0,0.2,1.0\n")
    assert redundancy_of(folder) == (0.1, 0.0, 0.2)
    (folder / "redundancy.csv").write_text(f"{cols}\n")
    with pytest.raises(ValueError, match="0 rows"):
        redundancy_of(folder)


def test_each_model_s_removable_share_is_its_ledger_s_removable_claim_on_its_task(tmp_path):
    """`removable` is what the replication's ledger measured for its removable claim (B3) on the model's task, with
    its interval: copied from the judged row, never recomputed, and empty where no such claim was judged."""
    folder = _masking(tmp_path / "a", "mt", [("importance", "importance", "head", 0.3, 0.2)])
    assert removable_of(folder, "mt") == (None, None, None)  # no ledger rendered yet
    cols = "claim,replication,verdict,effect,ci_low,ci_high,task,quantity"
    ledger = (f"{cols}\nB3-mt-removable,michel2019,not supported,0.0352,-0.0363,0.1066,mt,"
              "curve/importance:removable@budget=0.028\n"
              "B3-cls-removable,michel2019,not run at this preset,,,,cls,curve/importance:removable@budget=0.012\n"
              "B3-mt-random,michel2019,supported,0.1,0.05,0.15,mt,curve/importance:retained@0.5\n")
    (folder / "claims.csv").write_text(ledger)
    assert removable_of(folder, "mt") == (0.0352, -0.0363, 0.1066)
    assert removable_of(folder, "cls") == (None, None, None)  # not judged there: empty, not zero
    table = cross_model_table([(Layout("m", "mt", 100, 2, 8, 8), masking_rows(folder / "masking.csv"))],
                              removable=[removable_of(folder, "mt")])
    got = dict(zip(table.columns, table.rows[0], strict=True))
    assert (got["removable"], got["removable_ci_low"], got["removable_ci_high"]) == (0.0352, -0.0363, 0.1066)
    (folder / "claims.csv").write_text(ledger + "B3-mt-removable-2,michel2019,supported,0.3,0.2,0.4,mt,"
                                                "curve/importance:removable@budget=0.05\n")
    with pytest.raises(ValueError, match="2 removable claims on 'mt'"):
        removable_of(folder, "mt")


def test_the_cli_takes_rows_rendered_before(tmp_path):
    alpha = _table(tmp_path, "alpha", 100)
    assert main(["models", "--rows", str(alpha), "--rows", str(_table(tmp_path, "beta", 200)),
                 "--out", str(tmp_path / "all")]) == 0
    got = (tmp_path / "all" / "models.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in got[1:]] == ["alpha", "alpha", "beta", "beta"]
    assert (tmp_path / "all" / "models.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_model_arguments_are_refused_in_one_line(tmp_path, capsys):
    for argv, words in ((["--model", "smollm2"], "SOURCE=FOLDER"),
                        (["--model", f"smollm2={tmp_path}"], "no masking table"),
                        ([], "nothing to tabulate"),
                        (["--rows", str(tmp_path / "none.csv")], "no cross-model table")):
        with pytest.raises(UserError) as err:
            main(["models", *argv, "--out", str(tmp_path / "out")])
        assert err.value.code == 2
        assert words in capsys.readouterr().err


def test_the_pretrained_dag_renders_the_table_from_every_masked_model(tmp_path):
    """Both models the pretrained preset masks (SmolLM2 in the battery, Bergamot in michel2019) are rows, each read
    from its replication's masking table."""
    from test_workflow import SNAKEMAKE, snakemake, with_shipped_packages

    if SNAKEMAKE is None:
        pytest.skip("snakemake not installed")
    run = snakemake("-n", "-p", "--forceall", "results/pretrained/models.csv", "--config", "preset=pretrained",
                    env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "--model bergamot-en-pt=results/pretrained/michel2019 --model smollm2=results/pretrained/pretrained" in out
    job = next(block for block in out.split("rule ") if block.startswith("models:"))
    assert all(f"results/pretrained/{rep}/claims.csv" in job for rep in ("michel2019", "pretrained"))  # removable


def test_every_model_battery_rendered_under_the_preset_joins_its_table(tmp_path):
    """A model's own battery (model=NAME) leaves results/<preset>/<model>/models.csv; the preset's table reads each
    such file as rows, so the table spans every model run and needs none of them installed."""
    from test_workflow import SNAKEMAKE, snakemake, with_shipped_packages

    if SNAKEMAKE is None:
        pytest.skip("snakemake not installed")
    out_dir = tmp_path / "out"
    mine = _table(out_dir, "mine", 100)
    run = snakemake("-n", "-p", "--forceall", f"{out_dir}/models.csv", "--config", "preset=pretrained",
                    f"out={out_dir}", env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert f"--rows {mine}" in out and f"--model smollm2={out_dir}/pretrained" in out
