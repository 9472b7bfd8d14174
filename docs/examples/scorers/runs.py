"""Post-hoc pruning by scorer: each seed's baseline pruned to one ratio by each scorer, side by side."""

from heads.sheet import RunSpec, baseline, longer_baselines, run_label

REPLICATION = "scorers"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed: the baseline (shared with the other replications), and one pruned copy per scorer; the baseline
    trained twice as long, which lm-converged (its claims' precondition) compares it with."""
    task, ratio, out = settings["task"], settings["ratio"], []
    for seed in seeds:
        base = baseline(REPLICATION, task, seed)
        out.append(base)
        for scorer in settings["scorers"]:
            out.append(RunSpec(label=run_label(task, "posthoc", scorer, ratio, seed), command="prune",
                               replication=REPLICATION, task=task, seed=seed,
                               variant="posthoc", arm=scorer, ratio=ratio, strategy="posthoc",
                               params={"ratio": ratio, "scorer": scorer, "seed": seed},
                               options={"evaluate": True}, paths={"source": base.label}, after=(base.label,)))
    return out + longer_baselines(REPLICATION, settings["longer_baseline"], seeds)
