"""Training-time pruning: one-shot similarity pruning, curriculum waves and the attention-dropout regime
against the baseline, on the same seeds."""

from heads.sheet import RunSpec, baseline, run_label

REPLICATION = "training_time"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per seed: the baseline, one-shot at a ratio (survivors kept, and re-initialised), curriculum waves up
    to a cap, and one dropout-regime run per warm-up attention dropout rate (0.1 after warm-up)."""
    s, task, out = settings, settings["task"], []
    for seed in seeds:
        out.append(baseline(REPLICATION, task, seed))
        r = s["oneshot_ratio"]
        # the report's one-shot re-initialises the survivors after the proxy pass (D2); kept weights beside it
        for arm, reinit in (("oneshot", False), ("oneshot_reinit", True)):
            out.append(RunSpec(run_label(task, "during", arm, r, seed), "train", REPLICATION, task, seed, "during",
                               arm, r, strategy="oneshot",
                               params={"ratio": r, "proxy_steps": s["oneshot_proxy_steps"],
                                       **({"reinit": True} if reinit else {})}))
        r = s["curriculum_max_ratio"]
        out.append(RunSpec(run_label(task, "during", "curriculum", r, seed), "train", REPLICATION, task, seed,
                           "during", "curriculum", r, strategy="curriculum", params={"max_ratio": r}))
        r = s["dropout_max_ratio"]
        for p in s["dropout_rates"]:
            out.append(RunSpec(run_label(task, "during", f"dropout{p}", r, seed), "train", REPLICATION, task, seed,
                               "during", f"dropout{p}", r, knob=float(p), strategy="dropout_regime",
                               params={"high": p, "low": 0.1, "max_ratio": r}))
    return out
