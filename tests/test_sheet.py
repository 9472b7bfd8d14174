"""The run sheet: runs declared as data, checked before any job, turned into one quoted command line each."""

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from heads.sheet import (
    RunSpec,
    SheetError,
    baseline,
    build,
    check,
    command_line,
    custom,
    entry_overrides,
    preset_settings,
    run_label,
)

ROOT = Path(__file__).resolve().parents[1]
DAG = {preset: preset_settings(ROOT / "replications", preset) for preset in ("smoke", "tiny", "small", "paper")}


def test_every_preset_builds_a_sheet_whose_runs_start_from_runs_on_it():
    for preset in ("smoke", "tiny", "small", "paper"):
        sheet = build(ROOT / "replications", DAG[preset])
        # the scaling sweep runs at smoke and small only (its settings: null elsewhere)
        assert set(sheet.of) == {"michel2019", "overprovisioning", "training_time", "voita2019",
                                 *(["scaling"] if preset in ("smoke", "small") else [])}
        for label, entry in sheet.runs.items():
            assert all(dep in sheet.runs for dep in entry.after), label
        # the baselines are shared, declared once per task and seed
        assert len(sheet.labels("train")) == len(set(sheet.labels("train")))


def test_a_parameter_travels_typed_from_the_sheet_to_the_command_line(tmp_path):
    """An entry's config reaches its command as a JSON file, its types kept; the threads as --threads."""
    from heads.cli import build_parser
    from heads.cli.common import overlay
    from heads.freshness import write_overrides

    sheet = build(ROOT / "replications", DAG["tiny"])
    entry = sheet["lm/during/dropout0.25/0.4/seed1"]
    assert entry.strategy == "dropout_regime" and entry.knob == 0.25
    assert entry.params == {"high": 0.25, "low": 0.1, "max_ratio": 0.4, "pooling": "mean"}
    files = write_overrides(sheet, "my runs", "my data", str(tmp_path / "settings"))
    assert files[entry.label] == f"{tmp_path}/settings/config/{entry.label}.json"
    argv = shlex.split(command_line(entry, "my runs", "tiny", "my data", 3, overrides=files[entry.label]))
    assert not [a for a in argv if "=" in a and not a.startswith(("-", "{"))]  # no KEY=VALUE words left
    args = build_parser().parse_args(argv[1:])
    overrides = overlay(args)
    assert overrides["strategy"] == {"name": "dropout_regime",
                                     "params": {"high": 0.25, "low": 0.1, "max_ratio": 0.4, "pooling": "mean"}}
    assert overrides["train"] == {"seed": 1, "progress": False, "threads": 3}
    assert overrides["data"]["root"] == "my data"
    assert argv[argv.index("--out") + 1] == "my runs/lm/during/dropout0.25/0.4/seed1"  # a path with a space
    identity = json.loads(argv[argv.index("--run") + 1])
    assert identity == {"label": entry.label, "kind": "run", "task": "lm", "seed": 1, "variant": "during",
                        "arm": "dropout0.25", "ratio": 0.4, "knob": 0.25, "from_run": None}
    with pytest.raises(ValueError, match="needs the file of its config overrides"):
        command_line(entry, "my runs", "tiny", "my data", 3)  # a training run always lays its seed over the preset


def test_shared_runs_merge_their_config_and_refuse_a_conflict():
    a = baseline("one", "mt", 0, {"train": {"snapshots": [10]}})
    merged = check([a, baseline("two", "mt", 0)])
    assert merged[a.label].config == {"train": {"snapshots": [10]}}
    with pytest.raises(SheetError, match="snapshots declared as"):
        check([a, baseline("two", "mt", 0, {"train": {"snapshots": [20]}})])
    other = RunSpec(label=a.label, command="train", replication="two", task="mt", seed=0, strategy="oneshot")
    with pytest.raises(SheetError, match="different contents"):
        check([a, other])


