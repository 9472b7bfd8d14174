"""Where over-provisioning begins: the overprovisioning replication's A1/A2 comparison at several model sizes.

Per size and seed: the full model (``baseline``, arm = the size's name; the preset's own model is the baseline
every replication shares, arm ``none``), pruned post hoc by a scorer to a share of its heads (``size_posthoc``:
what pruning costs, A1), that pruned model fine-tuned briefly (``size_posthoc_ft``), and the pruned layout trained
from initialisation under the baseline's budget (``size_scratch``: A2's gap is scratch minus fine-tuned); per size,
its baseline trained twice as long on the first seeds (``baseline_2x``, the direct convergence test)."""

from heads.sheet import LONGER, RunSpec, SheetError, baseline, longer_baselines, run_label

REPLICATION = "scaling"
TASK = "lm"  # the over-provisioning claims at several sizes are about language models (as A1-lm, A2-lm-ft)
# the variants of the pruned, fine-tuned and scratch models (their arm is the size's name)
POSTHOC, FINETUNED, SCRATCH = "size_posthoc", "size_posthoc_ft", "size_scratch"


def _sizes(settings: dict) -> list[dict]:
    """The sizes, checked beyond the schema: distinct names, at most one the preset's own model (neither
    ``model`` keys nor ``steps``), heads that divide the width where both are given."""
    sizes = list(settings["sizes"])
    names = [s["name"] for s in sizes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SheetError(f"{REPLICATION}: sizes {twice} are named more than once; give each size its own name")
    preset = [s["name"] for s in sizes if not _config(s)]
    if len(preset) > 1:
        raise SheetError(f"{REPLICATION}: sizes {preset} all name the preset's own model (no model keys or "
                         "steps); keep one, or give the others model keys")
    for s in sizes:
        model = s.get("model") or {}
        if "d" in model and "heads" in model and model["d"] % model["heads"]:
            raise SheetError(f"{REPLICATION}: size {s['name']!r}: heads {model['heads']} do not divide d "
                             f"{model['d']} (each head takes d / heads dimensions)")
    return sizes


def _config(size: dict) -> dict:
    """The run-config overrides that make a size: its model keys and, where it names them, its steps."""
    out: dict = {}
    if size.get("model"):
        out["model"] = dict(size["model"])
    if size.get("steps") is not None:
        out["train"] = {"steps": int(size["steps"])}
    return out


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per size and seed: the baseline, pruned to ``ratio`` by ``scorer``, the pruned model fine-tuned for
    ``finetune_steps``, and the pruned layout from scratch; per size, the baseline trained ``longer_baseline``'s
    factor times as long on its first seeds."""
    ratio, scorer, out = settings["ratio"], settings["scorer"], []
    longer = settings["longer_baseline"]
    if int(longer["seeds"]) > len(seeds):
        raise SheetError(f"{REPLICATION}: longer_baseline asks for {longer['seeds']} seeds, the replication has "
                         f"{len(seeds)}")
    for size in _sizes(settings):
        name, config = size["name"], _config(size)
        for seed in seeds:
            # the preset's own model is the baseline every replication shares (its lm-converged applies by name)
            base = (baseline(REPLICATION, TASK, seed) if not config else
                    RunSpec(label=run_label(TASK, "baseline", name, 0.0, seed), command="train",
                            replication=REPLICATION, task=TASK, seed=seed, arm=name, config=config))
            pruned = run_label(TASK, POSTHOC, name, ratio, seed)
            out += [
                base,
                RunSpec(label=pruned, command="prune", replication=REPLICATION, task=TASK, seed=seed,
                        variant=POSTHOC, arm=name, ratio=ratio, strategy="posthoc",
                        params={"ratio": ratio, "scorer": scorer, "seed": seed},
                        options={"evaluate": True}, paths={"source": base.label}, after=(base.label,)),
                # as overprovisioning's posthoc_ft: a short constant-rate fine-tune of the pruned model
                RunSpec(label=run_label(TASK, FINETUNED, name, ratio, seed), command="train",
                        replication=REPLICATION, task=TASK, seed=seed, variant=FINETUNED, arm=name, ratio=ratio,
                        config={"train": {"steps": settings["finetune_steps"], "warmup": 0,
                                          "schedule": "constant", "lr": 0.0002}},
                        paths={"model.source": pruned}, after=(pruned,)),
                # the exact layout the pruned model ended with, from initialisation, under the baseline's budget
                RunSpec(label=run_label(TASK, SCRATCH, name, ratio, seed), command="train",
                        replication=REPLICATION, task=TASK, seed=seed, variant=SCRATCH, arm=name, ratio=ratio,
                        strategy="scratch", config=config,
                        paths={"strategy.params.layout_from": f"{pruned}/config.json"}, after=(pruned,)),
            ]
        if not config:  # the preset's model: the yardstick every replication shares
            out += longer_baselines(REPLICATION, longer, seeds)
        else:  # heads.sheet sets its steps: the factor times its baseline's (same arm)
            out += [RunSpec(label=run_label(TASK, LONGER, name, 0.0, seed), command="train",
                            replication=REPLICATION, task=TASK, seed=seed, variant=LONGER, arm=name,
                            knob=float(longer["factor"]),
                            config={k: v for k, v in config.items() if k == "model"})
                    for seed in list(seeds)[: int(longer["seeds"])]]
    return out
