"""Declaring runs: a run-sheet entry (:class:`RunSpec`), its label, and the entries replications share.

This is what a replication's ``runs.py`` writes with: :class:`RunSpec` and the labels that name a run's folder
(:func:`run_label`, :func:`analysis_label`), the shared baseline (:func:`baseline`), the twice-as-long
yardstick (:func:`longer_baselines`), Michel's masking unit (:func:`masking_runs`) and a pretrained model's
test shards (:func:`shard_config`). Nothing here reads a file or imports anything heavy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# What a sheet entry runs: the ``heads`` command, and the file that marks it done (relative to the label).
COMMANDS = {"train": "summary.json", "prune": "summary.json", "ablate": ".json", "curve": ".json",
            "speed": ".json", "roles": ".json", "redundancy": ".json", "shift": ".json",
            "memory": ".json", "clock": ".json", "trivial": ".json", "decode-speed": ".json", "mask": ".json"}


class SheetError(ValueError):
    """A run sheet that is not consistent; the message names the label and the key."""


def fmt_ratio(ratio: float) -> str:
    """Ratios in labels: at least one decimal (0.0, 0.5, 0.25)."""
    text = repr(float(ratio))
    return f"{float(ratio):.{max(1, len(text.split('.')[1]))}f}"


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run of the DAG.

    ``label`` is also the run's folder (or, for analyses, its JSON file without
    the suffix) under the run tree. ``arm`` names the compared arm within the
    variant for tables and selectors (``oneshot``, ``dropout0.25``, ``lam0.01``)
    and ``knob`` is the number that orders arms (a penalty, a dropout rate);
    both are declared here, never read back from the label. ``paths`` maps a
    config key or command option to a file of another run (``label/name``),
    ``after`` lists the runs this one needs finished.
    """

    label: str
    command: str
    replication: str
    task: str
    seed: int
    variant: str = "baseline"
    arm: str = "none"
    ratio: float = 0.0
    knob: float | None = None
    strategy: str = "none"
    params: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)  # nested config overrides, typed (train.steps: 40)
    options: dict = field(default_factory=dict)  # command options (--batches 4, --test loss)
    paths: dict = field(default_factory=dict)  # key -> "label/relative file" of another run
    after: tuple = ()

    def identity(self) -> dict[str, Any]:
        """What the run records about itself (``run`` in its config, summary or analysis JSON)."""
        return {"label": self.label, "kind": self.kind, "task": self.task, "seed": self.seed, "variant": self.variant,
                "arm": self.arm, "ratio": float(self.ratio), "knob": self.knob,
                "from_run": self.after[0] if self.after else None}

    @property
    def kind(self) -> str:
        """``run`` for a model-making entry, else the analysis (``ablation``, ``curve``, ...)."""
        return "run" if self.command in ("train", "prune") else self.variant

    def done_file(self) -> str:
        """The file (relative to the run tree) whose existence means the entry is finished."""
        suffix = COMMANDS[self.command]
        return f"{self.label}{suffix}" if suffix.startswith(".") else f"{self.label}/{suffix}"


def run_label(task: str, variant: str, arm: str, ratio: float, seed: int) -> str:
    return f"{task}/{variant}/{arm}/{fmt_ratio(ratio)}/seed{seed}"


def analysis_label(task: str, *parts: str, seed: int | None = None) -> str:
    return "/".join([task, "analysis", *parts] + ([f"seed{seed}"] if seed is not None else []))


def layered(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict:
    """Nested config sections: ``top``'s keys over ``base``'s, section by section."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = layered(out[key], value)
        else:
            out[key] = value
    return out


def shard_config(seeds: Sequence[int], seed: int) -> dict:
    """The eval section that makes ``seed`` one disjoint shard of the held-out text (one pretrained model has no
    training seeds: its seeds are shards of the test set, ``eval.shards`` / ``eval.shard``)."""
    return {"eval": {"shards": len(seeds), "shard": list(seeds).index(seed)}}


def baseline(replication: str, task: str, seed: int, config: dict | None = None) -> RunSpec:
    """The full model trained from scratch: one per task and seed, shared by every replication."""
    return RunSpec(label=run_label(task, "baseline", "none", 0.0, seed), command="train", replication=replication,
                   task=task, seed=seed,
                   config=config or {})


def masking_runs(replication: str, task: str, settings: Mapping[str, Any], source: str) -> list[RunSpec]:
    """Michel's unit on a model that ``source`` (a run label) holds: per replicate of the procedure (its own
    slice of the scoring split), ``mask_units`` (query heads and/or key/value groups; default both) masked by
    importance at each of ``mask_ratios``, all evaluated on one common test set (``mask_test_windows``, 0: all);
    the oracle order (greedy by measured cost, re-measured every ``oracle_step``) over ``oracle_units`` on the
    first ``oracle_replicates``, whose job ranks by importance too, on the same few examples. The replicates are
    these claims' seeds, whatever the preset's are."""
    s = settings
    common = {"ratios": list(s["mask_ratios"]), "test_windows": s["mask_test_windows"]}
    out = []
    for arm, replicates, orders, units, windows in (
            ("importance", s["mask_replicates"], ["importance"], list(s.get("mask_units", ["head", "group"])),
             s["mask_score_windows"]),
            ("oracle", s["oracle_replicates"], ["importance", "oracle"], list(s["oracle_units"]),
             s["oracle_score_windows"])):
        for r in range(replicates):
            out.append(RunSpec(label=analysis_label(task, "mask", arm, seed=r), command="mask",
                               replication=replication, task=task, seed=r, variant="mask", arm=arm,
                               options={**common, "units": units, "orders": orders, "seed": r,
                                        "score_windows": windows,
                                        **({"oracle_step": s["oracle_step"]} if arm == "oracle" else {}),
                                        # units every site keeps open, where not the command's 1 (0: a layer's
                                        # whole attention may close, as under multi-query attention)
                                        **({"floor": s["floor"]} if s.get("floor", 1) != 1 else {})},
                               paths={"source": source}, after=(source,)))
    return out


LONGER = "baseline_2x"  # the variant of a baseline trained twice its steps (the convergence precondition's yardstick)


def longer_baselines(replication: str, longer: Mapping[str, Any] | None, seeds: Sequence[int]) -> list[RunSpec]:
    """``longer`` (``{task, factor, seeds: n}``): the baseline of ``task`` trained ``factor`` times its steps on
    the first ``n`` of ``seeds``, or on every seed with ``seeds: all`` (:func:`heads.sheet.assemble.build` sets
    the steps from the baseline's own, the preset's or a user's task config). A baseline is converged when its
    final validation loss is within a stated share of this run's, seed by seed (replications/preconditions.yaml:
    lm-converged); replications declare it alike and share it."""
    if not longer:
        return []
    n = len(seeds) if longer["seeds"] == "all" else int(longer["seeds"])
    if n > len(seeds):
        raise SheetError(f"{replication}: longer_baseline asks for {n} seeds, the replication has {len(seeds)}")
    return [RunSpec(label=run_label(longer["task"], LONGER, "none", 0.0, seed), command="train",
                    replication=replication, task=longer["task"],
                    seed=seed, variant=LONGER, knob=float(longer["factor"])) for seed in list(seeds)[:n]]
