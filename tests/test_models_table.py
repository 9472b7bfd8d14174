"""The cross-model table (heads models): each model's layout beside its masking costs, from rendered tables."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from heads import models
from heads.cli import main
from heads.cli.common import UserError
from heads.report.models import Layout, cross_model_table, layout_of, masking_rows

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


def test_bad_model_arguments_are_refused_in_one_line(tmp_path, capsys):
    for argv, words in ((["--model", "smollm2"], "SOURCE=FOLDER"),
                        (["--model", f"smollm2={tmp_path}"], "no masking table")):
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
