# The run sheet and the paths the rules share. Every run is declared as data by its replication
# (replications/<name>/runs.py) and looked up here by label: no parameter is parsed out of a path.
import glob
import json
import os
import re
import shlex
import sys

from heads.report.render import artefacts as report_artefacts, caption as report_caption
from heads.report.spec import ClaimSpecError, load_all as load_claims
from heads.sheet import (
    SheetError,
    build as build_sheet,
    check_config_names,
    command_line,
    custom as custom_runs,
    preset_settings,
    replications as replication_folders,
)

# Snakemake reads its configfiles by YAML 1.1 and keeps the last of a key given twice (`dag:` twice dropped the
# first); each is read again by the project's reader, which refuses that, alias bombs, and any value the two
# readings take differently (`010`: eight there, ten here), in one line naming the file and key.
from heads.yamlio import YamlError, check_configfile
from snakemake.common.configfile import load_configfile

for _file in workflow.configfiles:
    try:
        check_configfile(_file, load_configfile(_file))
    except YamlError as e:
        raise ValueError(f"configfile {e}") from None
# Names (the preset, the presets config keys by, tasks) are checked against the registries, not the schema's
# lists: the schema marks where one goes (registry: preset), heads.names knows which exist.
try:
    check_config_names(config, "workflow/schemas/config.schema.yaml")
except SheetError as e:
    raise ValueError(str(e)) from None
PRESET = config["preset"]
# The preset's seeds and each replication's own settings, under the workflow config's overrides; every
# replication's settings checked against its folder's schema before any job runs.
try:
    D = preset_settings("replications", PRESET, (config.get("dag") or {}).get(PRESET))
except SheetError as e:
    raise ValueError(f"config dag.{PRESET}: {e}") from None
for _name in (n for n in replication_folders("replications") if n in D):  # null settings: not at this preset
    validate(D[_name], f"../../replications/{_name}/settings.schema.yaml")
# The battery on a model of your own (`--config preset=pretrained model=NAME`: a shipped name, a local folder or a
# hub id): only the battery runs, on that model, and everything it writes (outputs, runs, logs, data markers) is
# kept under the model's own name, apart from the preset's committed results.
MODEL = config.get("model") or ""
SLUG = ""
if MODEL:
    from heads.battery import for_model

    try:
        D, SLUG = for_model(D, MODEL)
    except SheetError as e:
        raise ValueError(f"config {e}") from None
# what logs, data markers and data settings are kept under: the preset's, or the preset's for one model
STAGE = f"{PRESET}-{SLUG}" if MODEL else PRESET
OUT = config["out"] or (f"results/{PRESET}/{SLUG}" if MODEL else f"results/{PRESET}")
RUNS = f"{OUT}/runs"
DATA = config["data_root"]
CUSTOM = D.get("custom", [])
# Your own strategies (dag.<preset>.custom), each as runs of the replication it joins (training_time unless it
# names one; that replication's runs.py says how, heads.sheet.custom): an unknown strategy or replication, or an
# entry its replication cannot take, stops here in one line naming the entry.
try:
    CUSTOM_RUNS = custom_runs("replications", D, CUSTOM)
except SheetError as e:
    raise ValueError(f"config dag.{PRESET}.{e}") from None

# Built and checked before any job runs: labels unique, shared runs declared alike, every run it starts from
# on the sheet.
try:
    if CUSTOM:  # a custom entry may not take the place of a built-in arm (of the same variant)
        _arms = {(e.variant, e.arm): e.label for e in build_sheet("replications", D).runs.values()}
        _clash = next((e for runs in CUSTOM_RUNS.values() for e in runs if (e.variant, e.arm) in _arms), None)
        if _clash is not None:
            raise ValueError(f"config dag.{PRESET}.custom, entry {_clash.arm!r}: the label is a built-in run's "
                             f"({_arms[(_clash.variant, _clash.arm)]}); choose another")
    SHEET = build_sheet("replications", D, extra=CUSTOM_RUNS)
except SheetError as e:
    raise ValueError(f"run sheet of preset {PRESET!r}: {e}") from None