def test_a_run_must_start_from_a_run_on_the_sheet():
    source = "lm/posthoc/importance/0.5/seed0"
    orphan = RunSpec(label=run_label("lm", "posthoc_ft", "importance", 0.5, 0), command="train", replication="x",
                     task="lm", seed=0,
                     paths={"model.source": source}, after=(source,))
    with pytest.raises(SheetError, match="not on the sheet"):
        check([orphan])
    stray = RunSpec(label="lm/x/y/0.0/seed0", command="train", replication="x", task="lm", seed=0,
                    paths={"model.source": "elsewhere/model"})
    with pytest.raises(SheetError, match="not inside a run listed in after"):
        check([stray])
    with pytest.raises(SheetError, match="command 'fly'"):
        check([RunSpec(label="a", command="fly", replication="x", task="lm", seed=0)])


def mine(preset: str, *entries: dict) -> tuple[dict, dict]:
    """The preset's DAG with these custom entries, and the runs each replication gains from them."""
    dag = preset_settings(ROOT / "replications", preset, {"custom": list(entries)})
    return dag, custom(ROOT / "replications", dag, dag["custom"])


def test_custom_entries_pass_every_parameter_through_including_the_ratio():
    _, runs = mine("smoke", {"label": "mine", "task": "lm", "strategy": "oneshot", "ratio": 0.5,
                             "params": {"reinit": True}})
    assert list(runs) == ["training_time"]  # no replication named: a training run beside the built-in strategies
    runs = runs["training_time"]
    assert [r.label for r in runs] == ["lm/during/mine/0.5/seed0", "lm/during/mine/0.5/seed1"]
    assert runs[0].params == {"reinit": True, "ratio": 0.5} and runs[0].strategy == "oneshot"
    # an entry's ratio and a params.ratio that differ contradict each other (labelled one, pruning the other)
    with pytest.raises(SheetError, match="ratio 0.5 and params.ratio 0.3 contradict"):
        mine("smoke", {"label": "m", "task": "lm", "strategy": "oneshot", "ratio": 0.5, "params": {"ratio": 0.3}})


def test_a_training_time_custom_entry_renders_the_command_line_it_always_has():
    dag, runs = mine("smoke", {"label": "mine", "task": "lm", "strategy": "oneshot", "ratio": 0.5,
                               "params": {"reinit": True}})
    sheet = build(ROOT / "replications", dag, extra=runs)
    assert sheet.of["training_time"] == sorted({*build(ROOT / "replications", dag).of["training_time"],
                                                "lm/during/mine/0.5/seed0", "lm/during/mine/0.5/seed1"})
    run = ('{"arm": "mine", "from_run": null, "kind": "run", "knob": null, "label": "lm/during/mine/0.5/seed0", '
           '"ratio": 0.5, "seed": 0, "task": "lm", "variant": "during"}')
    e = sheet["lm/during/mine/0.5/seed0"]
    assert command_line(e, "results/smoke/runs", "smoke", "resources/data", 2, overrides="S/mine.json") == (
        f"heads train --task lm --preset smoke --out results/smoke/runs/lm/during/mine/0.5/seed0 --run '{run}' "
        "--threads 2 --overrides-file S/mine.json")
    assert entry_overrides(e, "results/smoke/runs", "resources/data") == {
        "data": {"root": "resources/data"}, "train": {"seed": 0, "progress": False},
        "strategy": {"name": "oneshot", "params": {"reinit": True, "ratio": 0.5}}}


