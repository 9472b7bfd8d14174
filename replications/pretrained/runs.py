"""A pretrained model: Michel's, Voita's and the over-provisioning claims on SmolLM2-135M (Llama, 30 x 9 query
heads in 3 key/value groups), which this project did not train, or on the model ``--config model=NAME`` names
(heads.battery). Its seeds are disjoint shards of the held-out text (``eval.shard``), so every interval covers
the sampling of the test text and the random draws, not training; each shard's baseline is the shipped model
evaluated as it is (``train.steps: 0``).

Every run is of the task the settings name (``task``: the preset model's, or the one heads.battery.for_model
writes for another model: ``lm`` for a causal LM, ``retrieval`` for an MPNet encoder); ``by_task`` lays a task's
own settings over the rest (a task without a shifted corpus runs no shift)."""

from heads.sheet import RunSpec, SheetError, analysis_label, baseline, masking_runs, run_label, shard_config

REPLICATION = "pretrained"
# settings a preset may leave out (settings.schema.yaml)
OPTIONAL = {"shift_datasets", "shift_ratio", "mask_units", "floor", "ablation_shards"}


def settings_for(settings: dict) -> dict:
    """``settings`` with its task's ``by_task`` entry laid over them (its keys must be settings of their own); a key
    the workflow config set is no longer in it (heads.sheet.preset_settings), so the user's value wins."""
    own = (settings.get("by_task") or {}).get(settings["task"]) or {}
    unknown = sorted(set(own) - set(settings) - OPTIONAL)
    if unknown:
        raise SheetError(f"pretrained: by_task.{settings['task']} sets {unknown}, which are no settings")
    return {k: v for k, v in {**settings, **own}.items() if k != "by_task"}


def _floor(s: dict) -> dict:
    """The heads every layer keeps where the settings name a floor other than the commands' own 1 (0: whole
    layers' attention may go, as under multi-query attention, heads.battery.layout_settings)."""
    return {"floor": s["floor"]} if s.get("floor", 1) != 1 else {}


def _posthoc(task: str, source: str, arm: str, ratio: float, seed: int, batches: int, floor: dict) -> RunSpec:
    """The baseline pruned by importance to ``ratio`` of its heads (whole key/value groups: the model's grouped
    query attention lets no single query head go physically), evaluated on the same shard."""
    return RunSpec(label=run_label(task, "posthoc", arm, ratio, seed), command="prune", replication=REPLICATION,
                   task=task, seed=seed, variant="posthoc", arm=arm,
                   ratio=ratio, strategy="posthoc",
                   params={"ratio": ratio, "scorer": "importance", "seed": seed, "batches": batches, **floor},
                   options={"evaluate": True}, paths={"source": source}, after=(source,))