REPLICATIONS = sorted(SHEET.of)
# What each renders, its table specs checked now: a report.yaml off the vocabulary fails here, not after the
# runs it would render have trained.
try:
    ARTEFACTS = {rep: report_artefacts(rep, "replications") for rep in REPLICATIONS}
except (KeyError, ValueError) as e:
    raise ValueError(f"report.yaml: {e.args[0] if isinstance(e, KeyError) else e}") from None
# Every claim too (its keys, selectors, measures and preconditions): a typo in a claims.yaml fails here in one
# line, not the ledger after every run it reads has trained.
try:
    load_claims("replications")  # those not run at this preset too: the whole ledger reads them all
except ClaimSpecError as e:
    raise ValueError(f"claims.yaml: {e}") from None

# A custom entry is checked (strategy name, parameters, types) before any job runs, not when its first run
# starts, as its command will build it: a training run's whole config, a curve's iterative strategy.
if CUSTOM:
    from heads.config import ConfigError
    from heads.resolve import resolve
    from heads.strategies import build_strategy

    mine = [e for runs in CUSTOM_RUNS.values() for e in runs]
    for c in CUSTOM:
        where = f"config dag.{PRESET}.custom, entry {c['label']!r}"
        for entry in [e for e in mine if e.arm == c["label"]][:1]:  # its runs differ by seed and task only
            try:
                if entry.command == "train":
                    resolve(
                        entry.task,
                        PRESET,
                        None,
                        [f"strategy.name={entry.strategy}"]
                        + [f"strategy.params.{k}={json.dumps(v)}" for k, v in entry.params.items()],
                    )
                else:
                    build_strategy("iterative" if entry.command == "curve" else entry.strategy, entry.params)
            except (ConfigError, KeyError) as e:
                raise ValueError(f"{where}: {e}") from None


# Your own models and data (dag.<preset>.tasks): each task's config resolved once here, so a bad key or value
# stops the workflow before any job; the same overrides reach the task's data preparation.
TASK_CONFIG = D.get("tasks") or {}
for _task, _sections in TASK_CONFIG.items():
    from heads.config import ConfigError
    from heads.resolve import resolve

    try:
        resolve(_task, PRESET, overlay=_sections)
    except (ConfigError, KeyError) as e:
        raise ValueError(f"config dag.{PRESET}.tasks.{_task}: {e.args[0] if isinstance(e, KeyError) else e}") from None


# What decides each job's output, as one small file per job that the job takes as an input (heads.freshness):
# rewritten only when its content changes, so a changed setting reruns exactly the jobs it affects and what reads
# them. Drawn here, before any job: an entry whose settings changed is checked as its command will check it
# (config, strategy parameters, sources), and a run folder holding a run of other settings is refused in one line.
from heads.freshness import check_surgery, settle, write_overrides, write_settings

SETTINGS = f"{OUT}/.settings"
try:
    SETTINGS_OF = settle(SHEET, PRESET, RUNS, DATA, SETTINGS)
    check_surgery(config["surgery"]["sources"], config["surgery"]["keep"])
except SheetError as e:
    raise ValueError(f"run sheet of preset {PRESET!r}: {e}") from None
# The config each entry lays over its base, as the JSON file its command reads (--overrides-file). Not a job's
# input: its settings file (above) holds what decides it, and a tree made before these files needs no rerun.
OVERRIDES_OF = write_overrides(SHEET, RUNS, DATA, SETTINGS)


def render_settings(rep):
    """What decides a replication's renders beyond its runs' files: which runs and tasks they read."""
    path = f"{SETTINGS}/render/{rep}.json"
    write_settings(path, {"labels": SHEET.of[rep], "tasks": sorted({SHEET[l].task for l in SHEET.of[rep]})})
    return path


RENDER_SETTINGS = {rep: render_settings(rep) for rep in REPLICATIONS}
# where a task's data settings live: beside the data (shared by every output folder at this preset)
DATA_SETTINGS = {t: f"{DATA}/.settings/{t}-{STAGE}.json" for t in sorted({e.task for e in SHEET.runs.values()})}
for _task, _path in DATA_SETTINGS.items():
    # new here: the data of the runs recorded (their config.json holds data.*, compared above) is of these settings
    write_settings(_path, {"task": _task, "preset": PRESET, "config": TASK_CONFIG.get(_task) or {}}, backdate=True)
