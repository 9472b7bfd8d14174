"""The Snakemake workflow: config validated before any job, DAGs resolvable for every preset and profile,
lint clean, and the report's artefact list in step with the library."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = shutil.which("snakemake")
needs_snakemake = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed (pip install -e '.[test]')")


def snakemake(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def with_shipped_packages(tmp_path: Path) -> dict:
    """An environment in which every shipped model's package is found: the plan checks each is installed (found,
    never imported) before any job, so where one is not, a stand-in of its name takes its place."""
    import importlib.metadata
    import importlib.util

    from heads.shipped import SHIPPED

    stand_ins = tmp_path / "stand-ins"
    pieces = {piece.package: piece for s in SHIPPED.values() for piece in s.pieces}
    for package in {s.package for s in SHIPPED.values()} | set(pieces):
        piece = pieces.get(package)
        if piece is not None and piece.distribution:  # found through its file list: a dist-info naming its piece
            try:
                importlib.metadata.distribution(package)
            except importlib.metadata.PackageNotFoundError:
                info = stand_ins / f"{package.replace('-', '_')}-0.0.0.dist-info"
                info.mkdir(parents=True, exist_ok=True)
                (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.0\n")
                (info / "RECORD").write_text(f"input/{piece.file},,\n")
                (stand_ins / "input").mkdir(exist_ok=True)
                (stand_ins / "input" / piece.file).write_bytes(b"")
        elif importlib.util.find_spec(package) is None:
            (stand_ins / package).mkdir(parents=True, exist_ok=True)
            (stand_ins / package / "__init__.py").write_text("")
    path = os.pathsep.join(p for p in (str(stand_ins), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@needs_snakemake
@pytest.mark.parametrize("preset", ["smoke", "tiny", "small", "paper", "pretrained", "quick", "gpu"])
def test_dry_run_resolves_every_preset(preset, tmp_path):
    import re

    from heads.sheet import build, preset_settings

    run = snakemake("-n", "--forceall", "--config", f"preset={preset}", env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out, re.M)}
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", preset))
    # one job per entry of the run sheet, and every replication's tables, figures and ledger page
    assert counts["train"] == len(sheet.labels("train")) + len(sheet.labels("prune")), counts
    assert counts["analyse"] == len(sheet.runs) - counts["train"], counts
    tasks = {e.task for e in sheet.runs.values()}  # pretrained: the one replication of its preset, on lm only
    assert counts["replication_claims"] == len(sheet.of) and counts["claims"] == 1, counts
    assert counts["prepare_data"] == len(tasks), counts
    # one layout: every preset, the default tiny included, writes under results/<preset>/ (data markers apart),
    # never beside another preset's folders at results/ itself
    outputs = [p for m in re.finditer(r"^\s+output: (.+)$", out, re.M) for p in m.group(1).split(", ")]
    assert outputs and all(p.startswith((f"results/{preset}/", "resources/data/")) for p in outputs), [
        p for p in outputs if not p.startswith((f"results/{preset}/", "resources/data/"))][:5]


def test_every_committed_result_lies_in_its_presets_folder():
    """One layout: results/<preset>/ for every preset, tiny's too (it wrote at results/ itself, its ledger
    beside the other presets' folders), and results/bench/ for the benchmarks; nothing at results/ itself."""
    from heads import names

    files = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    folders = {f.split("/")[1] for f in files if f.count("/") >= 2}
    assert files and not (loose := [f for f in files if f.count("/") < 2]), loose
    assert folders <= {*names.builtin("preset"), "bench"}, folders
    assert "tiny" in folders


@needs_snakemake
@pytest.mark.parametrize("replication", ["michel2019", "training_time"])
def test_a_replication_is_a_target_of_its_own_name(replication):
    """``snakemake michel2019`` plans that replication's run-sheet entries and renders, and none of another's."""
    from heads.sheet import build, preset_settings

    run = snakemake("-n", "--forceall", replication, "--config", "preset=smoke")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out, re.M)}
    sheet = build(ROOT / "replications", preset_settings(ROOT / "replications", "smoke"))
    mine = sheet.of[replication]
    assert counts["train"] + counts.get("analyse", 0) == len(mine), counts
    assert counts["replication_claims"] == 1 and "claims" not in counts, counts
    others = [r for r in sheet.of if r != replication]
    assert not any(f"results/smoke/{r}/" in out for r in others), others


