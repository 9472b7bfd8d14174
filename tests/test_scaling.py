"""The scaling sweep (replications/scaling): the run sheet it plans per size, the settings it refuses, and the table
and figure its report renders from a synthetic run tree."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from heads.report import RunTree, evaluate, load_all
from heads.report.render import render_replication
from heads.sheet import SheetError, build, load_replication, preset_settings

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"
SWEEP = REPLICATIONS / "scaling"


def _sheet(preset: str = "small", overrides: dict | None = None):
    dag = preset_settings(REPLICATIONS, preset, {"scaling": overrides} if overrides else None)
    return build(REPLICATIONS, dag)


def _of(sheet, variant: str, arm: str) -> list:
    return [sheet.runs[label] for label in sheet.of["scaling"]
            if sheet.runs[label].variant == variant and sheet.runs[label].arm == arm]


# -- the run sheet ----------------------------------------------------------------------------------------
def test_the_sheet_plans_every_size_on_the_same_seeds():
    sheet = _sheet("small")
    assert len(sheet.of["scaling"]) == 39  # 3 sizes x 3 seeds x 4 models + one yardstick per size
    for size, base_arm in (("half", "half"), ("preset", "none"), ("wide", "wide")):
        for variant, arm, n in (("baseline", base_arm, 3), ("size_posthoc", size, 3), ("size_posthoc_ft", size, 3),
                                ("size_scratch", size, 3), ("baseline_2x", base_arm, 1)):
            runs = _of(sheet, variant, arm)
            assert len(runs) == n, (size, variant)
            assert sorted(r.seed for r in runs) == [0, 1, 2][:n], (size, variant)
        for seed in (0, 1, 2):
            pruned = sheet.runs[f"lm/size_posthoc/{size}/0.5/seed{seed}"]
            # the pruned model starts from its size's baseline; the fine-tune and the scratch layout from it
            assert pruned.after == (f"lm/baseline/{base_arm}/0.0/seed{seed}",)
            assert pruned.params == {"ratio": 0.5, "scorer": "importance", "seed": seed}
            assert sheet.runs[f"lm/size_posthoc_ft/{size}/0.5/seed{seed}"].after == (pruned.label,)
            scratch = sheet.runs[f"lm/size_scratch/{size}/0.5/seed{seed}"]
            assert scratch.strategy == "scratch" and scratch.after == (pruned.label,)
            assert scratch.paths == {"strategy.params.layout_from": f"{pruned.label}/config.json"}


def test_each_size_trains_its_own_shape_and_the_preset_size_is_the_shared_baseline():
    sheet = _sheet("small")
    half = sheet.runs["lm/baseline/half/0.0/seed1"]
    assert half.config["model"] == {"d": 64, "heads": 4}
    assert sheet.runs["lm/size_scratch/wide/0.5/seed2"].config["model"] == {"d": 192, "heads": 12}
    # the preset's own model: the baseline and yardstick every replication declares alike (lm-converged's)
    for label in ("lm/baseline/none/0.0/seed0", "lm/baseline_2x/none/0.0/seed0"):
        assert label in sheet.of["scaling"] and label in sheet.of["overprovisioning"]
    assert "model" not in sheet.runs["lm/baseline/none/0.0/seed0"].config
    # each size's yardstick: its own shape at twice its baseline's steps (the preset's 3600 at small)
    assert sheet.runs["lm/baseline_2x/half/0.0/seed0"].config == {"model": {"d": 64, "heads": 4},
                                                                  "train": {"steps": 7200}}
    assert sheet.runs["lm/baseline_2x/wide/0.0/seed0"].config["train"] == {"steps": 7200}
    assert sheet.runs["lm/baseline_2x/none/0.0/seed0"].config["train"] == {"steps": 7200}


def test_a_size_with_its_own_steps_has_a_yardstick_twice_as_long():
    sizes = [{"name": "half", "model": {"d": 64, "heads": 4}, "steps": 4800}, {"name": "preset"}]
    sheet = _sheet("small", {"sizes": sizes})
    assert sheet.runs["lm/baseline/half/0.0/seed0"].config["train"] == {"steps": 4800}
    assert sheet.runs["lm/size_scratch/half/0.5/seed0"].config["train"] == {"steps": 4800}  # the same budget
    assert sheet.runs["lm/baseline_2x/half/0.0/seed0"].config["train"] == {"steps": 9600}
    assert len(sheet.of["scaling"]) == 2 * 3 * 4 + 2


def test_the_smoke_sweep_is_two_sizes_on_one_seed():
    sheet = _sheet("smoke")
    labels = sheet.of["scaling"]
    assert len(labels) == 10 and {sheet.runs[x].seed for x in labels} == {0}
    assert sheet.runs["lm/baseline/half/0.0/seed0"].config["model"] == {"d": 16, "heads": 2}
    assert "scaling" not in preset_settings(REPLICATIONS, "tiny")  # the default DAG has no room for it


@pytest.mark.parametrize("sizes,says", [
    ([{"name": "a", "model": {"d": 64}}, {"name": "a", "model": {"d": 32}}], "sizes ['a'] are named more than once"),
    ([{"name": "a"}, {"name": "b"}], "sizes ['a', 'b'] all name the preset's own model"),
    ([{"name": "a", "model": {"d": 64, "heads": 6}}, {"name": "b"}], "size 'a': heads 6 do not divide d 64"),
])
def test_sizes_that_cannot_run_are_refused_in_one_line(sizes, says):
    with pytest.raises(SheetError) as info:
        _sheet("small", {"sizes": sizes})
    assert says in str(info.value) and "\n" not in str(info.value)


def test_a_longer_baseline_on_more_seeds_than_the_sweep_has_is_refused():
    runs = load_replication(SWEEP).runs
    settings = {"sizes": [{"name": "preset"}, {"name": "half", "model": {"d": 64, "heads": 4}}], "ratio": 0.5,
                "scorer": "importance", "finetune_steps": 5, "longer_baseline": {"task": "lm", "factor": 2, "seeds": 2}}
    with pytest.raises(SheetError, match="longer_baseline asks for 2 seeds, the replication has 1"):
        runs(settings, [0])


def _validate(settings: dict) -> list[str]:
    """The errors the workflow's check of the settings against settings.schema.yaml finds (its $ref to the shared
    longer_baseline schema resolved as the workflow resolves it, beside the folder)."""
    jsonschema = pytest.importorskip("jsonschema")
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    from heads.yamlio import read_yaml

    longer = DRAFT202012.create_resource(read_yaml(REPLICATIONS / "longer_baseline.schema.yaml"))
    registry = Registry().with_resource("../longer_baseline.schema.yaml", longer)
    validator = jsonschema.Draft202012Validator(read_yaml(SWEEP / "settings.schema.yaml"), registry=registry)
    return [e.message for e in validator.iter_errors(settings)]


def test_the_committed_settings_follow_the_schema_and_bad_ones_do_not():
    from heads.yamlio import read_yaml

    doc = read_yaml(SWEEP / "settings.yaml")
    for preset in ("smoke", "small"):
        assert _validate({k: v for k, v in doc[preset].items() if k != "seeds"}) == [], preset
    good = {k: v for k, v in doc["small"].items() if k != "seeds"}
    for bad in ({**good, "sizes": good["sizes"][:1]},                                     # one size: no sweep
                {**good, "sizes": [{"name": "none"}, *good["sizes"][1:]]},                # the shared baseline's arm
                {**good, "sizes": [{"name": "x", "model": {"width": 64}}, *good["sizes"][1:]]},  # not a model key
                {**good, "ratio": 1.0}, {**good, "longer_baseline": None}, {**good, "speed": True}):
        assert _validate(bad), bad


# -- the report ---------------------------------------------------------------------------------------------
SIZES = {"half": (4, 400_000, 40.0), "preset": (8, 1_300_000, 30.0), "wide": (12, 2_750_000, 25.0)}


def _ident(label: str, seed: int, variant: str, arm: str, ratio: float, from_run: str | None) -> dict:
    return {"label": label, "kind": "run", "task": "lm", "seed": seed, "variant": variant, "arm": arm,
            "ratio": ratio, "knob": None, "from_run": from_run}


def _run(root: Path, label: str, seed: int, variant: str, arm: str, ratio: float, from_run: str | None, *,
         value: float, heads: int, params: int, strategy: str = "none") -> None:
    """A finished run's config and summary, with the identity the run sheet records."""
    folder = root / label
    folder.mkdir(parents=True)
    ident = _ident(label, seed, variant, arm, ratio, from_run)
    (folder / "config.json").write_text(json.dumps({"task": "lm", "preset": "small", "run": ident}))
    loss = math.log(value)
    if strategy != "posthoc":  # a trained model's evaluations, flat by its end: converged by the projection
        (folder / "metrics.jsonl").write_text("".join(json.dumps(
            {"step": t, "val_loss": loss + 3.0 * math.exp(-t / 10)}) + "\n" for t in range(0, 101, 10)))
    (folder / "summary.json").write_text(json.dumps({
        "status": "ok", "task": "lm", "seed": seed, "strategy": strategy, "metric": "perplexity", "value": value,
        "eval": {"loss": loss, "perplexity": value}, "final_val_loss": loss, "steps": 100, "heads": heads,
        "params": params, "run": ident}))


