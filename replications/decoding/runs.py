"""Decoding with a key/value cache (issue 56): prefill and cached-decoding speed of the shipped pretrained models
and their pruned variants, measured in paired interleaved rounds beside the bound each speed-up cannot exceed
(``heads decode-speed``). One job per model: nothing trains, nothing is pruned on disk; every variant is pruned in
memory from the shipped model, in the job that times it."""

from heads.sheet import RunSpec, analysis_label

REPLICATION = "decoding"


def runs(settings: dict, seeds: list[int]) -> list[RunSpec]:
    """Per model (its task names it: ``lm`` SmolLM2, ``mt`` the Bergamot translator) and seed (the rounds'
    shuffle seed): one ``decode-speed`` job over every variant, context and batch size."""
    out = []
    for task, m in settings["models"].items():
        for seed in seeds:
            contexts = [c for c in m["contexts"] if c > 0] or [1]  # a translation reads its sources as they are
            out.append(RunSpec(
                label=analysis_label(task, "decoding", seed=seed), command="decode-speed", replication=REPLICATION,
                task=task, seed=seed, variant="decoding", arm=m["model"],
                options={"model": m["model"], "task": True,
                         "variants": [f"{name}={spec}" for name, spec in m["variants"].items()],
                         "contexts": contexts, "batches": list(m["batches"]), "max_tokens": m["max_tokens"],
                         "prefill_max_tokens": m["prefill_max_tokens"], "rounds": settings["rounds"],
                         "new_tokens": m["new_tokens"], "seed": seed, "threads": settings["threads"],
                         "split": "test"}))
    return out
