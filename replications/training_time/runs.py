"""Training-time pruning: one-shot similarity pruning, curriculum waves and the attention-dropout regime
against the baseline, on the same seeds; and how redundant the baseline's heads are as it trains."""

from heads.sheet import Custom, RunSpec, SheetError, analysis_label, baseline, longer_baselines, run_label

REPLICATION = "training_time"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed: the baseline, one-shot at a ratio (survivors kept, and re-initialised), curriculum waves up
    to a cap, and one dropout-regime run per warm-up attention dropout rate (0.1 after warm-up), every similarity
    under ``pooling`` (``mean``: the report's definition); the arms in ``token_contrast`` again with per-token
    similarity; the baseline's redundancy at each of ``redundancy_steps`` (its snapshots) and at the end; each of
    ``shift_arms`` against the baseline in domain and on ``shift_datasets`` (a distribution shift); each of
    ``memory_arms`` against the baseline's training-step memory (the largest batch within its peak at
    ``memory_cap_batch``); each of ``clock_arms``'s training steps timed interleaved with the baseline's and, with
    ``clock_dropout``, the baseline's under that attention dropout; with ``longer_baseline``, the baseline trained
    twice as long (whether it converged)."""
    s, task, out = settings, settings["task"], []
    pooling, steps = s["pooling"], list(s["redundancy_steps"])
    for seed in seeds:
        base = baseline(REPLICATION, task, seed, {"train": {"snapshots": steps}} if steps else {})
        out.append(base)
        arms: list[tuple[str, float, str, dict, float | None]] = []  # (arm, ratio, strategy, params, knob)
        r = s["oneshot_ratio"]
        # the report's one-shot re-initialises the survivors after the proxy pass (D2); kept weights beside it
        for arm, reinit in (("oneshot", False), ("oneshot_reinit", True)):
            arms.append((arm, r, "oneshot", {"ratio": r, "proxy_steps": s["oneshot_proxy_steps"],
                                             **({"reinit": True} if reinit else {})}, None))
        r = s["curriculum_max_ratio"]
        arms.append(("curriculum", r, "curriculum", {"max_ratio": r}, None))
        r = s["dropout_max_ratio"]
        for p in s["dropout_rates"]:
            arms.append((f"dropout{p}", r, "dropout_regime", {"high": p, "low": 0.1, "max_ratio": r}, float(p)))
        unknown = sorted(set(s["token_contrast"]) - {a[0] for a in arms})
        if unknown:
            raise SheetError(f"training_time: token_contrast names no arm: {unknown}; arms: {[a[0] for a in arms]}")
        for arm, ratio, strategy, params, knob in arms:
            for how in (pooling, *(["token"] if arm in s["token_contrast"] and pooling != "token" else [])):
                name = arm if how == pooling else f"{arm}_token"
                out.append(RunSpec(label=run_label(task, "during", name, ratio, seed), command="train",
                                   replication=REPLICATION, task=task, seed=seed,
                                   variant="during", arm=name, ratio=ratio, knob=knob, strategy=strategy,
                                   params={**params, **_pooling(strategy, how)}))
        out += redundancy_over_training(task, base.label, steps, seed, s["redundancy_batches"])
        # D7: the pruned models against the baseline in domain and on the same books in other translations;
        # D8: their training-step memory against the baseline's, and the largest batch within its peak;
        # D1, D4: their training steps timed interleaved with the baseline's (and the baseline's under warm-up
        # attention dropout), where two runs timed in separate jobs see different machine load
        clock = {"steps": s["clock_steps"], "repeats": s["clock_repeats"],
                 **({"dropout": s["clock_dropout"]} if s["clock_dropout"] is not None else {})}
        for kind, key, options in (("shift", "shift_arms", {"datasets": list(s["shift_datasets"])}),
                                   ("memory", "memory_arms", {"cap_batch": s["memory_cap_batch"]}),
                                   ("clock", "clock_arms", clock)):
            for arm in s[key]:
                model = next((e for e in out if e.seed == seed and e.variant == "during" and e.arm == arm), None)
                if model is None:
                    raise SheetError(f"training_time: {key} names no arm it trains: {arm!r}")
                out.append(RunSpec(label=analysis_label(task, kind, arm, seed=seed), command=kind,
                                   replication=REPLICATION, task=task, seed=seed,
                                   variant=kind, arm=arm, options=options, paths={"source": model.label,
                                   "reference": base.label},
                                   after=(model.label, base.label)))
        out += genre_pruning(task, base.label, seed, s["genre_domains"], s["genre_ratio"], pooling,
                             s["redundancy_batches"])
    return out + longer_baselines(REPLICATION, s.get("longer_baseline"), seeds)


def custom(entry: Custom, settings: dict, seeds: list[int]) -> list[RunSpec]:
    """A user's strategy (workflow config ``custom:``, this replication by default) trained beside the built-in
    ones: a ``during`` run of its task per seed. ``ratio`` reaches the strategy as its ``ratio`` parameter unless
    ``params`` sets it, and names the run's folder (0.0 when the entry names none)."""
    if entry.kind != "during":
        raise SheetError(f"{entry.strategy!r} is a scorer, which chooses heads of a trained model; this replication "
                         "trains strategies that prune while training (replication: michel2019 adds its pruning "
                         "curves)")
    if entry.task is None:
        raise SheetError("name the task it trains on (task: lm, mt, cls or your own)")
    ratio = 0.0 if entry.ratio is None else entry.ratio
    params = dict(entry.params)
    if entry.ratio is not None:
        params.setdefault("ratio", ratio)
    return [RunSpec(label=run_label(entry.task, "during", entry.label, ratio, seed), command="train",
                    replication=REPLICATION, task=entry.task, seed=seed, variant="during", arm=entry.label,
                    ratio=ratio, strategy=entry.strategy, params=params) for seed in seeds]