def test_a_scorer_through_custom_joins_michel2019s_curves_as_its_own_arm():
    """A post-hoc entry becomes one curve per seed (the replication's own: five at small) and curve task, built
    as the built-in scorers' (same levels, batches, sentences, from that seed's baseline), arm = its label."""
    dag, runs = mine("small", {"label": "mag", "strategy": "magnitude", "replication": "michel2019",
                               "params": {"scope": "per_site"}})
    assert list(runs) == ["michel2019"]
    sheet = build(ROOT / "replications", dag, extra=runs)
    ours = [e for e in sheet.runs.values() if e.arm == "mag"]
    assert sorted(e.label for e in ours) == [f"cls/analysis/curve/mag/seed{s}" for s in range(5)]
    assert set(sheet.of["michel2019"]) >= {e.label for e in ours}
    theirs = sheet["cls/analysis/curve/importance/seed3"]
    (e,) = [e for e in ours if e.seed == 3]
    assert (e.command, e.variant, e.paths, e.after, e.config) == (theirs.command, theirs.variant, theirs.paths,
                                                                 theirs.after, theirs.config)
    assert e.params == {**theirs.params, "scorer": "magnitude", "scope": "per_site"}
    line = command_line(e, "R", "small", "D", 1, overrides="o.json")
    assert line.startswith("heads curve R/cls/baseline/none/0.0/seed3 --param scorer=magnitude step=0.05 "
                           "max_ratio=0.5 batches=4 seed=3 scope=per_site ")
    # a task named: its curves only; a scorer on the random draw averages the same orders as the built-in one
    _, runs = mine("smoke", {"label": "rnd", "strategy": "random", "replication": "michel2019", "task": "mt"})
    assert [(e.task, e.params["orders"]) for e in runs["michel2019"]] == [("mt", 2), ("mt", 2)]


@pytest.mark.parametrize("entry,says", [
    # a scorer asked to train, a training-time strategy asked for curves
    ({"strategy": "magnitude", "task": "lm"}, "training_time: 'magnitude' is a scorer"),
    ({"strategy": "oneshot", "replication": "michel2019"}, "michel2019: 'oneshot' prunes while training"),
    # a replication with no way to take one, an unknown one, one not run at the preset
    ({"strategy": "magnitude", "replication": "voita2019"}, "replication 'voita2019' takes no custom entries"),
    ({"strategy": "magnitude", "replication": "michel"},
     "replication 'michel' is not one of ['decoding', 'michel2019'"),
    ({"strategy": "magnitude", "replication": "michel2019", "task": "lm"}, "task 'lm' has no curves at this preset"),
    ({"strategy": "magnitude", "replication": "michel2019", "ratio": 0.5}, "leave ratio out"),
    ({"strategy": "magnitude", "replication": "michel2019", "params": {"step": 0.5}}, "params ['step'] are every"),
    ({"strategy": "posthoc", "task": "lm"}, "prunes a trained model, not while training: name a scorer"),
    ({"strategy": "oneshot"}, "training_time: name the task it trains on"),
])
def test_a_custom_entry_that_does_not_fit_its_replication_fails_in_one_line_naming_it(entry, says):
    with pytest.raises(SheetError, match=r"^custom, entry 'x': ") as err:
        mine("smoke", {"label": "x", **entry})
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_an_unknown_custom_strategy_says_a_file_of_ones_own_needs_heads_plugins(monkeypatch):
    monkeypatch.delenv("HEADS_PLUGINS", raising=False)
    with pytest.raises(SheetError, match=r"unknown strategy 'magic': neither a strategy .* nor a scorer .*name "
                                         r"that module in HEADS_PLUGINS"):
        mine("smoke", {"label": "x", "task": "lm", "strategy": "magic"})


def test_a_scorer_of_ones_own_is_found_through_heads_plugins(monkeypatch):
    """A scorer registered by a module named in HEADS_PLUGINS joins michel2019 as a post-hoc entry, and the
    curve's strategy finds it as `heads curve` will (the plugins imported on the first unknown name)."""
    import sys

    from heads.scoring.registry import _REGISTRY
    from heads.strategies import build_strategy

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "plugins"))
    monkeypatch.setenv("HEADS_PLUGINS", "my_scorer")
    monkeypatch.delitem(sys.modules, "my_scorer", raising=False)
    try:
        _, runs = mine("smoke", {"label": "lastfirst", "strategy": "last_first", "replication": "michel2019"})
        assert {e.params["scorer"] for e in runs["michel2019"]} == {"last_first"}
        assert build_strategy("iterative", runs["michel2019"][0].params).params.scorer == "last_first"
    finally:
        _REGISTRY.remove("last_first")