def sweep_tree(root: Path, seeds=(0, 1, 2), yardsticks: bool = False) -> Path:
    """The sweep's runs at three sizes. Pruning costs the half size 40 %, the preset 20 %, the wide 10 % (seed s
    adds (s - 1) times 1 %, 1 %, 3 %); scratch ends 1 %, 3 %, 6 % above the pruned and fine-tuned model (seed s
    adds (s - 1) times 2 % at the half size, 0.5 % at the others). ``yardsticks``: each size's baseline trained
    twice as long on seed 0 too, ending 1 % lower (converged by the 2 % rule)."""
    cost = {"half": 0.40, "preset": 0.20, "wide": 0.10}
    gap = {"half": 0.01, "preset": 0.03, "wide": 0.06}
    spread = {"half": 0.02, "preset": 0.005, "wide": 0.005}
    for size, (heads, params, ppl) in SIZES.items():
        arm = "none" if size == "preset" else size
        for s in seeds:
            base = f"lm/baseline/{arm}/0.0/seed{s}"
            pruned = f"lm/size_posthoc/{size}/0.5/seed{s}"
            full = ppl * (1 + 0.01 * s)
            pruned_value = full * (1 + cost[size] + {"wide": 0.03}.get(size, 0.01) * (s - 1))
            ft_value = full * 1.02
            _run(root, base, s, "baseline", arm, 0.0, None, value=full, heads=4 * heads, params=params)
            if yardsticks and s == seeds[0]:
                _run(root, f"lm/baseline_2x/{arm}/0.0/seed{s}", s, "baseline_2x", arm, 0.0, None,
                     value=full ** 0.99, heads=4 * heads, params=params)
            _run(root, pruned, s, "size_posthoc", size, 0.5, base, value=pruned_value, heads=2 * heads,
                 params=params, strategy="posthoc")
            _run(root, f"lm/size_posthoc_ft/{size}/0.5/seed{s}", s, "size_posthoc_ft", size, 0.5, pruned,
                 value=ft_value, heads=2 * heads, params=params)
            _run(root, f"lm/size_scratch/{size}/0.5/seed{s}", s, "size_scratch", size, 0.5, pruned,
                 value=ft_value * (1 + gap[size] + spread[size] * (s - 1)), heads=2 * heads, params=params,
                 strategy="scratch")
    return root


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_the_report_renders_the_size_table_and_figure_from_the_runs(tmp_path):
    runs = sweep_tree(tmp_path / "runs")
    out = tmp_path / "out"
    written = render_replication("scaling", RunTree(runs), out, REPLICATIONS)
    names = {p.name for p in written}
    assert {"scaling.csv", "scaling.md", "scaling.png", "sizes.csv", "claims.md"} <= names
    assert (out / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = _rows(out / "scaling.csv")
    assert [r["size"] for r in rows] == ["half", "preset", "wide"]  # smallest first, by parameters
    for r, (heads, params, _) in zip(rows, SIZES.values(), strict=True):
        assert int(float(r["params"])) == params and int(r["heads"]) == 4 * heads and r["n_seeds"] == "3"
        assert r["metric"] == "perplexity" and float(r["ratio"]) == 0.5
    cost = {r["size"]: float(r["a1_cost"]) for r in rows}
    gap = {r["size"]: float(r["a2_gap"]) for r in rows}
    assert cost == pytest.approx({"half": 0.40, "preset": 0.20, "wide": 0.10})  # the per-seed mean
    # the pruned model fine-tuned is 2 % above the baseline; scratch 1/3/6 % above that on average
    assert gap == pytest.approx({"half": 0.01, "preset": 0.03, "wide": 0.06})
    for r in rows:
        assert float(r["a1_ci_low"]) < float(r["a1_cost"]) < float(r["a1_ci_high"])
        assert float(r["a2_ci_low"]) < float(r["a2_gap"]) < float(r["a2_ci_high"]) and r["a2_n"] == "3"
    # the same bytes from the same runs
    again = tmp_path / "again"
    render_replication("scaling", RunTree(runs), again, REPLICATIONS)
    for name in ("scaling.csv", "scaling.md", "scaling.png", "sizes.csv"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_the_ledger_judges_each_size_on_the_table_s_numbers(tmp_path):
    claims = {c.id: c for c in load_all(REPLICATIONS, ["scaling"])}
    assert sorted(claims) == ["A1-lm-half", "A1-lm-preset", "A1-lm-wide", "A2-lm-ft-half", "A2-lm-ft-preset",
                              "A2-lm-ft-wide", "A3-sweep-cost"]
    # without the yardsticks no size's convergence is measured: no verdict, but the effect is shown
    tree = RunTree(sweep_tree(tmp_path / "bare"))
    bare = {c.id: evaluate(c, tree) for c in claims.values()}
    assert all(r.verdict == "inconclusive" and "not measured" in r.precondition for r in bare.values())
    assert bare["A1-lm-wide"].estimate.mean == pytest.approx(0.10)  # the table's a1_cost
    assert bare["A2-lm-ft-half"].estimate.mean == pytest.approx(0.01)  # the table's a2_gap
    # converged at every size: both verdicts are reachable (Holm over the replication's seven claims)
    results = evaluate_replication(claims, RunTree(sweep_tree(tmp_path / "runs", yardsticks=True)))
    verdict = {k: r.verdict for k, r in results.items()}
    assert verdict["A1-lm-half"] == verdict["A1-lm-preset"] == "not supported"  # 40 %, 20 % against a 3.3 % bound
    assert verdict["A1-lm-wide"] == "inconclusive"  # 10 % +- 3 % on 3 seeds: the interval reaches 3.3 %
    assert verdict["A2-lm-ft-wide"] == "supported"  # 6 % +- 0.5 %: scratch worse
    assert verdict["A2-lm-ft-half"] == "inconclusive"  # 1 % +- 2 % on 3 seeds
    assert verdict["A3-sweep-cost"] == "supported"  # 40 % against 10 %: pruning costs the smallest model more
    assert results["A3-sweep-cost"].estimate.mean == pytest.approx(0.30)


def evaluate_replication(claims: dict, tree: RunTree) -> dict:
    """The claims' results as the ledger writes them: judged, then Holm's adjustment over the replication."""
    from heads.report.claims import evaluate_all

    return {r.claim.id: r for r in evaluate_all(list(claims.values()), tree)}


def test_a_sweep_with_no_runs_still_renders_a_figure_that_says_so(tmp_path):
    (tmp_path / "runs").mkdir()
    written = render_replication("scaling", RunTree(tmp_path / "runs"), tmp_path / "out", REPLICATIONS,
                                 figures_only=True)
    assert [p.name for p in written] == ["scaling.png"]