def _layers(sample: list[int] | int) -> dict:
    """The ablation's layers: those listed, or a count spread over the model's depth, which the command resolves
    on the model it loads (so one setting serves a model of any depth)."""
    return {"spread_layers": sample} if isinstance(sample, int) else {"layers": list(sample)}


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per shard: the baseline; per ratio, the model pruned by importance and its short recovery fine-tune; the
    single-head ablation and all-but-one on a stated sample of layers; a pruning curve per scorer; the speed of
    the model with one and two of its three key/value groups pruned in every layer; redundancy per similarity
    definition; the roles of the heads kept at ``roles_ratio`` against those removed; the pruned model's loss on
    shifted corpora (the Bible, French Wikipedia) against the baseline's."""
    s, out = settings_for(settings), []
    task = s["task"]
    curve = {"step": s["curve_step"], "max_ratio": s["curve_max"], "batches": s["curve_batches"], **_floor(s)}
    curve_eval = {"eval": {"max_examples": s["curve_examples"]}}
    for seed in seeds:
        shard = shard_config(seeds, seed)  # a run's own config; analyses of it read it
        base = baseline(REPLICATION, task, seed, shard)
        out.append(base)
        for r in s["ratios"]:
            pruned = _posthoc(task, base.label, "importance", r, seed, s["score_batches"], _floor(s))
            out.append(pruned)
            if r in s["finetune"]:  # a short recovery fine-tune on the training text, evaluated on the same shard
                out.append(RunSpec(label=run_label(task, "posthoc_ft", "importance", r, seed), command="train",
                                   replication=REPLICATION, task=task,
                                   seed=seed, variant="posthoc_ft", arm="importance", ratio=r,
                                   config={**shard, "train": {"steps": s["finetune_steps"]}},
                                   paths={"model.source": pruned.label}, after=(pruned.label,)))
        # the ablation on the first `ablation_shards` shards (all where unset): its claims count heads and layers,
        # which one shard already samples, and where an ablation costs half an hour of a core (MPNet) four do not fit
        if seeds.index(seed) < s.get("ablation_shards", len(seeds)):
            out.append(RunSpec(label=analysis_label(task, "ablation", seed=seed), command="ablate",
                               replication=REPLICATION, task=task, seed=seed, variant="ablation",
                               options={"batches": s["ablation_batches"], "test": "loss",
                                        **_layers(s["ablation_layers"]), "chunk": s["ablation_chunk"],
                                        "held_out": True},
                               paths={"source": base.label}, after=(base.label,)))
        for scorer in s["curve_scorers"]:
            orders = {"orders": s["random_orders"]} if scorer == "random" and s["random_orders"] > 1 else {}
            out.append(RunSpec(label=analysis_label(task, "curve", scorer, seed=seed), command="curve",
                               replication=REPLICATION, task=task, seed=seed,
                               variant="curve", arm=scorer, params={"scorer": scorer, **curve, "seed": seed, **orders},
                               config=curve_eval, paths={"source": base.label}, after=(base.label,)))
        out.append(RunSpec(label=analysis_label(task, "speed", seed=seed), command="speed", replication=REPLICATION,
                           task=task, seed=seed, variant="speed",
                           options={"ratios": list(s["speed_ratios"]), "batches": list(s["speed_batches"]),
                                    "examples": s["speed_examples"],
                                    # under a floor of its own, by importance: a uniform share of a layer's
                                    # only group is all of it or none
                                    **({"scorer": "importance", **_floor(s)} if _floor(s) else {})},
                           paths={"source": base.label}, after=(base.label,)))
        out.append(RunSpec(label=analysis_label(task, "redundancy", "base", seed=seed), command="redundancy",
                           replication=REPLICATION, task=task,
                           seed=seed, variant="redundancy", arm="base",
                           # both units and both spaces, JS of attention patterns, split-half reliability and a
                           # planted duplicate: the preconditions of the redundancy claims, none decided by them
                           options={"batches": s["redundancy_batches"], "pooling": ["mean"],
                                    "units": ["head", "group"], "spaces": ["value", "residual"], "js": True,
                                    "split_half": True, "control": True},
                           paths={"source": base.label}, after=(base.label,)))
        # a pruned model's folder holds no run config: the preset's applies (--task), with the shard's own
        pruned = run_label(task, "posthoc", "importance", s["roles_ratio"], seed)
        out.append(RunSpec(label=analysis_label(task, "roles", f"importance{s['roles_ratio']}", seed=seed),
                           command="roles",
                           replication=REPLICATION, task=task, seed=seed, variant="roles",
                           arm=f"importance{s['roles_ratio']}",
                           knob=float(s["roles_ratio"]), config=shard,
                           options={"task": True, "batches": s["roles_batches"]},
                           paths={"source": pruned, "reference": base.label}, after=(pruned, base.label)))
        if s.get("shift_datasets"):  # at a pruning a user would accept (shift_ratio), not at 7x the perplexity
            shifted = run_label(task, "posthoc", "importance", s["shift_ratio"], seed)
            out.append(RunSpec(label=analysis_label(task, "shift", f"importance{s['shift_ratio']}", seed=seed),
                               command="shift",
                               replication=REPLICATION, task=task, seed=seed, variant="shift",
                               arm=f"importance{s['shift_ratio']}", config=shard,
                               options={"task": True, "datasets": list(s["shift_datasets"])},
                               paths={"source": shifted, "reference": base.label}, after=(shifted, base.label)))
    out += _masking(task, s, seeds)
    return out


def _masking(task: str, s: dict, seeds: list[int]) -> list[RunSpec]:
    """Michel's unit on this model (heads.sheet.masking_runs): single query heads and whole key/value groups;
    every job reads the shipped model through the first shard's baseline (``train.steps: 0``: the model as
    shipped)."""
    return masking_runs(REPLICATION, task, s, run_label(task, "baseline", "none", 0.0, seeds[0]))
