"""Your own strategies in the DAG (a workflow config's ``dag.<preset>.custom``): each joins the replication it
names, as that replication's runs.py says, planned by a dry run; an entry that does not fit stops it in one line
before any job."""

import json
import re

import pytest
from smoke_dag import ROOT, snakemake
from test_workflow import needs_snakemake, planned

OUT = "results/smoke"


def dry_run(tmp_path, entries: str, *targets: str):
    config = tmp_path / "custom.yaml"
    config.write_text(f"dag:\n  smoke:\n    custom:\n{entries}")
    # targets right after -n: --config and --configfile take every word up to the next option
    return snakemake(ROOT, "-n", *targets, "-p", "--forceall", "--cores", "2", "--configfile", str(config))


@needs_snakemake
def test_a_scorer_through_custom_joins_michel2019s_curves_table_and_figure(tmp_path):
    """Only the curves table and figure asked for, with every job forced: what the dry run plans is what they
    depend on, so the entry's curves (a curve per seed and curve task, from that seed's baseline) are among
    them and the report reads them as an arm beside the built-in scorers."""
    jobs = planned(dry_run(tmp_path, "      - {label: mag, strategy: magnitude, replication: michel2019}\n",
                           f"{OUT}/michel2019/curve.csv", f"{OUT}/michel2019/curves.png"))
    ours = {m.group(1): j["shell"] for j in jobs if (m := re.search(r"--out \S+/runs/(\S+/curve/mag/seed\d)\.json",
                                                                      j["shell"]))}
    assert sorted(ours) == [f"{task}/analysis/curve/mag/seed{s}" for task in ("cls", "mt") for s in (0, 1)], ours
    assert all(j["rule"] == "analyse" for j in jobs if "/curve/mag/" in j["shell"] and "heads curve" in j["shell"])
    shell = ours["mt/analysis/curve/mag/seed1"]
    assert shell.startswith("heads curve results/smoke/runs/mt/baseline/none/0.0/seed1 --param scorer=magnitude "
                            "step=0.25 max_ratio=0.75 batches=2 seed=1 --run "), shell
    renders = [j for j in jobs if j["rule"] in ("table", "figure")]
    assert len(renders) == 2
    for j in renders:
        assert all(label in j["shell"] for label in ours), j["shell"]


@needs_snakemake
def test_a_training_time_custom_entry_still_trains_beside_the_built_in_strategies(tmp_path):
    jobs = planned(dry_run(tmp_path, "      - {label: mine, task: lm, strategy: oneshot, ratio: 0.5}\n",
                           f"{OUT}/training_time/runs.csv"))
    trains = [j["shell"] for j in jobs if j["rule"] == "train" and "/lm/during/mine/0.5/seed" in j["shell"]]
    assert len(trains) == 2, trains
    for shell in trains:  # its strategy reaches the command in the file of its config overrides
        seed = re.search(r"/mine/0\.5/seed(\d) ", shell).group(1)
        file = f"{OUT}/.settings/config/lm/during/mine/0.5/seed{seed}.json"
        assert shell.startswith(f"heads train --task lm --preset smoke --out {OUT}/runs/lm/during/mine/0.5/seed{seed} ")
        assert f" --overrides-file {file} > logs/" in shell, shell
        assert json.loads((ROOT / file).read_text())["strategy"] == {"name": "oneshot", "params": {"ratio": 0.5}}
    table = next(j["shell"] for j in jobs if j["rule"] == "table")
    assert "lm/during/mine/0.5/seed0" in table and "lm/during/mine/0.5/seed1" in table


@needs_snakemake
@pytest.mark.parametrize("entry,says", [
    # a scorer asked to train: one line naming the entry and where scorers go
    ("{label: mine, task: lm, strategy: magnitude}", ["training_time: 'magnitude' is a scorer",
                                                      "replication: michel2019"]),
    # a name nobody registered: how a strategy of one's own is found
    ("{label: mine, task: lm, strategy: magic}", ["unknown strategy 'magic'", "HEADS_PLUGINS"]),
    # a label that is a built-in arm of the replication it joins (its curves would be read as that arm's)
    ("{label: random, strategy: magnitude, replication: michel2019}", ["built-in run's", "/curve/random/"]),
])
def test_a_custom_entry_that_cannot_join_fails_in_one_line_before_any_job(tmp_path, monkeypatch, entry, says):
    monkeypatch.delenv("HEADS_PLUGINS", raising=False)
    run = dry_run(tmp_path, f"      - {entry}\n")
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Building DAG" not in out
    label = re.search(r"label: (\w+)", entry).group(1)
    line = next((x for x in out.splitlines() if f"config dag.smoke.custom, entry '{label}'" in x), out[-2000:])
    assert all(s in line for s in says), line
