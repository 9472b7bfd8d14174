"""Michel et al. 2019: single-head ablations, iterative pruning curves (also from training snapshots), speed."""

from heads.sheet import RunSpec, analysis_label, baseline

REPLICATION = "michel2019"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed: the baselines of the ablated and curved tasks (the snapshot task's keeps snapshots), the
    ablation table, the classifier's trivial (word-overlap) baseline, one curve per scorer, importance curves
    from each snapshot, and the classifier's inference speed."""
    s = settings
    snap = s["snapshot_task"] if s["snapshots"] else None
    curve_params = {"step": s["curve_step"], "max_ratio": s["curve_max"], "batches": s["curve_batches"]}
    curve_eval = {"eval": {"max_examples": s["curve_examples"], "beams": 1}}
    out = []
    # precondition_tasks: baselines trained only so the claims on a task this preset does not analyse can measure
    # their preconditions, and say "not tested at this scale" with the number (the small Marian's BLEU)
    tasks = sorted({*s["ablation_tasks"], *s["curve_tasks"], *([snap] if snap else []),
                    *s.get("precondition_tasks", [])})
    for seed in seeds:
        base = {t: baseline(REPLICATION, t, seed, {"train": {"snapshots": list(s["snapshots"])}} if t == snap else {})
                for t in tasks}
        out += base.values()
        for task in s["ablation_tasks"]:
            # the paper's tests: BLEU's paired bootstrap for translation (decoding the curves' sentences, greedy),
            # a paired test on per-example accuracy for the classifier, on the loss otherwise
            test = {"mt": "bleu", "cls": "accuracy"}.get(task, "loss")
            out.append(RunSpec(label=analysis_label(task, "ablation", seed=seed), command="ablate",
                               replication=REPLICATION, task=task, seed=seed,
                               variant="ablation", options={"batches": s["curve_batches"], "test": test},
                               config=curve_eval if test == "bleu" else {},
                               paths={"source": base[task].label}, after=(base[task].label,)))
        if "cls" in tasks:  # what word overlap alone reaches on the same examples (the cls claims' precondition)
            out.append(RunSpec(label=analysis_label("cls", "trivial", seed=seed), command="trivial",
                               replication=REPLICATION, task="cls", seed=seed,
                               variant="trivial", paths={"source": base["cls"].label}, after=(base["cls"].label,)))
        for task in s["curve_tasks"]:
            for scorer in s["curve_scorers"]:
                # a random order is one draw: the random baseline averages several per seed
                orders = {"orders": s["random_orders"]} if scorer == "random" and s["random_orders"] > 1 else {}
                out.append(RunSpec(label=analysis_label(task, "curve", scorer, seed=seed), command="curve",
                                   replication=REPLICATION, task=task, seed=seed,
                                   variant="curve", arm=scorer, params={"scorer": scorer, **curve_params,
                                   "seed": seed, **orders},
                                   config=curve_eval, paths={"source": base[task].label}, after=(base[task].label,)))
        for step in s["snapshots"]:
            b = base[snap].label
            out.append(RunSpec(label=analysis_label(snap, "curve_at", f"step{step}", seed=seed), command="curve",
                               replication=REPLICATION, task=snap,
                               seed=seed, variant="curve_at", arm=f"step{step}", knob=float(step),
                               params={"scorer": "importance", **curve_params, "seed": seed}, config=curve_eval,
                               options={"task": True}, paths={"source": f"{b}/snapshots/step-{step}"}, after=(b,)))
    # Inference speed, once per seed's classifier: separate jobs at separate times are the replicates of a
    # clock-based claim (repeats inside one process share its machine state and say less); no speed_ratios, no
    # speed jobs (the GPU visit's translation-only sheet)
    for seed in seeds if s["speed_ratios"] else []:
        b = baseline(REPLICATION, "cls", seed)
        out += [b, RunSpec(label=analysis_label("cls", "speed", seed=seed), command="speed", replication=REPLICATION,
                           task="cls", seed=seed, variant="speed",
                           options={"ratios": list(s["speed_ratios"]), "batches": list(s["speed_batches"])},
                           paths={"source": b.label}, after=(b.label,))]
    return out