SURGERY_SETTINGS = f"{SETTINGS}/surgery.json"
write_settings(SURGERY_SETTINGS, {"seq_len": config["surgery"]["seq_len"]})


# the user's config of a task (dag.<preset>.tasks), as the file data prepare lays over the preset (its content is
# in the task's data settings, the job's input)
DATA_OVERRIDES = {t: f"{DATA}/.settings/{t}-{STAGE}.overrides.json" for t in DATA_SETTINGS if TASK_CONFIG.get(t)}
for _task, _path in DATA_OVERRIDES.items():
    write_settings(_path, TASK_CONFIG[_task], backdate=True)


def data_overrides(w):
    """data prepare's --overrides-file option, where the task has a config of the user's."""
    path = DATA_OVERRIDES.get(w.task)
    return f"--overrides-file {shlex.quote(path)}" if path else ""


def labels_of(*commands):
    """A wildcard constraint matching exactly the sheet's labels of these commands."""
    names = [l for c in commands for l in SHEET.labels(c)]
    return "|".join(re.escape(l) for l in names) or "(?!)"


wildcard_constraints:
    source=r"[A-Za-z0-9_.-]+",
    keep=r"\d+",
    replication="|".join(REPLICATIONS),
    table="[a-z_0-9]+",
    figure="[a-z_0-9]+",


def done(label):
    """The file that marks a sheet entry finished."""
    return f"{RUNS}/{SHEET[label].done_file()}"


def entry_inputs(w):
    """What an entry needs: its settings, its task's prepared data and the runs it starts from."""
    e = SHEET[w.label]
    return [SETTINGS_OF[w.label], f"{DATA}/.ready-{e.task}-{STAGE}"] + [done(a) for a in e.after]


# What a job that runs a model asks for at this preset (config job_resources): GPUs and memory. Its threads are
# the rule's (config threads, or --set-threads), and the command is built from the job's granted threads and GPUs,
# so what the scheduler reserved is what torch uses.
JOB = {"gpus": 0, "mem_mb": 4000, **(config["job_resources"].get(PRESET) or {})}  # the schema's defaults
if MODEL:  # the preset's allowance is sized for its own model: a larger one asks for what its training needs
    from heads.config import ConfigError
    from heads.plan import PlanError, job_memory_mb
    from heads.resolve import resolve

    from heads.battery import BATTERY, check_task

    _task = D[BATTERY]["task"]  # what heads.battery.for_model read the model as (lm, retrieval)
    _cfg = resolve(_task, PRESET, overlay=TASK_CONFIG[_task])
    try:
        check_task(_cfg)  # a model its task's families do not include stops the plan here
    except SheetError as e:
        raise ValueError(f"config {e}") from None
    except (OSError, ValueError) as e:  # e.g. a hub id offline: its first job says what is wrong
        print(f"heads: model {MODEL!r}: not checked ({e})", file=sys.stderr)
    try:
        JOB["mem_mb"] = max(JOB["mem_mb"], job_memory_mb(_cfg))
    except (ConfigError, PlanError, OSError, ValueError) as e:  # e.g. a hub id offline: the allowance stands
        print(f"heads: model {MODEL!r}: not sized ({e}); jobs ask for job_resources.{PRESET}.mem_mb", file=sys.stderr)
GPU_SLOT = os.path.relpath(os.path.join(workflow.basedir, "workflow", "scripts", "gpu_slot.py"))


def entry_gpus(w):
    """GPUs an entry's job asks for: a training run may spread over several; pruning and analyses run in one
    process, on one GPU at most."""
    return JOB["gpus"] if SHEET[w.label].command == "train" else min(JOB["gpus"], 1)


def entry_command(w, threads, resources):
    """The entry's command on the job's threads and GPUs; a GPU job runs under gpu_slot.py, which gives it GPUs
    no other job holds (Snakemake's --resources gpu=K only bounds how many run at once)."""
    e = SHEET[w.label]
    gpus = int(resources.get("gpu", 0))
    gpus = gpus if e.command == "train" else min(gpus, 1)  # --set-resources train:gpu=N reaches pruning too
    line = command_line(e, RUNS, PRESET, DATA, threads, gpus, OVERRIDES_OF.get(w.label))
    return f"python {shlex.quote(GPU_SLOT)} {gpus} -- {line}" if gpus else line


