"""Over-provisioning: a baseline pruned post hoc (with and without a short fine-tune) vs fewer heads from scratch;
and (A3) grouped-query and narrower models, their redundancy and what post-hoc pruning costs them."""

from heads.sheet import RunSpec, analysis_label, baseline, longer_baselines, run_label

REPLICATION = "overprovisioning"


def _posthoc(task: str, source: str, variant: str, arm: str, ratio: float, seed: int, scorer: str,
             knob: float | None = None) -> RunSpec:
    """``source`` pruned by ``scorer`` to ``ratio``, evaluated (its ``value_change`` is what pruning cost it)."""
    return RunSpec(label=run_label(task, variant, arm, ratio, seed), command="prune", replication=REPLICATION,
                   task=task, seed=seed, variant=variant, arm=arm, ratio=ratio,
                   knob=knob, strategy="posthoc", params={"ratio": ratio, "scorer": scorer, "seed": seed},
                   options={"evaluate": True}, paths={"source": source}, after=(source,))


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per task and seed: the baseline; per ratio, the pruned baseline, its fine-tune and a uniform scratch run
    (on the seeds :func:`part_seeds` gives each part);
    per post-hoc-only ratio, the pruned baseline alone; per matched ratio, a scratch run at the exact layout the
    pruned baseline ended with; with ``gqa``, the
    grouped-query and narrow models of A3; with ``longer_baseline``, the baseline trained twice as long (whether
    the baseline has converged)."""
    out = []
    scorer = settings["scorer"]
    part = part_seeds(settings, seeds)
    for task, ratios in settings["ratios"].items():
        for seed in seeds:
            base = baseline(REPLICATION, task, seed)
            out.append(base)
            for r in ratios:
                pruned = run_label(task, "posthoc", scorer, r, seed)
                out += [
                    _posthoc(task, base.label, "posthoc", scorer, r, seed, scorer),
                    RunSpec(label=run_label(task, "posthoc_ft", scorer, r, seed), command="train",
                            replication=REPLICATION, task=task, seed=seed,
                            variant="posthoc_ft", arm=scorer, ratio=r,
                            config={"train": {"steps": settings["finetune_steps"], "warmup": 0,
                                              "schedule": "constant", "lr": 0.0002}},
                            paths={"model.source": pruned}, after=(pruned,)),
                ]
                if seed in part["uniform"]:
                    out.append(RunSpec(label=run_label(task, "scratch", "uniform", r, seed), command="train",
                                       replication=REPLICATION, task=task, seed=seed, variant="scratch",
                                       arm="uniform", ratio=r, strategy="scratch", params={"ratio": r}))
            # A1's other end (30 %): pruned and evaluated only, nothing trained from it
            for r in settings.get("posthoc_ratios", {}).get(task, []):
                if r not in ratios:
                    out.append(_posthoc(task, base.label, "posthoc", scorer, r, seed, scorer))
            for r in settings["matched_ratios"]:
                pruned = run_label(task, "posthoc", scorer, r, seed)
                out.append(RunSpec(label=run_label(task, "scratch", "matched", r, seed), command="train",
                                   replication=REPLICATION, task=task, seed=seed,
                                   variant="scratch", arm="matched", ratio=r, strategy="scratch",
                                   paths={"strategy.params.layout_from": f"{pruned}/config.json"}, after=(pruned,)))
    # baselines trained only so the claims on a task this preset does not prune can measure their preconditions,
    # and say "not tested at this scale" with the number (the small Marian's BLEU)
    out += [baseline(REPLICATION, task, seed) for task in settings.get("precondition_tasks", [])
            for seed in part["precondition_tasks"]]
    if settings.get("gqa"):
        out += gqa_runs(settings["gqa"], part["gqa"], scorer)
    return out + longer_baselines(REPLICATION, settings.get("longer_baseline"), seeds)


def part_seeds(settings: dict, seeds: list[int]) -> dict[str, list[int]]:
    """The seeds of each part that ``part_seeds`` trims to the replication's first ``n`` (``uniform``: the uniform
    scratch runs; ``gqa``: A3's models; ``precondition_tasks``: the baselines that only say why a task is not
    tested); every seed for a part it does not name."""
    trim = settings.get("part_seeds") or {}
    return {name: list(seeds)[:trim.get(name, len(seeds))] for name in ("uniform", "gqa", "precondition_tasks")}


def gqa_runs(g: dict, seeds: list[int], scorer: str) -> list[RunSpec]:
    """A3, per seed: the baseline (``base-mha``) and its grouped-query variants (``base-kv<K>``), a narrower model
    with as many heads (``narrow-mha``) and its variants; each model's redundancy under both similarity
    definitions, and each pruned post hoc to ``g["ratio"]`` (the baseline's own pruned run serves base-mha).
    A variant's ``knob`` is its key/value head count, so a claim picks the most grouped one (``pick: min``)."""
    task, ratio, out = g["task"], g["ratio"], []
    narrow = dict(g["narrow"])
    for seed in seeds:
        base = baseline(REPLICATION, task, seed)
        models: dict[str, tuple[str, float | None]] = {"base-mha": (base.label, None)}
        out += [base, _posthoc(task, base.label, "posthoc", scorer, ratio, seed, scorer)]
        shapes = [("base", {}, None), ("narrow", narrow, None)] + [
            (size, shape, k) for size, shape in (("base", {}), ("narrow", narrow)) for k in g["kv_heads"]]
        for size, shape, kv in shapes:
            arm = f"{size}-mha" if kv is None else f"{size}-kv{kv}"
            if arm == "base-mha":
                continue
            model = {**shape, **({"kv_heads": kv} if kv is not None else {})}
            label, knob = run_label(task, "gqa", arm, 0.0, seed), None if kv is None else float(kv)
            out += [RunSpec(label=label, command="train", replication=REPLICATION, task=task, seed=seed,
                            variant="gqa", arm=arm, knob=knob, config={"model": model}),
                    _posthoc(task, label, "posthoc_gqa", arm, ratio, seed, scorer, knob)]
            models[arm] = (label, knob)
        for arm, (label, knob) in models.items():
            out.append(RunSpec(label=analysis_label(task, "redundancy", arm, seed=seed), command="redundancy",
                               replication=REPLICATION, task=task,
                               seed=seed, variant="redundancy", arm=arm, knob=knob,
                               options={"batches": g["redundancy_batches"],
                                                                "pooling": ["token", "mean"]},
                               paths={"source": label}, after=(label,)))
    return out
