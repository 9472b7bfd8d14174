"""Voita et al. 2019: Hard-Concrete (L0) gates on a trained model, the surviving heads' roles, the same
layout trained from scratch, and a control: the same fine-tune without gates."""

from heads.sheet import RunSpec, analysis_label, baseline, layered, run_label, shard_config

REPLICATION = "voita2019"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed and penalty lambda: the baseline fine-tuned with L0 gates (closed heads removed at the end), the
    layout it ended with trained from initialisation, and the roles of its heads against the baseline's. Per
    seed, unless ``control`` is false: the baseline fine-tuned alike without gates (C1's cost is the L0 model
    against it: a fine-tune on data the baseline was not trained on changes the metric by itself)."""
    task, out = settings["task"], []
    fine_tune = {"train": {"steps": settings["steps"], "warmup": 0, "schedule": "constant", "lr": 0.0001}}
    for seed in seeds:
        # shards: a shipped model's seeds are disjoint shards of the test set (the pretrained preset)
        shard = shard_config(seeds, seed) if settings.get("shards") else {}
        base = baseline(REPLICATION, task, seed, shard)
        out.append(base)
        if settings.get("control", True):
            out.append(RunSpec(label=run_label(task, "l0_control", "none", 0.0, seed), command="train",
                               replication=REPLICATION, task=task, seed=seed, variant="l0_control", arm="none",
                               config=layered(fine_tune, shard), paths={"model.source": f"{base.label}/model"},
                               after=(base.label,)))
        for lam in settings["lams"]:
            arm = f"lam{lam}"
            l0 = run_label(task, "l0", arm, 0.0, seed)
            out += [
                RunSpec(label=l0, command="train", replication=REPLICATION, task=task, seed=seed, variant="l0",
                        arm=arm, knob=float(lam), strategy="l0",
                        params={"lam": lam, "lr": settings["lr"]},
                        config=layered(fine_tune, shard),
                        paths={"model.source": f"{base.label}/model"}, after=(base.label,)),
                RunSpec(label=analysis_label(task, "roles", arm, seed=seed), command="roles", replication=REPLICATION,
                        task=task, seed=seed, variant="roles", arm=arm,
                        knob=float(lam), options={"batches": settings.get("batches", 4)},
                        paths={"source": l0, "reference": base.label}, after=(l0, base.label)),
            ]
            # scratch_lams: the penalties whose layout is also trained from scratch (default: every one); C3
            # reads the largest, and a short GPU visit affords no more than that one
            if lam in settings.get("scratch_lams", settings["lams"]):
                # as many steps as the L0 model had in all (the baseline's plus its L0 fine-tune), as C3 compares
                out.append(RunSpec(label=run_label(task, "scratch", f"l0{arm}", 0.0, seed), command="train",
                                   replication=REPLICATION, task=task,
                                   seed=seed, variant="scratch", arm=f"l0{arm}", knob=float(lam), strategy="scratch",
                                   config={"train": {"steps": settings["scratch_steps"]}},
                                   paths={"strategy.params.layout_from": f"{l0}/summary.json"}, after=(l0,)))
    return out