@needs_snakemake
def test_a_fresh_clone_runs_the_whole_dag_despite_the_committed_results(tmp_path):
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path, results=True)
    # the committed tables came along, no run tree of the default run (the quick preset) did; its models'
    # packages stand in
    default = yaml.safe_load((repo / "workflow" / "config" / "default.yaml").read_text())["preset"]
    assert default == "quick" and (repo / "results" / default / "CLAIMS.md").exists()
    assert not (repo / "results" / default / "runs").exists()
    run = snakemake("-n", cwd=repo, env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "Nothing to be done" not in out
    for rule in ("prepare_data", "train", "claims", "figure", "prune_uniform"):
        assert f"\n{rule} " in out, rule


@needs_snakemake
def test_a_claim_off_the_vocabulary_fails_the_dry_run_in_one_line(tmp_path):
    """A selector key misspelt in a claims.yaml used to surface only when the ledger rendered, after every run
    it reads had trained; the DAG now reads every claim when it is built."""
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path)
    path = repo / "replications" / "voita2019" / "claims.yaml"
    text = path.read_text()
    assert "measure: kept_minus_pruned" in text
    path.write_text(text.replace("measure: kept_minus_pruned", "measrue: kept_minus_pruned", 1))
    run = snakemake("-n", "--config", "preset=smoke", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    (line,) = [x for x in out.splitlines() if "claims.yaml" in x and "measrue" in x]
    assert "voita2019/claims.yaml" in line and "unknown for from: roles" in line, out[-2000:]


# -- the machine a run is given: threads, GPUs, memory, and where each job runs -------------------------------
MODEL_RULES = ("train", "analyse")  # the rules that run a model (surgery only cuts and counts, never runs one)
LOCAL_RULES = {"prepare_data", "table", "figure", "replication_claims", "claims", "surgery_table"}


def overrides_of(shell: str, cwd: Path = ROOT) -> dict:
    """The config a planned command is handed in its ``--overrides-file`` (relative to the workflow's ``cwd``);
    {} for a command that has none."""
    import shlex

    argv = shlex.split(shell.split(" > ")[0])
    if "--overrides-file" not in argv:
        return {}
    return json.loads((cwd / argv[argv.index("--overrides-file") + 1]).read_text())


def planned(run: subprocess.CompletedProcess) -> list[dict]:
    """The jobs of a dry run with -p: rule, resources (name -> value as printed) and shell command each."""
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    jobs: list[dict] = []
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append({"rule": m.group(1), "resources": {}, "shell": ""})
        elif jobs and (m := re.match(r"^\s+resources: (.*)$", line)):
            jobs[-1]["resources"] = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
        elif jobs and line.startswith("Shell command: "):
            jobs[-1]["shell"] = line.split("Shell command: ", 1)[1]
    assert jobs, out[-3000:]
    return jobs


def threads_of(shell: str) -> int:
    """The torch threads a command line sets (speed's --threads, else train.threads)."""
    m = re.search(r"--threads (\d+)", shell) or re.search(r"train\.threads=(\d+)", shell)
    assert m, shell
    return int(m.group(1))


@needs_snakemake
def test_cpu_presets_ask_for_no_gpu_and_run_on_one_thread_a_job():
    jobs = planned(snakemake("-n", "-p", "--forceall", "--cores", "2", "--config", "preset=tiny"))
    for job in jobs:
        assert job["resources"].get("gpu", "0") == "0" and "gpu_slot" not in job["shell"], job
        if job["rule"] in MODEL_RULES:
            assert job["shell"].startswith("heads ") and threads_of(job["shell"]) == 1, job
            assert job["resources"]["mem_mb"] == "4000", job


@needs_snakemake
@pytest.mark.parametrize(
    "extra,ranks",
    [([], 1),  # the paper preset: a GPU a job
     (["--set-resources", "train:gpu=2", "--resources", "gpu=4"], 2),  # a training run on two GPUs (torchrun)
     (["--set-resources", "train:gpu=2", "--resources", "gpu=1"], 1)],  # never more than --resources grants
)
def test_the_gpu_profile_gives_each_model_job_its_gpus_and_its_threads_reach_torch(extra, ranks):
    jobs = planned(snakemake("-n", "-p", "--forceall", "--profile", "workflow/profiles/gpu", "--cores", "16",
                             *extra, "--config", "preset=paper"))
    models = [j for j in jobs if j["rule"] in MODEL_RULES]
    assert models
    for job in models:
        train = "heads train " in job["shell"]  # the rule also runs post-hoc pruning, in one process
        gpus = ranks if train else 1
        assert job["resources"]["gpu"] == str(ranks if job["rule"] == "train" else 1), job
        assert job["shell"].startswith(f"python workflow/scripts/gpu_slot.py {gpus} -- "), job["shell"]
        ddp = f"torchrun --standalone --nproc_per_node {ranks} -m heads train "
        launcher = ddp if train and ranks > 1 else "heads "
        assert f" -- {launcher}" in job["shell"], job["shell"]
        assert threads_of(job["shell"]) == 4 // (ranks if train else 1), job["shell"]  # the profile's set-threads
        assert job["resources"]["mem_mb"] == "32000" and "gres" not in job["resources"], job
    for job in jobs:
        if job["rule"] not in MODEL_RULES:
            assert job["resources"].get("gpu", "0") == "0" and "gpu_slot" not in job["shell"], job


@needs_snakemake
def test_the_slurm_profile_asks_for_gpus_one_way_and_submits_without_a_cluster_in_a_dry_run(tmp_path):
    import yaml

    # SLURM's commands, each failing and leaving a mark: a dry run must need none (the plugin reads
    # `scontrol show config` when it loads and goes on without it), and submit nothing.
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("sbatch", "squeue", "sacct", "sacctmgr", "sinfo", "scontrol", "srun", "scancel"):
        (fake / name).write_text(f"#!/bin/sh\ntouch {tmp_path}/called-{name}\nexit 1\n")
        (fake / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([SNAKEMAKE, "-n", "-p", "--forceall", "--profile", "workflow/profiles/slurm", "--cores", "64",
                          "--config", "preset=paper"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    jobs = planned(run)
    assert not {p.name for p in tmp_path.glob("called-*")} - {"called-scontrol"}
    for job in jobs:
        assert "gres" not in job["resources"], job  # the plugin refuses gpu beside gres; gpu is the one way
        if job["rule"] in MODEL_RULES:
            assert job["resources"]["gpu"] == "1" and job["resources"]["mem_mb"] == "32000", job
            assert job["resources"]["slurm_partition"] == "CHANGE_ME_gpu_partition", job
            # the plugin asks SLURM for the rule's threads (--cpus-per-task): the threads torch uses
            assert threads_of(job["shell"]) == {"train": 8, "analyse": 4}[job["rule"]], job["shell"]
        else:
            assert job["resources"].get("gpu", "0") == "0", job
    profile = yaml.safe_load((ROOT / "workflow/profiles/slurm/config.yaml").read_text())
    assert "gres" not in str(profile) and "gpu" not in str(profile.get("default-resources"))
    assert "cpus_per_task" not in str(profile)  # one source of threads: the rules'


def declared_local_rules() -> set[str]:
    """The rules the Snakefile and its rule files declare local (a profile cannot: it is the workflow's to say)."""
    names: set[str] = set()
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        for block in re.findall(r"^localrules:\s*\n((?:[ \t]+\w+,?\s*\n)+)", path.read_text(), re.M):
            names |= set(re.findall(r"\w+", block))
    return names


def rules_in(name: str) -> set[str]:
    return set(re.findall(r"^rule (\w+):", (ROOT / "workflow" / "rules" / name).read_text(), re.M))


def test_data_preparation_and_rendering_run_where_snakemake_runs():
    import yaml

    local = declared_local_rules()
    assert local == LOCAL_RULES
    assert rules_in("data.smk") | rules_in("report.smk") <= local
    assert not local & set(MODEL_RULES)
    for profile in ("gpu", "slurm"):
        settings = yaml.safe_load((ROOT / "workflow" / "profiles" / profile / "config.yaml").read_text())
        assert "localrules" not in settings


@needs_snakemake
@pytest.mark.parametrize("preset", ["smoke", "tiny", "small", "paper", "pretrained", "quick", "gpu"])
def test_lint_is_clean(preset, tmp_path):
    run = snakemake("--lint", "--config", f"preset={preset}", env=with_shipped_packages(tmp_path))
    assert run.returncode == 0 and "Congratulations" in run.stdout + run.stderr, run.stdout + run.stderr


@needs_snakemake
@pytest.mark.parametrize(
    "config,named",
    [
        (["preset=huge"], ["huge", "preset"]),
        (["threads=0"], ["threads", "minimum"]),
        (["dag={'tiny': {'seeds': []}}"], ["seeds"]),
    ],
)
def test_bad_config_fails_before_any_job(config, named):
    run = snakemake("-n", "--config", *config)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert all(word in out for word in named), out[-2000:]
    assert "Building DAG" not in out


def test_every_replication_is_one_folder_the_workflow_and_the_report_discover():
    from heads.report.render import artefacts, replications
    from heads.sheet import replications as with_runs

    names = replications(ROOT / "replications")
    assert names == with_runs(ROOT / "replications") == ["decoding", "michel2019", "overprovisioning", "pretrained",
                                                           "scaling", "training_time", "voita2019"]
    for name in names:
        assert (ROOT / "replications" / name / "claims.yaml").is_file(), name
        kinds = artefacts(name, ROOT / "replications")  # every listed renderer exists
        assert kinds["tables"] and kinds["figures"], name


def test_cli_help_lists_commands():
    run = subprocess.run([sys.executable, "-m", "heads", "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    for command in ("inspect", "prune", "train", "evaluate", "score", "ablate", "curve", "report", "claims", "list"):
        assert command in run.stdout


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    run = subprocess.run([ruff, "check", "heads", "tests", "benchmarks", "workflow/scripts"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


@needs_snakemake
@pytest.mark.parametrize(
    "entry,named",
    [
        ("{label: mine, task: lm, strategy: magic}", "unknown strategy 'magic'"),
        ("{label: mine, task: lm, strategy: oneshot, params: {scorer: magic}}", "scorer: 'magic' is not one of"),
        ("{label: mine, task: lm, strategy: oneshot, params: {ratio: lots}}", "ratio: expected float"),
        # a ratio reaches the strategy as its ratio parameter: a strategy without one says so
        ("{label: mine, task: lm, strategy: curriculum, ratio: 0.5}", "has no parameters ['ratio']"),
    ],
)
def test_a_bad_custom_strategy_fails_before_any_job(tmp_path, entry, named):
    extra = tmp_path / "custom.yaml"
    extra.write_text(f"dag:\n  smoke:\n    custom:\n      - {entry}\n")
    run = snakemake("-n", "--config", "preset=smoke", "--configfile", str(extra))
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "custom, entry 'mine'" in out and named in out, out[-2000:]
    assert "Building DAG" not in out


@needs_snakemake
def test_a_custom_label_may_not_replace_a_built_in_run(tmp_path):
    extra = tmp_path / "custom.yaml"
    extra.write_text("dag:\n  smoke:\n    custom:\n      - {label: oneshot, task: lm, strategy: oneshot, ratio: 0.5}\n")
    run = snakemake("-n", "--config", "preset=smoke", "--configfile", str(extra))
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "built-in run" in out and "choose another" in out, out[-2000:]


@needs_snakemake
def test_a_new_replication_is_one_folder(tmp_path):
    """docs/ADDING_A_REPLICATION.md's worked example: its folder copied in, and nothing else, plans its runs,
    its tables, figures and ledger page."""
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path)
    shutil.copytree(ROOT / "docs" / "examples" / "scorers", repo / "replications" / "scorers")
    run = snakemake("-n", "--config", "preset=smoke", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    for path in ("runs/lm/posthoc/magnitude/0.5/seed1/summary.json", "runs/lm/posthoc/random/0.5/seed0/summary.json",
                 "scorers/pruned_vs_scratch.csv", "scorers/pruned_vs_scratch.png", "scorers/claims.md"):
        assert f"results/smoke/{path}" in out, path


@needs_snakemake
def test_a_table_spec_off_the_vocabulary_fails_before_any_job(tmp_path):
    """A replication's report.yaml is checked when the DAG is built, not when its runs have trained."""
    from smoke_dag import copy_repo

    repo = copy_repo(tmp_path)
    path = repo / "replications" / "training_time" / "report.yaml"
    text = path.read_text()
    wrong = text.replace("columns: [task, arm, model, n_seeds = count, heads = mean heads, step_ms = mean step_ms,",
                         "columns: [task, arm, model, n_seeds = total, heads = mean heads, step_ms = mean step_ms,")
    assert wrong != text
    path.write_text(wrong)
    run = snakemake("-n", "--config", "preset=smoke", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "'total' is not one of" in out and "table clock" in out, out[-2000:]
    assert "Building DAG" not in out


@needs_snakemake
def test_paths_with_spaces_reach_every_command_whole(tmp_path):
    import shlex

    from smoke_dag import copy_repo

    # in a copy: even a dry run records each job's settings under its output and data folders
    repo = copy_repo(tmp_path)
    run = snakemake("-n", "-p", "--config", "preset=smoke", "data_root=my data", "out=my out", cwd=repo)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    commands = [shlex.split(line.split("Shell command: ", 1)[1].split(" > ")[0])
                for line in out.splitlines() if line.startswith("Shell command: heads")]
    assert commands
    for argv in commands:
        for flag in ("--root", "--runs", "--out"):
            if flag in argv:
                assert argv[argv.index(flag) + 1].startswith(("my data", "my out")), argv
        assert all(not a.startswith(("data/", "out/")) for a in argv), argv  # no path split at its space
    trains = [line for line in out.splitlines() if line.startswith("Shell command: heads train")]
    assert trains and all(overrides_of(line.split("Shell command: ", 1)[1], repo)["data"]["root"] == "my data"
                          for line in trains), trains[0]


@needs_snakemake
def test_your_own_model_and_data_reach_every_run_of_the_task_and_its_data_preparation(tmp_path):
    """One config file names a task's model and dataset (dag.<preset>.tasks): the data preparation and every
    training run of that task carry them; a bad key stops the workflow before any job."""
    mine = tmp_path / "mine.yaml"
    for folder in ("models/my-bert", "data/mrpc"):  # the plan checks they exist (a job would fail on them)
        (tmp_path / folder).mkdir(parents=True)
    mine.write_text(
        "dag:\n  smoke:\n    tasks:\n      cls:\n"
        f"        model: {{source: {tmp_path}/models/my-bert}}\n"
        f"        data: {{source: hub, dataset: {tmp_path}/data/mrpc,\n"
        "                columns: {text_a: sentence1, text_b: sentence2}}\n"
    )
    jobs = planned(snakemake("-n", "-p", "--forceall", "--cores", "2", "--config", "preset=smoke",
                             "--configfile", str(mine)))
    prepare = [j for j in jobs if j["rule"] == "prepare_data" and "--task cls" in j["shell"]]
    handed = overrides_of(prepare[0]["shell"]) if prepare else {}
    assert handed["model"]["source"] == f"{tmp_path}/models/my-bert"
    assert handed["data"]["columns"] == {"text_a": "sentence1", "text_b": "sentence2"}
    trains = [j["shell"] for j in jobs if j["rule"] == "train"]
    cls_train = [overrides_of(shell) for shell in trains if "heads train --task cls" in shell]
    other = [overrides_of(shell) for shell in trains if "heads train --task cls" not in shell]
    assert cls_train and all(o["model"]["source"] == f"{tmp_path}/models/my-bert" for o in cls_train)
    assert all(o["data"]["dataset"] == f"{tmp_path}/data/mrpc" for o in cls_train)
    assert other and not any("my-bert" in json.dumps(o) for o in other)

    mine.write_text("dag:\n  smoke:\n    tasks:\n      cls:\n        data: {colums: {text_a: s}}\n")
    run = snakemake("-n", "--config", "preset=smoke", "--configfile", str(mine))
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "dag.smoke.tasks.cls" in out and "colums" in out, out[-2000:]


@needs_snakemake
def test_custom_strategies_at_a_preset_without_training_time_are_refused(tmp_path):
    """Custom entries are training-time runs; at the pretrained preset (training_time null) they would train 0
    steps on an unsharded test set, so the dry run stops naming the reason."""
    extra = tmp_path / "custom.yaml"
    extra.write_text("dag:\n  pretrained:\n    custom:\n"
                     "      - {label: mine, task: lm, strategy: oneshot, ratio: 0.5}\n")
    run = snakemake("-n", "--config", "preset=pretrained", "--configfile", str(extra))
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "training_time replication, which does not run at preset 'pretrained'" in out
