"""Over-provisioning: a baseline pruned post hoc (with and without a short fine-tune) vs fewer heads from scratch."""

from heads.sheet import RunSpec, baseline, run_label

REPLICATION = "overprovisioning"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per task and seed: the baseline; per ratio, the pruned baseline, its fine-tune and a uniform scratch run;
    per matched ratio, a scratch run at the exact layout the pruned baseline ended with."""
    out = []
    scorer = settings["scorer"]
    for task, ratios in settings["ratios"].items():
        for seed in seeds:
            base = baseline(REPLICATION, task, seed)
            out.append(base)
            for r in ratios:
                pruned = run_label(task, "posthoc", scorer, r, seed)
                out += [
                    RunSpec(pruned, "prune", REPLICATION, task, seed, "posthoc", scorer, r, strategy="posthoc",
                            params={"ratio": r, "scorer": scorer, "seed": seed}, options={"evaluate": True},
                            paths={"source": base.label}, after=(base.label,)),
                    RunSpec(run_label(task, "posthoc_ft", scorer, r, seed), "train", REPLICATION, task, seed,
                            "posthoc_ft", scorer, r,
                            config={"train": {"steps": settings["finetune_steps"], "warmup": 0,
                                              "schedule": "constant", "lr": 0.0002}},
                            paths={"model.source": pruned}, after=(pruned,)),
                    RunSpec(run_label(task, "scratch", "uniform", r, seed), "train", REPLICATION, task, seed,
                            "scratch", "uniform", r, strategy="scratch", params={"ratio": r}),
                ]
            for r in settings["matched_ratios"]:
                pruned = run_label(task, "posthoc", scorer, r, seed)
                out.append(RunSpec(run_label(task, "scratch", "matched", r, seed), "train", REPLICATION, task, seed,
                                   "scratch", "matched", r, strategy="scratch",
                                   paths={"strategy.params.layout_from": f"{pruned}/config.json"}, after=(pruned,)))
    return out
