# Helpers for the rules: paths, wildcard constraints and the per-run overrides. Imports nothing heavy.

PRESET = config["preset"]
D = config["dag"][PRESET]
OUT = config["out"] or ("results" if PRESET == "tiny" else f"results/{PRESET}")
RUNS = f"{OUT}/runs"
DATA = config["data_root"]
SEEDS = D["seeds"]
OP, MI, VO, TT = (
    D["overprovisioning"],
    D["michel2019"],
    D["voita2019"],
    D["training_time"],
)
REPLICATIONS = ["michel2019", "voita2019", "overprovisioning", "training_time"]
# Your own strategies, run beside the built-in ones: {label, task, strategy, ratio, params}.
CUSTOM = {c["label"]: c for c in D.get("custom", [])}


def custom_overrides(c):
    params = [f"strategy.params.{k}={v}" for k, v in c.get("params", {}).items()]
    return [f"strategy.name={c['strategy']}", *params]


# Custom entries are checked (name, parameters, types) before any job runs, not when their first run starts.
if CUSTOM:
    from heads.config import ConfigError, resolve

    for label, c in CUSTOM.items():
        try:
            resolve(c["task"], PRESET, None, custom_overrides(c))
        except (ConfigError, KeyError) as e:
            raise ValueError(
                f"config dag.{PRESET}.custom, entry {label!r}: {e}"
            ) from None


wildcard_constraints:
    task="lm|mt|cls",
    seed=r"\d+",
    ratio=r"\d+\.\d+",
    source=r"[A-Za-z0-9_.-]+",
    keep=r"\d+",
    scorer="[a-z_]+",
    step=r"\d+",
    lam=r"lam[0-9.e-]+",
    replication="michel2019|voita2019|overprovisioning|training_time",
    table="[a-z_0-9]+",
    figure="[a-z_0-9]+",


def fmt(ratio):
    """Ratios in paths: at least one decimal (0.0, 0.5, 0.25)."""
    return f"{float(ratio):.{max(1, len(str(float(ratio)).split('.')[1]))}f}"


def run_dir(task, variant, strategy, ratio, seed):
    return f"{RUNS}/{task}/{variant}/{strategy}/{fmt(ratio)}/seed{seed}"


def run_file(task, variant, strategy, ratio, seed, name="summary.json"):
    """A file of a run folder (summary.json of a training run, eval.json of a post-hoc pruned model)."""
    return f"{run_dir(task, variant, strategy, ratio, seed)}/{name}"


def base_overrides(w):
    return [
        f"data.root={DATA}",
        f"train.seed={w.seed}",
        f"train.threads={config['threads']}",
        "train.progress=false",
    ]


def strategy_overrides(w):
    """The `heads train` overrides that make run {variant}/{strategy}/{ratio} what its name says."""
    r = float(w.ratio)
    if w.variant == "baseline":
        if w.task == MI["snapshot_task"] and MI["snapshots"]:
            return [
                "train.snapshots=[" + ",".join(str(s) for s in MI["snapshots"]) + "]"
            ]
        return []
    if w.variant == "scratch":
        if w.strategy == "uniform":
            return ["strategy.name=scratch", f"strategy.params.ratio={r}"]
        if w.strategy == "matched":
            src = run_file(
                w.task, "posthoc", OP["scorer"], r, w.seed, name="config.json"
            )
            return ["strategy.name=scratch", f"strategy.params.layout_from={src}"]
        if w.strategy.startswith("l0lam"):
            src = run_file(w.task, "l0", w.strategy[2:], 0, w.seed)
            return ["strategy.name=scratch", f"strategy.params.layout_from={src}"]
    if w.variant == "during":
        if w.strategy in CUSTOM:
            return custom_overrides(CUSTOM[w.strategy])
        if w.strategy == "oneshot":
            return [
                "strategy.name=oneshot",
                f"strategy.params.ratio={r}",
                f"strategy.params.proxy_steps={TT['oneshot_proxy_steps']}",
            ]
        if w.strategy == "curriculum":
            return ["strategy.name=curriculum", f"strategy.params.max_ratio={r}"]
        if w.strategy.startswith("dropout"):
            return [
                "strategy.name=dropout_regime",
                f"strategy.params.high={w.strategy[7:]}",
                "strategy.params.low=0.1",
                f"strategy.params.max_ratio={r}",
            ]
    if w.variant == "l0":
        lam = w.strategy[3:]
        return [
            f"model.source={run_file(w.task, 'baseline', 'none', 0, w.seed, name='model')}",
            "strategy.name=l0",
            f"strategy.params.lam={lam}",
            f"strategy.params.lr={VO['lr']}",
            f"train.steps={VO['steps']}",
            "train.warmup=0",
            "train.schedule=constant",
            "train.lr=0.0001",
        ]
    if w.variant == "posthoc_ft":
        src = run_dir(w.task, "posthoc", w.strategy, r, w.seed)
        return [
            f"model.source={src}",
            f"train.steps={OP['finetune_steps']}",
            "train.warmup=0",
            "train.schedule=constant",
            "train.lr=0.0002",
        ]
    raise ValueError(f"no such run: {w.variant}/{w.strategy}/{w.ratio}")