@pytest.mark.parametrize("preset", ["smoke", "tiny", "small", "paper"])
def test_c3_trains_the_scratch_layout_for_the_l0_models_total_steps(preset):
    """Voita's scratch comparison is at equal total steps: the baseline's plus the L0 fine-tune's."""
    from heads.presets import preset as load_preset

    settings = DAG[preset]["voita2019"]
    baseline_steps = load_preset(preset)["tasks"][settings["task"]]["train"]["steps"]
    assert settings["scratch_steps"] == baseline_steps + settings["steps"]
    sheet = build(ROOT / "replications", DAG[preset])
    scratch = [e for e in sheet.runs.values() if e.variant == "scratch" and e.arm.startswith("l0")]
    assert scratch and all(e.config["train"]["steps"] == settings["scratch_steps"] for e in scratch)


@pytest.mark.parametrize("preset", ["smoke", "tiny", "small", "paper"])
def test_the_convergence_yardstick_is_the_lm_baseline_trained_twice_its_steps_once(preset):
    """lm-converged compares the baseline with itself trained twice as long: both replications that need it
    declare the same run (trained once), at twice the preset's steps, and nothing else differs. At small,
    overprovisioning trains it on every one of its six seeds (seeds: all), training_time shares the first."""
    from heads.presets import preset as load_preset

    steps = load_preset(preset)["tasks"]["lm"]["train"]["steps"]
    every = preset == "small"
    sheet = build(ROOT / "replications", DAG[preset])
    # (arm none: the preset's model; the scaling sweep's other sizes have yardsticks of their own arms)
    longer = [e for e in sheet.runs.values() if e.variant == "baseline_2x" and e.arm == "none"]
    assert [e.label for e in longer] == [f"lm/baseline_2x/none/0.0/seed{s}" for s in (range(6) if every else [0])]
    assert all(e.config == {"train": {"steps": 2 * steps}} and e.command == "train" for e in longer)
    for name in ("overprovisioning", "training_time"):
        assert longer[0].label in sheet.of[name]
    assert {e.label for e in longer} <= set(sheet.of["overprovisioning"])
    # a user's own step count (dag.<preset>.tasks) moves the yardstick with it; its seed follows theirs
    mine = preset_settings(ROOT / "replications", preset, {"seeds": [7, 8], "tasks": {"lm": {"train": {"steps": 123}}}})
    longer = [e for e in build(ROOT / "replications", mine).runs.values()
              if e.variant == "baseline_2x" and e.arm == "none"]
    assert [(e.label, e.config["train"]["steps"]) for e in longer] == [
        (f"lm/baseline_2x/none/0.0/seed{s}", 246) for s in ((7, 8) if every else (7,))]
    with pytest.raises(SheetError, match="asks for 3 seeds, the replication has 2"):
        build(ROOT / "replications", preset_settings(ROOT / "replications", preset, {
            "seeds": [7, 8], "training_time": {"longer_baseline": {"task": "lm", "factor": 2, "seeds": 3}}}))


def test_the_jobs_threads_and_gpus_reach_the_command_line():
    """Threads are the job's, whatever it runs; a training run on several GPUs is one torchrun process per GPU
    sharing them out, while analyses and pruning stay one process."""
    sheet = build(ROOT / "replications", DAG["paper"])
    entry = sheet["lm/baseline/none/0.0/seed0"]

    def argv(e, threads, gpus):
        return shlex.split(command_line(e, "runs", "paper", "data", threads, gpus, overrides="o.json"))

    def threads_of(line):
        assert line.count("--threads") == 1, line
        return line[line.index("--threads") + 1]

    one = argv(entry, 8, 1)
    assert one[:2] == ["heads", "train"] and threads_of(one) == "8"
    several = argv(entry, 8, 4)
    assert several[:7] == ["torchrun", "--standalone", "--nproc_per_node", "4", "-m", "heads", "train"]
    assert threads_of(several) == "2" and several[7:] == [a if a != "8" else "2" for a in one[2:]]
    assert threads_of(argv(entry, 2, 4)) == "1"  # never fewer than one a process
    for command in ("ablate", "curve", "roles", "prune"):
        e = next(e for e in sheet.runs.values() if e.command == command)
        line = argv(e, 4, 4)
        assert line[:2] == ["heads", command] and threads_of(line) == "4", (command, line)
    speed = next(e for e in sheet.runs.values() if e.command == "speed")
    assert threads_of(argv(speed, 4, 1)) == "4"  # its own --threads: what it times at