def all_runs():
    return sorted(done(label) for label in SHEET.runs)


def surgery_tables():
    s = config["surgery"]
    return expand(
        f"{OUT}/surgery/{{source}}_keep{{keep}}.md", source=s["sources"], keep=s["keep"]
    )


def surgery_runs():
    s = config["surgery"]
    return expand(
        f"{RUNS}/surgery/{{source}}_keep{{keep}}", source=s["sources"], keep=s["keep"]
    )


def artefacts(replication):
    """What a replication renders, as its folder declares (replications/<name>/report.yaml)."""
    return ARTEFACTS[replication]


def replication_outputs(rep):
    """What one replication renders: its tables, figures and its ledger (claims page, baselines)."""
    kinds = artefacts(rep)
    out = [f"{OUT}/{rep}/{t}.{ext}" for t in kinds["tables"] for ext in ("csv", "md")]
    out += [f"{OUT}/{rep}/{f}.png" for f in kinds["figures"]]
    if os.path.isfile(f"replications/{rep}/claims.yaml"):
        ledger = ("claims.md", "claims.csv", "claims.json", "baselines.csv", "baselines.md", "environments.json")
        out += [f"{OUT}/{rep}/{f}" for f in ledger]
    return out


# The models whose heads a replication masks at this preset (its task's model, as the preset or dag.<preset>.tasks
# names it), each with the folder its masking table renders to: the cross-model table's rows (report.smk).
def _model_source(task):
    from heads.resolve import resolve

    return resolve(task, PRESET, overlay=TASK_CONFIG.get(task) or {}).model.source


_MASKED = sorted({(SHEET[label].replication, SHEET[label].task) for label in SHEET.labels("mask")})
MODELS = [(_model_source(task), f"{OUT}/{rep}") for rep, task in _MASKED]
# what else the table reads beside each masking table: the replication's redundancy table, where it renders one
MODEL_TABLES = [f"{OUT}/{rep}/redundancy.csv" for rep, _ in _MASKED if "redundancy" in artefacts(rep)["tables"]]
# Every other model's battery rendered under this preset's folder (`--config model=NAME` writes
# results/<preset>/<model>/models.csv: its own row, its layout read when it ran) joins the preset's table as it is,
# so the table spans every model run without loading (or installing) any of them again.
MODEL_ROWS = sorted(glob.glob(f"{glob.escape(OUT)}/*/models.csv")) if MODELS and not MODEL else []


def report_outputs():
    out = [f"{OUT}/CLAIMS.md", f"{OUT}/claims.csv", f"{OUT}/claims.json"]
    for rep in REPLICATIONS:
        out += replication_outputs(rep)
    if MODELS:  # the cross-model table (report.smk), where a replication masks heads at this preset
        out += [f"{OUT}/models.{ext}" for ext in ("csv", "md", "png")]
    return out


def replication_inputs(w):
    """What a replication's renders read: its runs, which of them (its render settings) and its report.yaml."""
    spec = [f"replications/{w.replication}/report.yaml"] if os.path.isfile(f"replications/{w.replication}/report.yaml") else []
    return [done(label) for label in SHEET.of[w.replication]] + [RENDER_SETTINGS[w.replication]] + spec


def replication_labels(w):
    """The replication's own run-sheet entries: its tables and ledger read only these, so what it renders never
    depends on which of another replication's runs (sharing its task) had finished."""
    return ",".join(SHEET.of[w.replication])


def replication_tasks(w):
    """The tasks of a replication's runs (from the sheet): its tables read only these, so another
    replication's runs (finished or not at render time) never leak into them."""
    return ",".join(sorted({SHEET[label].task for label in SHEET.of[w.replication]}))


def figure_caption(w):
    """A figure's caption as its replication's report.yaml gives it, on the replication's one task if it has one
    (the battery on an encoder reads its retrieval task's words)."""
    tasks = replication_tasks(w).split(",")
    return report_caption(w.replication, w.figure, "replications", tasks[0] if len(tasks) == 1 else None)
