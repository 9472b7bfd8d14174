"""Michel et al. 2019: single-head ablations, iterative pruning curves (also from training snapshots), speed."""

from heads.sheet import (
    Custom,
    RunSpec,
    SheetError,
    analysis_label,
    baseline,
    layered,
    masking_runs,
    run_label,
    shard_config,
)

REPLICATION = "michel2019"
# what every curve of a preset shares, so that arms compare level by level: a custom entry's params may not set them
SHARED = ("scorer", "step", "max_ratio", "batches", "seed")


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed: the baselines of the ablated and curved tasks (the snapshot task's keeps snapshots), the
    ablation table, the classifier's trivial (word-overlap) baseline, one curve per scorer, importance curves
    from each snapshot, and the classifier's inference speed."""
    s = settings
    snap = s["snapshot_task"] if s["snapshots"] else None
    curve_params, curve_eval = _levels(s), _curve_eval(s)
    out = []
    # precondition_tasks: baselines trained only so the claims on a task this preset does not analyse can measure
    # their preconditions, and say "not tested at this scale" with the number (the small Marian's BLEU)
    tasks = sorted({*s["ablation_tasks"], *s["curve_tasks"], *([snap] if snap else []),
                    *s.get("precondition_tasks", [])})
    for seed in seeds:
        # shards: a shipped model's seeds are disjoint shards of the test set (the pretrained preset)
        shard = shard_config(seeds, seed) if s.get("shards") else {}
        base = {t: baseline(REPLICATION, t, seed,
                            layered(shard, {"train": {"snapshots": list(s["snapshots"])}} if t == snap else {}))
                for t in tasks}
        out += base.values()
        # the ablation on the first `ablation_shards` shards (all where unset): B1 and B2 then read one seed
        for task in s["ablation_tasks"] if seeds.index(seed) < s.get("ablation_shards", len(seeds)) else []:
            # the paper's tests: BLEU's paired bootstrap for translation (decoding the curves' sentences, greedy),
            # a paired test on per-example accuracy for the classifier, on the loss otherwise
            test = {"mt": "bleu", "cls": "accuracy"}.get(task, "loss")
            out.append(RunSpec(label=analysis_label(task, "ablation", seed=seed), command="ablate",
                               replication=REPLICATION, task=task, seed=seed,
                               variant="ablation", options={"batches": s["curve_batches"], "test": test,
                                                            **({"decode_chunk": s["decode_chunk"]}
                                                               if "decode_chunk" in s else {})},
                               config=curve_eval if test == "bleu" else {},
                               paths={"source": base[task].label}, after=(base[task].label,)))
        if "cls" in tasks:  # what word overlap alone reaches on the same examples (the cls claims' precondition)
            out.append(RunSpec(label=analysis_label("cls", "trivial", seed=seed), command="trivial",
                               replication=REPLICATION, task="cls", seed=seed,
                               variant="trivial", paths={"source": base["cls"].label}, after=(base["cls"].label,)))
        out += [_curve(s, task, seed, scorer, scorer) for task in s["curve_tasks"] for scorer in s["curve_scorers"]]
        for step in s["snapshots"]:
            b = base[snap].label
            out.append(RunSpec(label=analysis_label(snap, "curve_at", f"step{step}", seed=seed), command="curve",
                               replication=REPLICATION, task=snap,
                               seed=seed, variant="curve_at", arm=f"step{step}", knob=float(step),
                               params={"scorer": "importance", **curve_params, "seed": seed}, config=curve_eval,
                               options={"task": True}, paths={"source": f"{b}/snapshots/step-{step}"}, after=(b,)))
    # Michel's unit masked (a shipped model's): every replicate reads the first seed's baseline, the model as it is
    if "mask_task" in s:
        task = s["mask_task"]
        out += masking_runs(REPLICATION, task, s, run_label(task, "baseline", "none", 0.0, seeds[0]))
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


def _levels(s: dict) -> dict:
    """Where every curve of the preset prunes: its step, how far, on how many scoring batches (and whether its
    levels are evaluated together, under stacked gates)."""
    return {"step": s["curve_step"], "max_ratio": s["curve_max"], "batches": s["curve_batches"],
            **({"together": True} if s.get("curve_together") else {})}


def _curve_eval(s: dict) -> dict:
    """What every curve's level is evaluated on: the same sentences, decoded greedily."""
    return {"eval": {"max_examples": s["curve_examples"], "beams": 1}}


def _curve(s: dict, task: str, seed: int, arm: str, scorer: str, params: dict | None = None) -> RunSpec:
    """The pruning curve of ``scorer`` (arm ``arm``) from the seed's baseline of ``task``: the preset's steps,
    batches and sentences, ``params`` (the curve's other parameters: scope, floor, scorer_params, orders) on top."""
    source = baseline(REPLICATION, task, seed).label
    # a random order is one draw: the random baseline averages several per seed
    orders = {"orders": s["random_orders"]} if scorer == "random" and s["random_orders"] > 1 else {}
    return RunSpec(label=analysis_label(task, "curve", arm, seed=seed), command="curve", replication=REPLICATION,
                   task=task, seed=seed, variant="curve", arm=arm,
                   params={"scorer": scorer, **_levels(s), "seed": seed, **orders, **(params or {})},
                   config=_curve_eval(s), paths={"source": source}, after=(source,))


def custom(entry: Custom, settings: dict, seeds: list[int]) -> list[RunSpec]:
    """A user's scorer (workflow config ``custom:`` with ``replication: michel2019``) as pruning curves beside the
    built-in scorers': per seed and curve task (``task``: that one only), arm = the entry's label, built as theirs
    (same levels, batches and sentences, from that seed's baseline), so the curve table and figure show it.
    ``params`` are the curve's other parameters (scope, floor, scorer_params, orders)."""
    s = settings
    if entry.kind != "posthoc":
        raise SheetError(f"{entry.strategy!r} prunes while training; this replication's curves prune a trained model "
                         "by a scorer (importance, magnitude, ... or your own); a training-time strategy joins "
                         "training_time")
    if entry.ratio is not None:
        raise SheetError(f"a curve prunes step by step up to curve_max ({s['curve_max']}): leave ratio out")
    shared = sorted(set(SHARED) & set(entry.params))
    if shared:
        raise SheetError(f"params {shared} are every curve's alike (curve_step, curve_max, curve_batches, the seed; "
                         "the scorer is the entry's strategy): set them under dag.<preset>.michel2019")
    if entry.task is not None and entry.task not in s["curve_tasks"]:
        raise SheetError(f"task {entry.task!r} has no curves at this preset (curve_tasks: {s['curve_tasks']})")
    tasks = s["curve_tasks"] if entry.task is None else [entry.task]
    return [_curve(s, task, seed, entry.label, entry.strategy, entry.params) for seed in seeds for task in tasks]