def test_a_users_task_config_lies_under_every_run_of_that_task_and_its_own_keys_win():
    """dag.<preset>.tasks: your model and data reach every training run of the task (and snapshot analyses
    that take --task), a variant's own keys (fewer heads) stay its own, and other tasks are untouched."""
    user = {"model": {"source": "my/bert", "heads": 99}, "data": {"columns": {"text_a": "sentence1"}}}
    dag = preset_settings(ROOT / "replications", "smoke", {"tasks": {"lm": user}})
    sheet = build(ROOT / "replications", dag)
    lm_train = [e for e in sheet.runs.values() if e.task == "lm" and e.command == "train"]
    assert lm_train and all(e.config["model"]["source"] == "my/bert" for e in lm_train)
    assert all(e.config["data"]["columns"] == {"text_a": "sentence1"} for e in lm_train)
    plain = build(ROOT / "replications", preset_settings(ROOT / "replications", "smoke"))
    for e in lm_train:  # a variant that sets model.heads keeps its own value
        own = plain[e.label].config.get("model", {}).get("heads")
        assert e.config["model"]["heads"] == (own if own is not None else 99)
    assert all(e == plain[e.label] for e in sheet.runs.values() if e.task != "lm")
    analyses = [e for e in sheet.runs.values() if e.task == "lm" and e.command != "train" and not e.options.get("task")]
    assert all(e == plain[e.label] for e in analyses)  # they read their run's config.json
    overrides = entry_overrides(lm_train[0], "runs", "data")
    assert overrides["model"]["source"] == "my/bert" and overrides["data"]["columns"] == {"text_a": "sentence1"}


def test_a_replications_own_seeds_replace_the_presets_for_its_runs_only(tmp_path):
    dag = DAG["small"]
    assert dag["seeds_of"] == {"michel2019": [0, 1, 2, 3, 4], "overprovisioning": [0, 1, 2, 3, 4, 5],
                               "scaling": [0, 1, 2]}
    assert "seeds" not in dag["michel2019"]
    sheet = build(ROOT / "replications", dag)
    michel = {sheet[label].seed for label in sheet.of["michel2019"]}
    others = {sheet[label].seed for label in sheet.of["voita2019"]}
    assert michel == {0, 1, 2, 3, 4} and others == set(dag["seeds"]) == {0, 1, 2}
    # the workflow config's own seeds win (one seed for a quick look), over every replication's
    quick = preset_settings(ROOT / "replications", "small", {"seeds": [7]})
    assert "seeds_of" not in quick and {e.seed for e in build(ROOT / "replications", quick).runs.values()} == {7}
    # any replication may name its seeds; a malformed list is refused by name
    mine = preset_settings(ROOT / "replications", "tiny", {"voita2019": {"seeds": [3, 4]}})
    assert mine["seeds_of"] == {"voita2019": [3, 4]}
    with pytest.raises(SheetError, match="seeds must be a list of distinct seeds"):
        preset_settings(ROOT / "replications", "tiny", {"voita2019": {"seeds": [1, 1]}})