def genre_pruning(task: str, base: str, seed: int, domains: list[str], ratio: float, pooling: str,
                  batches: int) -> list[RunSpec]:
    """D7, genres as domains: the trained baseline pruned to ``ratio`` by similarity on the genres' training text,
    pooled and stratified (a head goes only if it is redundant in every genre), each then scored against the
    baseline on every genre's validation books (``heads shift``): does pooling cost one genre more? And the
    baseline's redundancy on each genre's held-out text, stratified and pooled, under both definitions."""
    if not domains:
        return []
    out = [RunSpec(label=analysis_label(task, "redundancy_genre", "genres", seed=seed), command="redundancy",
                   replication=REPLICATION, task=task,
                   seed=seed, variant="redundancy_genre", arm="genres", options={"batches": batches,
                   "pooling": ["token", "mean"],
                                                                "domains": list(domains)},
                   paths={"source": base}, after=(base,))]
    for arm, stratify in (("genre-pooled", False), ("genre-stratified", True)):
        pruned = RunSpec(label=run_label(task, "posthoc_genre", arm, ratio, seed), command="prune",
                         replication=REPLICATION, task=task, seed=seed,
                         variant="posthoc_genre", arm=arm, ratio=ratio, strategy="posthoc",
                         params={"ratio": ratio, "scorer": "similarity", "seed": seed,
                                 "scorer_params": {"pooling": pooling}},
                         options={"split": "train", "domains": list(domains), "evaluate": True,
                                  **({"stratify": True} if stratify else {})},
                         paths={"source": base}, after=(base,))
        out.append(pruned)
        out.append(RunSpec(label=analysis_label(task, "shift", arm, seed=seed), command="shift",
                           replication=REPLICATION, task=task, seed=seed, variant="shift",
                           arm=arm, options={"task": True, "datasets": list(domains)},
                           paths={"source": pruned.label, "reference": base}, after=(pruned.label, base)))
    return out


def _pooling(strategy: str, how: str) -> dict:
    """The similarity definition as the strategy takes it: one-shot through its scorer's parameters."""
    if how == "token":
        return {}  # every strategy's default: the label and config stay those of earlier runs
    return {"scorer_params": {"pooling": how}} if strategy == "oneshot" else {"pooling": how}


def redundancy_over_training(task: str, base: str, steps: list[int], seed: int, batches: int) -> list[RunSpec]:
    """``heads redundancy`` (both definitions) on each snapshot of the baseline (arm ``step{N}``, knob N) and on
    the trained model itself (arm ``final``): do heads that look distinct early converge later?"""
    both = {"batches": batches, "pooling": ["token", "mean"]}
    out = [RunSpec(label=analysis_label(task, "redundancy_at", f"step{step}", seed=seed), command="redundancy",
                   replication=REPLICATION, task=task,
                   seed=seed, variant="redundancy_at", arm=f"step{step}", knob=float(step), options={"task": True,
                   **both},
                   paths={"source": f"{base}/snapshots/step-{step}"}, after=(base,)) for step in steps]
    if steps:
        out.append(RunSpec(label=analysis_label(task, "redundancy_at", "final", seed=seed), command="redundancy",
                           replication=REPLICATION,
                           task=task, seed=seed, variant="redundancy_at", arm="final", options=both,
                           paths={"source": base},
                           after=(base,)))
    return out