def train_inputs(w):
    needs = [f"{DATA}/.ready-{w.task}-{PRESET}"]
    r = float(w.ratio)
    if w.variant == "scratch" and w.strategy == "matched":
        needs.append(
            run_file(w.task, "posthoc", OP["scorer"], r, w.seed, name="eval.json")
        )
    elif w.variant == "scratch" and w.strategy.startswith("l0lam"):
        needs.append(run_file(w.task, "l0", w.strategy[2:], 0, w.seed))
    elif w.variant == "l0":
        needs.append(run_file(w.task, "baseline", "none", 0, w.seed))
    elif w.variant == "posthoc_ft":
        needs.append(
            run_file(w.task, "posthoc", w.strategy, r, w.seed, name="eval.json")
        )
    return needs


# -- the runs each replication needs --------------------------------------------------------------


def overprovisioning_runs():
    out = []
    for task, ratios in OP["ratios"].items():
        for seed in SEEDS:
            out.append(run_file(task, "baseline", "none", 0, seed))
            for r in ratios:
                out.append(
                    run_file(task, "posthoc", OP["scorer"], r, seed, name="eval.json")
                )
                out.append(run_file(task, "posthoc_ft", OP["scorer"], r, seed))
                out.append(run_file(task, "scratch", "uniform", r, seed))
            for r in OP["matched_ratios"]:
                out.append(run_file(task, "scratch", "matched", r, seed))
    return out


def michel_runs():
    out = []
    for seed in SEEDS:
        for task in MI["ablation_tasks"]:
            out.append(f"{RUNS}/{task}/analysis/ablation/seed{seed}.json")
        for task in MI["curve_tasks"]:
            for scorer in MI["curve_scorers"]:
                out.append(f"{RUNS}/{task}/analysis/curve/{scorer}/seed{seed}.json")
        for step in MI["snapshots"]:
            out.append(
                f"{RUNS}/{MI['snapshot_task']}/analysis/curve_at/step{step}/seed{seed}.json"
            )
    out.append(f"{RUNS}/cls/analysis/speed.json")
    return out


def voita_runs():
    out = []
    for seed in SEEDS:
        out.append(run_file(VO["task"], "baseline", "none", 0, seed))
        for lam in VO["lams"]:
            out.append(run_file(VO["task"], "l0", f"lam{lam}", 0, seed))
            out.append(run_file(VO["task"], "scratch", f"l0lam{lam}", 0, seed))
            out.append(f"{RUNS}/{VO['task']}/analysis/roles/lam{lam}/seed{seed}.json")
    return out


def training_time_runs():
    task = TT["task"]
    out = []
    for seed in SEEDS:
        out.append(run_file(task, "baseline", "none", 0, seed))
        out.append(run_file(task, "during", "oneshot", TT["oneshot_ratio"], seed))
        out.append(
            run_file(task, "during", "curriculum", TT["curriculum_max_ratio"], seed)
        )
        for p in TT["dropout_rates"]:
            out.append(
                run_file(task, "during", f"dropout{p}", TT["dropout_max_ratio"], seed)
            )
    return out


def custom_runs():
    return [
        run_file(c["task"], "during", label, c.get("ratio", 0.0), seed)
        for label, c in CUSTOM.items()
        for seed in SEEDS
    ]


RUNS_OF = {
    "custom": custom_runs,
    "michel2019": michel_runs,
    "voita2019": voita_runs,
    "overprovisioning": overprovisioning_runs,
    # Custom strategies are "during" runs: the training-time tables list them beside the built-in ones.
    "training_time": lambda: training_time_runs() + custom_runs(),
}


def all_runs():
    return sorted({path for make in RUNS_OF.values() for path in make()})


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


# What `heads report` renders per replication (tests/test_pipeline.py checks this against heads.report).
ARTEFACTS = {
    "michel2019": {
        "tables": [
            "ablation",
            "ablation_summary",
            "all_but_one",
            "curve",
            "curve_at",
            "speed",
        ],
        "figures": ["curves", "ablation", "curve_at", "speed"],
    },
    "voita2019": {"tables": ["l0", "roles"], "figures": ["l0", "roles"]},
    "overprovisioning": {
        "tables": ["pruned_vs_scratch", "differences"],
        "figures": ["pruned_vs_scratch"],
    },
    "training_time": {
        "tables": ["runs", "redundancy"],
        "figures": ["quality_vs_time", "time_to_target", "redundancy"],
    },
}


def report_outputs():
    out = [f"{OUT}/CLAIMS.md", f"{OUT}/claims.csv"]
    for rep, kinds in ARTEFACTS.items():
        out += [
            f"{OUT}/{rep}/{t}.{ext}" for t in kinds["tables"] for ext in ("csv", "md")
        ]
        out += [f"{OUT}/{rep}/{f}.png" for f in kinds["figures"]]
        out.append(f"{OUT}/{rep}/claims.md")
    return out


def replication_inputs(w):
    return RUNS_OF[w.replication]()


def replication_tasks(w):
    """The tasks a replication's inputs belong to: its tables read only these, so another replication's
    runs (finished or not at render time) never leak into them."""
    tasks = {
        os.path.relpath(path, RUNS).split(os.sep)[0]
        for path in RUNS_OF[w.replication]()
    }
    return ",".join(sorted(tasks))