def test_training_time_prunes_by_the_reports_similarity_with_a_per_token_contrast_and_snapshots():
    sheet = build(ROOT / "replications", DAG["tiny"])
    assert sheet["lm/during/oneshot/0.25/seed0"].params["scorer_params"] == {"pooling": "mean"}
    assert sheet["lm/during/curriculum/0.4/seed0"].params["pooling"] == "mean"
    assert "pooling" not in sheet["lm/during/curriculum_token/0.4/seed0"].params  # the strategies' default
    base = sheet["lm/baseline/none/0.0/seed0"]
    assert base.config["train"]["snapshots"] == [20, 100, 150]  # merged with overprovisioning's declaration
    at = sheet["lm/analysis/redundancy_at/step100/seed0"]
    assert at.command == "redundancy" and at.knob == 100.0 and at.paths["source"].endswith("snapshots/step-100")
    assert sheet["lm/analysis/redundancy_at/final/seed0"].paths["source"] == base.label


def test_training_time_prunes_the_baseline_by_genre_pooled_and_stratified_and_scores_each_genre():
    sheet = build(ROOT / "replications", DAG["tiny"])
    base = "lm/baseline/none/0.0/seed1"
    genres = ["lm_wisdom", "lm_prophets", "lm_letters"]
    pooled = sheet["lm/posthoc_genre/genre-pooled/0.25/seed1"]
    stratified = sheet["lm/posthoc_genre/genre-stratified/0.25/seed1"]
    for e in (pooled, stratified):
        assert e.command == "prune" and e.paths["source"] == base and e.after == (base,)
        assert e.params == {"ratio": 0.25, "scorer": "similarity", "seed": 1, "scorer_params": {"pooling": "mean"}}
        assert e.options["domains"] == genres and e.options["split"] == "train"  # scored on training books
        assert e.options["evaluate"] is True  # a post-hoc folder is done when its evaluation is written
    assert stratified.options["stratify"] is True and "stratify" not in pooled.options
    for arm, pruned in (("genre-pooled", pooled), ("genre-stratified", stratified)):
        shift = sheet[f"lm/analysis/shift/{arm}/seed1"]
        assert shift.paths == {"source": pruned.label, "reference": base} and shift.options["datasets"] == genres
    line = command_line(stratified, "runs", "tiny", "data", 1)
    assert "--domains lm_wisdom lm_prophets lm_letters" in line and "--stratify" in line and "--split train" in line
    memory = sheet["lm/analysis/memory/oneshot/seed1"]
    assert memory.options == {"cap_batch": 32} and memory.paths["reference"] == base
    # the baseline's redundancy on each genre's held-out text, both definitions, stratified and pooled
    red = sheet["lm/analysis/redundancy_genre/genres/seed1"]
    assert red.command == "redundancy" and red.paths == {"source": base} and red.after == (base,)
    assert red.options == {"batches": 4, "pooling": ["token", "mean"], "domains": genres}
    assert "--domains lm_wisdom lm_prophets lm_letters" in command_line(red, "runs", "tiny", "data", 1)


def test_a_prune_entry_must_evaluate_or_it_would_never_be_done():
    base = baseline("r", "lm", 0)
    pruned = RunSpec(label="lm/posthoc/x/0.5/seed0", command="prune", replication="r", task="lm", seed=0,
                     variant="posthoc", arm="x", ratio=0.5, strategy="posthoc",
                     params={"ratio": 0.5}, paths={"source": base.label}, after=(base.label,))
    with pytest.raises(SheetError, match="evaluate"):
        check([base, pruned])
    assert pruned.label in check([base, replace(pruned, options={"evaluate": True})])


def test_a_task_a_preset_does_not_analyse_still_trains_its_baselines_for_the_preconditions():
    """At small no Marian translates, so michel2019 and overprovisioning analyse no mt; they still declare the mt
    baselines (shared, trained once) so their mt claims measure the precondition and say "not tested" with the
    BLEU, rather than "inconclusive" for a missing run."""
    sheet = build(ROOT / "replications", DAG["small"])
    for name, seeds in (("michel2019", [0, 1, 2, 3, 4]), ("overprovisioning", [0, 1, 2])):
        mt = sorted(sheet[label].seed for label in sheet.of[name] if sheet[label].task == "mt")
        assert mt == seeds, name
        assert all(sheet[label].variant == "baseline" for label in sheet.of[name] if sheet[label].task == "mt")
