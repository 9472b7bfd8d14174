"""Reports end to end on a synthetic run tree laid out exactly as docs/RUN_LAYOUT.md says: collection (failed runs
kept), every replication's tables and figures, the claims ledger, the verdict rule on constructed cases, and
byte-identical re-rendering."""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from heads.cli import report as report_cli
from heads.events import first_action
from heads.report import RunTree, evaluate, load_all
from heads.report.claims import CSV_COLUMNS
from heads.report.collect import reach_fields, read_json
from heads.report.ledger import merged_environments
from heads.report.render import artefacts, replications, tables
from heads.report.rows import by_seed
from heads.report.rows import frame as tidy_frame
from heads.report.spec import ClaimSpecError, parse_claim

REPLICATIONS = Path(__file__).resolve().parents[1] / "replications"
SEEDS = (0, 1, 2)
LM_SITES = [f"model.layers.{i}.self_attn" for i in range(2)]
MT_SITES = [f"model.encoder.layers.{i}.self_attn" for i in range(2)] + [
    f"model.decoder.layers.{i}.{kind}" for i in range(2) for kind in ("self_attn", "encoder_attn")]
CLS_SITES = [f"bert.encoder.layer.{i}.attention.self" for i in range(6)]
HEADS = 4


# -- the synthetic tree --------------------------------------------------------------------------------
def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _layout(sites: list[str], keep: int = HEADS) -> dict[str, list[int]]:
    return {s: list(range(keep)) for s in sites}


def _metrics(final: float, sec_per_step: float, steps: int = 400, heads: int = 8, tps_factor: float = 1.0,
             diverge_at: int | None = None, tau: float = 60.0) -> list[dict]:
    rows, tokens_per_step = [], 1024
    for step in range(0, steps + 1, 10):
        if diverge_at is not None and step > diverge_at:
            break
        row = {"step": step, "train_seconds": round(step * sec_per_step, 4), "wall": 1.7e9 + step,
               "train_cpu_seconds": round(0.9 * step * sec_per_step, 4),  # a busy machine: CPU < wall
               "tokens": step * tokens_per_step,
               "train_loss": None if step == 0 else final + 3.2 * math.exp(-step / tau),
               "tokens_per_s": None if step == 0 else tps_factor * tokens_per_step / sec_per_step, "lr": 1e-3,
               "peak_mem_mb": 500.0, "flops": 1e6 * step, "heads": heads}
        if step % 50 == 0 or step == steps:
            row["val_loss"] = final + 3.0 * math.exp(-step / tau)
        rows.append(row)
    return rows


def _train_run(root: Path, task: str, group: str, seed: int, *, metric: str, value: float, final: float,
               sec_per_step: float, heads: int, params: int, events: list[dict] = (), diverge_at: int | None = None,
               tps_factor: float = 1.0, heads_initial: int | None = None, sites: list[str] = LM_SITES,
               tau: float = 60.0) -> None:
    folder = root / task / group / f"seed{seed}"
    _write(folder / "config.json", {"task": task, "preset": "tiny", "train": {"seed": seed}})
    _jsonl(folder / "metrics.jsonl", _metrics(final, sec_per_step, heads=heads_initial or heads,
                                              tps_factor=tps_factor, diverge_at=diverge_at, tau=tau))
    _jsonl(folder / "events.jsonl", list(events))
    if diverge_at is not None:
        _write(folder / "summary.json", {"status": "diverged", "task": task, "step": diverge_at + 1,
                                         "message": f"step {diverge_at + 1}: the training loss is nan"})
        return
    evaluation = {"loss": final, metric: value}
    if metric == "perplexity":
        evaluation["bits_per_token"] = final / math.log(2)
    _write(folder / "summary.json", {
        "status": "ok", "task": task, "preset": "tiny", "seed": seed, "strategy": _method(group),
        "metric": metric, "value": value, "eval": evaluation, "final_val_loss": final, "steps": 400,
        "tokens": 400 * 1024, "train_seconds": round(400 * sec_per_step, 4), "flops": 4e8, "heads": heads,
        "params": params, "head_layout": _layout(sites, heads // len(sites)), "flops_per_token": 1e4,
        "warmup_end": first_action(events)})


def _method(group: str) -> str:
    """The registered strategy a synthetic run group stands for (what heads train records as ``strategy``)."""
    variant, arm = group.split("/")[:2]
    if variant == "scratch":
        return "scratch"
    if variant == "l0":
        return "l0"
    if variant == "during":
        return "dropout_regime" if arm.startswith("dropout") else arm
    return "none"


def _posthoc(root: Path, task: str, group: str, seed: int, metric: str, value: float, sites: list[str]) -> None:
    folder = root / task / group / f"seed{seed}"
    layout = _layout(sites, HEADS // 2)
    _write(folder / "config.json", {"model_type": "llama", "head_layout": layout})
    _write(folder / "pruning.json", {"strategy": "posthoc", "params": {"ratio": 0.5},
                                     "removed": {s: [2, 3] for s in sites}})
    _write(folder / "summary.json", {"status": "ok", "task": task, "seed": seed, "strategy": "posthoc",
                                     "metric": metric, "value": value, "eval": {metric: value, "loss": 3.1},
                                     "final_val_loss": None, "heads": sum(len(v) for v in layout.values()),
                                     "head_layout": layout})


def _curve(metric: str, base: float, factors: list[float], higher: bool) -> dict:
    ratios = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625]
    points = []
    for level, (ratio, f) in enumerate(zip(ratios, [1.0, *factors], strict=True)):
        value = base / f if higher else base * f
        points.append({"level": level, "pruned": level, "ratio": ratio, "removed": {}, metric: value,
                       "loss": math.log(base * f)})
    return {"strategy": "iterative", "params": {"step": 0.1}, "metric": metric, "points": points}


def make_tree(root: Path) -> Path:
    """A run tree with three tasks, three seeds, every variant the claims use, one diverged run, one
    unfinished run, and every analysis except mt's pruning curves (a claim must find them missing)."""
    runs = root / "runs"
    for s in SEEDS:
        lm = dict(metric="perplexity", sites=LM_SITES)
        base = 3.0 + 0.01 * s
        _train_run(runs, "lm", "baseline/none/0.0", s, value=math.exp(base), final=base, sec_per_step=0.05,
                   heads=8, params=100_000, **lm)
        if s == 0:  # the convergence yardstick (seed 0): 0.1 lower after twice the steps, so not converged
            _train_run(runs, "lm", "baseline_2x/none/0.0", s, value=math.exp(base - 0.1), final=base - 0.1,
                       sec_per_step=0.05, heads=8, params=100_000, **lm)
        _posthoc(runs, "lm", "posthoc/importance/0.5", s, "perplexity", math.exp(base) * (1.01 + 0.002 * s), LM_SITES)
        _train_run(runs, "lm", "posthoc_ft/importance/0.5", s, value=math.exp(base) * (1.005 + 0.002 * s),
                   final=base + 0.004, sec_per_step=0.04, heads=4, params=80_000, **lm)
        for strategy, factor in (("matched", 1.10), ("uniform", 1.12)):
            _train_run(runs, "lm", f"scratch/{strategy}/0.5", s, value=math.exp(base) * (factor + 0.01 * s),
                       final=base + 0.08, sec_per_step=0.04, heads=4, params=80_000, **lm)
        # the scaling sweep at the preset's size (its baseline the shared one): pruned, fine-tuned, from scratch
        _posthoc(runs, "lm", "size_posthoc/preset/0.5", s, "perplexity", math.exp(base) * (1.02 + 0.002 * s),
                 LM_SITES)
        for variant, factor in (("size_posthoc_ft", 1.006), ("size_scratch", 1.04)):
            _train_run(runs, "lm", f"{variant}/preset/0.5", s, value=math.exp(base) * (factor + 0.003 * s),
                       final=base + 0.01, sec_per_step=0.04, heads=4, params=80_000, **lm)
        _train_run(runs, "lm", "during/oneshot/0.25", s, value=math.exp(base + 0.005), final=base + 0.005,
                   sec_per_step=0.04 + 0.001 * s, heads=6, heads_initial=8, params=90_000, tau=45.0,
                   events=[{"step": 0, "event": "prune", "removed": {LM_SITES[0]: [1, 2]}, "reason": "oneshot",
                            "heads": 6}], **lm)
        _train_run(runs, "lm", "during/curriculum/0.4", s, value=math.exp(base), final=base - 0.003,
                   sec_per_step=0.038, heads=6, params=90_000, diverge_at=120 if s == 1 else None,
                   events=[{"step": 40, "event": "prune", "removed": {LM_SITES[0]: [0, 3]}, "reason": "wave",
                            "heads": 6}], **lm)
        for p, ratio, final in ((0.1, 0.35, base + 0.01), (0.25, 0.2, base), (0.4, 0.1, base + 0.3)):
            _train_run(runs, "lm", f"during/dropout{p}/0.4", s, value=math.exp(final), final=final,
                       sec_per_step=0.05, heads=6, params=90_000, tps_factor=0.9 if p >= 0.25 else 0.97,
                       events=[{"step": 0, "event": "dropout", "attention": p, "residual": 0.0},
                               {"step": 40, "event": "redundancy", "redundancy_ratio": ratio + 0.01 * s,
                                "max_similarity": 0.9 + 0.01 * s, "attention_dropout": p, "threshold": 0.85},
                               {"step": 40, "event": "prune", "removed": {LM_SITES[1]: [0, 3]},
                                "reason": "dropout regime", "heads": 6},
                               {"step": 40, "event": "dropout", "attention": 0.1, "residual": 0.0}], **lm)
        # A3: a grouped-query variant and a narrower model, each pruned post hoc, and every model's redundancy
        for arm, factor, cost in (("base-kv2", 1.01, 0.05 + 0.004 * s), ("narrow-mha", 1.2, 0.08 + 0.003 * s)):
            _train_run(runs, "lm", f"gqa/{arm}/0.0", s, value=math.exp(base) * factor, final=base + 0.01,
                       sec_per_step=0.04, heads=8, params=90_000, **lm)
            _posthoc(runs, "lm", f"posthoc_gqa/{arm}/0.5", s, "perplexity", math.exp(base) * factor * (1 + cost),
                     LM_SITES)
        for arm, (token, mean) in {"base-mha": (0.0, 0.3 + 0.02 * s), "base-kv2": (0.0, 0.1 + 0.01 * s),
                                   "narrow-mha": (0.0, 0.2)}.items():
            _write(runs / "lm" / "analysis" / "redundancy" / arm / f"seed{s}.json", {"rows": [
                {"pooling": "token", "space": "value", "threshold": 0.85, "unit": "head", "redundancy_ratio": token,
                 "max_similarity": 0.5},
                {"pooling": "mean", "space": "value", "threshold": 0.85, "unit": "group" if "kv" in arm else "head",
                 "redundancy_ratio": mean, "max_similarity": 0.95}]})
        # the baseline's redundancy over training: its snapshots and the trained model
        for arm, sim in (("step30", 0.4 + 0.01 * s), ("step100", 0.5), ("final", 0.7 + 0.02 * s)):
            _write(runs / "lm" / "analysis" / "redundancy_at" / arm / f"seed{s}.json", {"rows": [
                {"pooling": "token", "space": "value", "threshold": 0.85, "unit": "head", "redundancy_ratio": 0.0,
                 "max_similarity": sim / 2},
                {"pooling": "mean", "space": "value", "threshold": 0.9, "unit": "head", "redundancy_ratio": 0.0,
                 "max_similarity": sim}]})
        # D7: the one-shot model against the baseline in domain and under two shifts
        shift = {"in_domain": {"dataset": None, "metric": "perplexity", "change": 0.02},
                 "shifted": {"lm_kjv": {"dataset": "lm_kjv", "change": 0.04 + 0.002 * s, "gap": 0.02 + 0.002 * s},
                             "lm_bbe": {"dataset": "lm_bbe", "change": 0.02, "gap": 0.0}}}
        _write(runs / "lm" / "analysis" / "shift" / "oneshot" / f"seed{s}.json", shift)
        # Michel's unit on the pretrained model: query heads and whole groups masked (heads mask)
        _write(runs / "lm" / "analysis" / "mask" / "importance" / f"seed{s}.json", {
            "baseline": {"loss": 3.0, "perplexity": 20.09, "windows": 8, "tokens": 1016},
            "rows": [{"unit": unit, "order": "importance", "ratio": 0.3, "units_closed": 3 if unit == "head" else 1,
                      "heads_closed": 3, "heads": 12, "loss": loss + 0.01 * s, "perplexity": 2.718 ** (loss + 0.01 * s),
                      "delta_loss": loss + 0.01 * s - 3.0, "relative": (loss + 0.01 * s - 3.0) / 3.0,
                      "closed": {}} for unit, loss in (("head", 3.1), ("group", 3.3))]})
        # D7, genres: the baseline pruned by similarity pooled over genres vs stratified, scored per genre
        for arm, worst in (("genre-pooled", 0.12 + 0.01 * s), ("genre-stratified", 0.05)):
            shifted = {"lm_wisdom": {"dataset": "lm_wisdom", "change": worst},
                       "lm_letters": {"dataset": "lm_letters", "change": 0.03}}
            _write(runs / "lm" / "analysis" / "shift" / arm / f"seed{s}.json",
                   {"in_domain": {"change": 0.04}, "shifted": shifted})
        # D7, redundancy by genre: a quarter of the heads alike on the genres pooled, none in every genre
        genre_rows = [{"view": view, "pooling": pooling, "space": "value", "threshold": 0.85, "unit": "head",
                       "redundancy_ratio": ratio, "max_similarity": 0.9,
                       **({"domains": {"lm_wisdom": {"redundancy_ratio": 0.0, "max_similarity": 0.6},
                                       "lm_letters": {"redundancy_ratio": 0.25 + 0.05 * s, "max_similarity": 0.9}}}
                          if view == "stratified" else {})}
                      for pooling in ("token", "mean") for view, ratio in (("stratified", 0.0), ("pooled", 0.25))]
        _write(runs / "lm" / "analysis" / "redundancy_genre" / "genres" / f"seed{s}.json", {"rows": genre_rows})
        # D8: the one-shot model's training step against the baseline's (shapes fix it: every seed alike)
        _write(runs / "lm" / "analysis" / "memory" / "oneshot" / f"seed{s}.json", {"cap_batch": 32, "models": {
            "reference": {"heads": 8, "param_bytes": 4 * 2**20, "optimizer_bytes": 8 * 2**20, "peak_bytes": 80 * 2**20,
                          "largest_batch": 32, "batch_ratio": 1.0, "peak_ratio": 1.0},
            "model": {"heads": 6, "param_bytes": 3.5 * 2**20, "optimizer_bytes": 7 * 2**20, "peak_bytes": 76 * 2**20,
                      "largest_batch": 34, "batch_ratio": 34 / 32, "peak_ratio": 0.95}}})
        # D1, D4: step times of the one-shot model, the baseline and the baseline under dropout, interleaved
        clock = f"lm/analysis/clock/oneshot/seed{s}"
        _write(runs / f"{clock}.json", {"models": {
            "reference": {"heads": 8, "step_s": 0.1, "cpu_step_s": 0.09, "step_ratio": 1.0, "cpu_step_ratio": 1.0},
            "model": {"heads": 6, "step_s": 0.08, "cpu_step_s": 0.06, "step_ratio": 0.8 + 0.01 * s,
                      "cpu_step_ratio": 0.7},
            "dropout": {"heads": 8, "step_s": 0.11, "cpu_step_s": 0.1, "step_ratio": 1.1,
                        "throughput_ratio": 0.9 + 0.01 * s, "cpu_throughput_ratio": 0.95}},
            "run": {"label": clock, "kind": "clock", "task": "lm", "seed": s, "variant": "clock", "arm": "oneshot",
                    "ratio": 0.0, "knob": None, "from_run": f"lm/during/oneshot/0.25/seed{s}"}})
        mt = dict(metric="bleu", sites=MT_SITES)
        bleu = 10.0 + 0.2 * s
        _train_run(runs, "mt", "baseline/none/0.0", s, value=bleu, final=4.0, sec_per_step=0.1, heads=24,
                   params=300_000, **mt)
        _posthoc(runs, "mt", "posthoc/importance/0.5", s, "bleu", bleu * 0.99, MT_SITES)
        # voita2019's control: the baseline fine-tuned as the L0 runs are, without gates (C1-mt-cost's reference)
        _train_run(runs, "mt", "l0_control/none/0.0", s, value=bleu * 1.001, final=4.0, sec_per_step=0.1, heads=24,
                   params=300_000, **mt)
        _train_run(runs, "mt", "scratch/matched/0.5", s, value=bleu - 1.0, final=4.2, sec_per_step=0.08, heads=12,
                   params=250_000, **mt)
        for lam, kept, cost in (("lam0.005", 18, 0.998), ("lam0.01", 12, 0.995)):
            _train_run(runs, "mt", f"l0/{lam}/0.0", s, value=bleu * cost, final=4.01, sec_per_step=0.1, heads=kept,
                       heads_initial=24, params=260_000,
                       events=[{"step": 400, "event": "l0_gates", "gates": {MT_SITES[0]: [1.0, 0.0, 0.7, 0.0]}}],
                       **mt)
            _train_run(runs, "mt", f"scratch/l0{lam}/0.0", s, value=bleu * cost - 0.8, final=4.2, sec_per_step=0.08,
                       heads=kept, params=260_000, **mt)
        _train_run(runs, "cls", "baseline/none/0.0", s, metric="accuracy", value=0.80 + 0.01 * s, final=0.5,
                   sec_per_step=0.2, heads=72, params=22_000_000, sites=CLS_SITES)
        _posthoc(runs, "cls", "posthoc/importance/0.5", s, "accuracy", 0.795 + 0.01 * s, CLS_SITES)
        _analyses(runs, s)
    # one seed only (n = 1) and a run killed before its summary
    _train_run(runs, "lm", "posthoc_ft/importance/0.75", 0, metric="perplexity", value=25.0, final=3.2,
               sec_per_step=0.04, heads=2, params=70_000)
    unfinished = runs / "lm" / "scratch" / "uniform" / "0.75" / "seed0"
    _write(unfinished / "config.json", {"task": "lm"})
    _jsonl(unfinished / "metrics.jsonl", _metrics(3.1, 0.04)[:5])
    _write(runs / "cls" / "analysis" / "speed.json", {"rows": _speed_rows()})
    _write(runs / "lm" / "analysis" / "decoding" / "seed0.json", {"reference": "full", "rows": _decoding_rows()})
    stamp(runs)
    return runs


def _decoding_rows() -> list[dict]:
    """``heads decode-speed`` rows: the unpruned model and one with a third of its heads and groups gone, at
    prefill and decode, every round's seconds in ``times``."""
    out = []
    for model, share, gain in (("full", 0.0, 1.0), ("kv1of3", 1 / 3, 1.1)):
        for phase, bound in (("prefill", 1.12), ("decode", 1.08)):
            times = [0.5 / gain * (1 + 0.01 * (i % 3)) for i in range(5)]
            out.append({"model": model, "phase": phase, "context": 128, "batch": 1, "heads": 9 if not share else 6,
                        "kv_heads": 3 if not share else 2, "share": share, "kv_share": share, "rounds": 5,
                        "times": times, "cpu_times": times, "tokens_per_s": 16 / times[0], "speedup": gain,
                        "ci_low": gain - 0.02, "ci_high": gain + 0.02, "bound": bound if share else 1.0,
                        "cache_bytes": 2**20 * (1 - share), "cache_bytes_per_token": 8192 * (1 - share),
                        "params": 1000, "weight_bytes": 4000, "decode_weight_bytes": 4000,
                        "flops": 1e9 if phase == "prefill" else None})
    return out


def _knob(arm: str) -> float | None:
    """The number this synthetic sheet declares an arm with (lam0.01 -> 0.01, dropout0.25 -> 0.25, step100 -> 100)."""
    for prefix in ("l0lam", "lam", "dropout", "step", "base-kv", "narrow-kv"):
        if arm.startswith(prefix):
            return float(arm[len(prefix):])
    return None


def stamp(runs: Path) -> None:
    """Record in every file of the synthetic tree what it is, as the workflow's run sheet does (``run``: label,
    kind, task, seed, variant, arm, ratio, knob, from_run); the report reads only that, never the folder names."""
    for path in sorted(runs.rglob("*.json")):
        rel = path.relative_to(runs).with_suffix("").parts
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue  # a corrupt file stays as it is
        if not isinstance(data, dict) or "run" in data:
            continue
        if rel[1] == "analysis":
            kind, seed = rel[2], int(rel[-1][4:]) if rel[-1].startswith("seed") else 0
            arm = rel[3] if len(rel) == 5 else "none"
            ident = {"label": "/".join(rel), "kind": kind, "task": rel[0], "seed": seed, "variant": kind,
                     "arm": arm, "ratio": 0.0, "knob": _knob(arm), "from_run": None}
        elif path.name in ("summary.json", "config.json") and len(rel) == 6:
            task, variant, arm, ratio, seed = rel[0], rel[1], rel[2], rel[3], int(rel[4][4:])
            if "model_type" in data:
                continue  # a pruned model's own config
            source = {"posthoc": f"{task}/baseline/none/0.0/seed{seed}",
                      "posthoc_gqa": f"{task}/gqa/{arm}/0.0/seed{seed}"}.get(variant)
            source = f"{task}/l0/{arm[2:]}/0.0/seed{seed}" if arm.startswith("l0lam") else source
            if variant in ("size_posthoc", "size_posthoc_ft", "size_scratch"):  # the scaling sweep's chain
                source = (f"{task}/baseline/none/0.0/seed{seed}" if variant == "size_posthoc"
                          else f"{task}/size_posthoc/{arm}/{ratio}/seed{seed}")
            ident = {"label": "/".join(rel[:5]), "kind": "run", "task": task, "seed": seed, "variant": variant,
                     "arm": arm, "ratio": float(ratio), "knob": _knob(arm), "from_run": source}
        else:
            continue
        data["run"] = ident
        _write(path, data)


def _analyses(runs: Path, s: int) -> None:
    """What the DAG's analysis rules write: ablations and curves on mt and cls, snapshots of mt, roles of mt."""
    for task, sites in (("mt", MT_SITES), ("cls", CLS_SITES)):
        heads = [{"site": site, "position": h, "head": h, "delta_loss": 0.002 * h - 0.001 + 0.0001 * s,
                  "delta_accuracy": -0.001 * h, "p_value": 0.01 if (h == 3 and i == 0) else 0.4,
                  "significant": h == 3 and i == 0} for i, site in enumerate(sites) for h in range(HEADS)]
        abo = {}
        for site in sites:
            rel = 0.3 if site.endswith("encoder_attn") else 0.02 + 0.005 * s
            abo[site] = {"site": site, "best_head": 1, "loss": 3.0 * (1 + rel), "baseline_loss": 3.0,
                         "accuracy": 0.3, "baseline_accuracy": 0.32}
        _write(runs / task / "analysis" / "ablation" / f"seed{s}.json", {
            "baseline_loss": 3.0, "baseline_accuracy": 0.32, "examples": 64,
            "test": {"mt": "bleu", "cls": "accuracy"}.get(task, "loss"), "heads": heads,
            "all_but_one": abo})
    curves = {"importance": [1.01, 1.02, 1.05, 1.10, 1.30], "random": [1.05, 1.15, 1.30, 1.50, 1.90],
              "similarity": [1.03, 1.08, 1.18, 1.30, 1.60]}
    for task, metric, base in (("mt", "bleu", 10.0 + s), ("cls", "accuracy", 0.8 + 0.01 * s)):
        for scorer, factors in curves.items():
            if (task, scorer) != ("mt", "similarity"):  # left out: its claim must say what is missing
                _write(runs / task / "analysis" / "curve" / scorer / f"seed{s}.json",
                       _curve(metric, base, [1 + (f - 1) / 4 for f in factors] if task == "cls" else factors, True))
    _write(runs / "mt" / "analysis" / "curve_at" / "step100" / f"seed{s}.json",
           _curve("bleu", 3.0, [1.1, 1.25, 1.4, 1.6 + 0.01 * s, 1.9], True))
    _write(runs / "mt" / "analysis" / "curve_at" / "step250" / f"seed{s}.json",
           _curve("bleu", 10.0 + s, [1.01, 1.02, 1.05, 1.10 + 0.01 * s, 1.30], True))
    rows = [{"site": site, "label": f"x{i}", "kind": "self", "layer": 0, "head": h,
             "confidence": (0.7 if h < 2 else 0.4) + 0.01 * s, "positional": 0.5 if h < 2 else 0.2,
             "previous": 0.1, "next": 0.1, "is_positional": False, "kept": h < 2}
            for i, site in enumerate(MT_SITES) for h in range(HEADS)]
    _write(runs / "mt" / "analysis" / "roles" / "lam0.01" / f"seed{s}.json",
           {"source": "x", "heads": rows, "summary": {"kept": {}, "pruned": {}}})
    _write(runs / "cls" / "analysis" / "trivial" / f"seed{s}.json",
           {"task": "cls", "baselines": {"word_overlap": {"accuracy": 0.6 + 0.02 * s, "examples": 400}}})


def _speed_rows() -> list[dict]:
    """``heads speed`` rows: one per (ratio, batch), every timed repeat in ``times``."""
    rows = []
    for batch, eps in ((1, 100.0), (32, 1000.0)):
        for ratio, gain in ((0.0, 1.0), (0.25, 1.01), (0.5, 1.02 if batch == 1 else 1.17)):
            times = [batch * 4 / (eps * gain * (1 + 0.01 * rep)) for rep in range(5)]
            rows.append({"ratio": ratio, "batch": batch, "examples": batch * 4, "seconds": sorted(times)[2],
                         "examples_per_s": batch * 4 / sorted(times)[2], "times": times, "heads": 72,
                         "params": 22_000_000, "speedup": gain, "cpu_speedup": gain})
    return rows


@pytest.fixture(scope="module")
def tree_root(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("report"))


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="heads")
    report_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _bytes(folder: Path, suffixes=(".csv", ".md")) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in suffixes}


# -- collection ----------------------------------------------------------------------------------------
def test_collect_keeps_failed_runs_and_reads_every_kind_of_folder(tree_root):
    tree = RunTree(tree_root)
    frame = tidy_frame(tree)
    folders = {p.parent for p in tree_root.glob("*/*/*/*/seed*/*") if "analysis" not in p.parts}
    assert len(frame) == len(folders)
    assert list(frame.columns[:8]) == ["task", "variant", "arm", "ratio", "seed", "status", "failed", "message"]
    diverged = frame[frame.status == "diverged"]
    assert len(diverged) == 1 and diverged.iloc[0].arm == "curriculum" and bool(diverged.iloc[0].failed)
    assert "nan" in diverged.iloc[0].message
    unfinished = frame[frame.status == "incomplete"]
    assert len(unfinished) == 1 and unfinished.iloc[0].ratio == 0.75 and bool(unfinished.iloc[0].failed)
    post = frame[(frame.task == "lm") & (frame.variant == "posthoc")].sort_values("seed")
    assert post.status.tolist() == ["ok"] * 3 and post.heads.tolist() == [4.0] * 3
    assert post.value.iloc[0] == pytest.approx(math.exp(3.0) * 1.01)
    drop = frame[frame.arm == "dropout0.25"].sort_values("seed")
    assert drop.redundancy_ratio.tolist() == pytest.approx([0.2, 0.21, 0.22])
    assert drop.attention_dropout.tolist() == [0.25] * 3
    l0 = frame[(frame.variant == "l0") & (frame.arm == "lam0.01")]
    assert l0.heads_removed_share.tolist() == pytest.approx([0.5] * 3)


def test_time_to_target_uses_the_baseline_median(tree_root):
    tree = RunTree(tree_root)
    base = tree.select("lm", "baseline", "none", 0.0)
    target = 3.01 * 1.01
    assert tree.baseline_target("lm") == pytest.approx(target)
    for run in base:
        first = next(m for m in run.metrics if m.get("val_loss") is not None and m["val_loss"] <= target)
        assert run.record["time_to_target"] == first["train_seconds"]
        assert run.record["steps_to_target"] == first["step"] and run.record["reached"] is True
    # a stricter target nobody reaches: the claim falls back to total time and says so
    claim = parse_claim({"id": "T", "text": "t", "task": "lm", "kind": "value", "direction": "less",
                         "a": {"variant": "baseline", "arm": "none", "ratio": 0.0, "field": "time_to_target",
                               "target": {"tol": -0.5}}}, "x", "test")
    result = evaluate(claim, tree)
    assert result.estimate.mean == pytest.approx(20.0) and "not reached by 3/3" in result.note


# -- rendering -----------------------------------------------------------------------------------------
NAMES = replications(REPLICATIONS)


@pytest.mark.parametrize("name", NAMES)
def test_report_renders_every_table_and_figure_identically_twice(tree_root, tmp_path, name, capsys):
    out = tmp_path / name
    assert _cli(["report", "--runs", str(tree_root), "--replication", name, "--out", str(out),
                 "--replications", str(REPLICATIONS)]) == 0
    printed = capsys.readouterr().out.split()
    kinds = artefacts(name, REPLICATIONS)
    expected = [out / f"{t}{ext}" for t in kinds["tables"] for ext in (".csv", ".md")]
    expected += [out / f"{f}.png" for f in kinds["figures"]]
    expected += [out / f for f in ("claims.md", "claims.csv", "claims.json", "baselines.csv", "baselines.md",
                                   "environments.json")]
    assert sorted(printed) == sorted(str(p) for p in expected)
    for path in expected:
        assert path.is_file() and path.stat().st_size > 0, path
    for fig in kinds["figures"]:
        assert (out / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for table in kinds["tables"]:
        rows = list(csv.reader((out / f"{table}.csv").open()))
        assert len(rows) > 1, f"{name}/{table} is empty on a tree that has its data"
    first = _bytes(out, (".csv", ".md", ".png"))
    assert _cli(["report", "--runs", str(tree_root), "--replication", name, "--out", str(out),
                 "--replications", str(REPLICATIONS)]) == 0
    assert _bytes(out, (".csv", ".md", ".png")) == first


def test_tasks_keep_other_replications_runs_out_of_the_tables(tree_root, tmp_path, capsys):
    # the workflow renders training_time from lm alone: the cls and mt baselines (another replication's
    # runs, which may or may not be finished when it renders) must not appear, whatever else the tree holds
    whole, lm = tmp_path / "whole", tmp_path / "lm"
    for out, extra in ((whole, []), (lm, ["--tasks", "lm,nope"])):
        assert _cli(["report", "--runs", str(tree_root), "--replication", "training_time", "--only", "runs",
                     "--out", str(out), *extra]) == 0
    assert "no runs or analyses of task 'nope'" in capsys.readouterr().err
    def tasks(out):
        return {r["task"] for r in csv.DictReader((out / "runs.csv").open())}

    assert tasks(whole) == {"lm", "mt", "cls"} and tasks(lm) == {"lm"}
    assert RunTree(tree_root, tasks=["mt"]).tasks == ["mt"]
    with pytest.raises(SystemExit, match="names no task"):
        _cli(["report", "--runs", str(tree_root), "--replication", "training_time", "--out", str(lm), "--tasks", ","])


def test_figures_only_and_an_empty_tree(tree_root, tmp_path, capsys):
    out = tmp_path / "fig"
    (tmp_path / "nothing").mkdir()  # a tree with no run yet: an error, not empty figures that read as results
    with pytest.raises(SystemExit, match="an empty run tree"):
        _cli(["report", "--runs", str(tmp_path / "nothing"), "--replication", "training_time", "--out", str(out),
              "--figures-only"])
    assert not out.exists()
    assert _cli(["report", "--runs", str(tree_root), "--replication", "training_time", "--out", str(out),
                 "--figures-only"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{f}.png" for f in artefacts("training_time", REPLICATIONS)["figures"])
    with pytest.raises(SystemExit, match="unknown replication"):
        _cli(["report", "--runs", str(tmp_path), "--replication", "nope", "--out", str(out)])
    with pytest.raises(SystemExit, match="no such folder"):  # a mistyped tree is not an empty one
        _cli(["report", "--runs", str(tmp_path / "nowhere"), "--replication", "training_time", "--out", str(out)])


def test_tables_mark_significance_and_count_failures(tree_root, tmp_path):
    tree = RunTree(tree_root)
    out = tmp_path / "m"
    for name in artefacts("michel2019", REPLICATIONS)["tables"]:
        tables("michel2019", tree, REPLICATIONS)(name).write(out, name)
    rows = list(csv.DictReader((out / "ablation.csv").open()))
    starred = [(r["task"], r["label"], r["head"]) for r in rows if r["significant"] == "*"]
    assert starred == [("cls", "enc0.self", "3"), ("mt", "enc0.self", "3")]
    assert all(r["significant_seeds"] in ("0/3", "3/3") for r in rows)
    abo = {(r["task"], r["label"]): r for r in csv.DictReader((out / "all_but_one.csv").open())}
    assert float(abo[("mt", "dec1.cross")]["relative_delta"]) == pytest.approx(0.3)
    out = tmp_path / "t"
    for name in artefacts("training_time", REPLICATIONS)["tables"]:
        tables("training_time", tree, REPLICATIONS)(name).write(out, name)
    runs = {r["arm"] + r["ratio"]: r for r in csv.DictReader((out / "runs.csv").open())}
    assert (runs["curriculum0.400"]["n_ok"], runs["curriculum0.400"]["n_failed"]) == ("2", "1")
    assert float(runs["oneshot0.250"]["time_ratio"]) < 1
    redundancy = {r["arm"]: r for r in csv.DictReader((out / "redundancy.csv").open())}
    assert float(redundancy["dropout0.25"]["max_similarity"]) == pytest.approx(0.91)


# -- the claims ledger ---------------------------------------------------------------------------------
def test_claims_ledger(tree_root, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out)]) == 0
    assert f"{out / 'CLAIMS.md'}" in capsys.readouterr().out
    with (out / "claims.csv").open() as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, r, strict=True)) for r in reader]
    assert header[:len(CSV_COLUMNS)] == CSV_COLUMNS
    ids = [c.id for c in load_all(REPLICATIONS)]
    assert [r["claim"] for r in rows] == ids and len(ids) == len(set(ids))
    verdict = {r["claim"]: r for r in rows}
    for claim in ("A1-mt", "A2-mt", "B3-mt-random", "B4-mt", "B5-cls", "B5-cls-gain", "C1-mt-cost",
                  "C2-mt-confidence", "D4-lm-redundancy", "D5-lm"):
        assert verdict[claim]["verdict"] == "supported", (claim, verdict[claim])
        assert verdict[claim]["precondition"].startswith(("met: ", "none needed")), verdict[claim]
        assert float(verdict[claim]["p_value"]) < 0.025 and "Student-t" in verdict[claim]["method"]
        # each replication's tests are one family (Holm): the adjusted p carries the verdict
        assert float(verdict[claim]["p_value"]) <= float(verdict[claim]["p_adjusted"]) < 0.025
    # the synthetic classifier's validation loss still falls: no claim on a trained classifier applies
    for claim in ("B1-cls", "B3-cls-random", "B3-cls-removable"):
        row = verdict[claim]
        assert row["verdict"] == "not tested at this scale" and row["p_value"] == row["p_adjusted"] == ""
        assert row["precondition"].startswith("not met: classifier baseline's projected further fall"), row
    # the source's caveat puts the speed claims at 100 M parameters and above
    for claim in ("D1-lm", "D1-lm-cpu", "D1-lm-interleaved", "D1-lm-interleaved-cpu", "D3-lm-speedup", "D4-lm-speedup",
                  "D6-lm"):
        row = verdict[claim]
        assert row["verdict"] == "not tested at this scale", (claim, row)
        assert "not met: parameters of the LM baseline: 1e+05 on every seed, needs >= 1e+08" in row["precondition"]
    assert "equivalence" in verdict["C1-mt-cost"]["method"] and "within" in verdict["C1-mt-cost"]["condition"]
    # the synthetic LM baseline trained twice as long ends 0.1 lower (3.4 %): no claim on trained LMs applies
    for claim in ("A1-lm", "A1-lm-30", "A2-lm", "A2-lm-ft", "A2-lm-uniform", "A3-gqa-redundancy", "A3-gqa-cost",
                  "A3-size", "D2-lm", "D2-lm-keep", "D3-lm-loss", "D4-lm-collapse", "D7-lm-shift", "D7-lm-shift-kjv"):
        row = verdict[claim]
        assert row["verdict"] == "not tested at this scale", (claim, row)
        assert row["precondition"].startswith("not met: LM baseline's final validation loss above the same "
                                              "model's trained twice as long (relative): 0.03448 (one seed), "
                                              "needs <= 0.02 (measured on seed 0 only)"), row
        assert row["effect"] or claim in ("D2-lm", "A1-lm-30")  # still shown (the tree has no such arm)
    for claim in ("B3-mt-removable", "B3-cls-removable"):  # the synthetic curves step by 12.5 %, not 5 %
        assert verdict[claim]["verdict"] == "not tested at this scale"
        assert "importance curve: 0.125 on every seed, needs <= 0.06" in verdict[claim]["precondition"]
    assert verdict["B6-mt"]["verdict"] == "not tested at this scale"
    assert "BLEU of the first training snapshot: 3 on every seed" in verdict["B6-mt"]["precondition"]
    # every seed gave the same value: no spread, no verdict
    for claim in ("C1-mt-heads", "C2-mt-positional", "C3-mt", "D4-lm-throughput"):
        assert verdict[claim]["verdict"] == "inconclusive" and "no spread" in verdict[claim]["note"], claim
        assert verdict[claim]["p_value"] == ""
    # ... unless the value is a share of units (heads, sites) every seed counted alike: the exact binomial over
    # one seed's units decides (here with too few units to clear the threshold)
    for claim in ("B1-mt", "B2-mt"):  # fewer units: the exact interval still reaches the threshold
        assert verdict[claim]["verdict"] == "inconclusive" and "exact interval" in verdict[claim]["note"], claim
    assert verdict["B5-cls"]["n_seeds"] == "5" and "timed repeats" in verdict["B5-cls"]["note"]
    assert verdict["B5-cls"]["note"].count("n counts timed repeats") == 1
    assert verdict["D3-lm-time"]["verdict"] == "failed" and "diverged" in verdict["D3-lm-time"]["note"]
    assert verdict["D3-lm-time"]["n_seeds"] == "2"
    assert verdict["B3-mt-similarity"]["verdict"] == "inconclusive"
    assert "missing inputs: mt: no analysis/curve/similarity/" in verdict["B3-mt-similarity"]["note"]
    assert verdict["D7"]["verdict"] == "not tested at this scale" and verdict["D7"]["note"]
    # genres: the worst genre's cost, pooled minus stratified, is measured (0.13 - 0.05 on average)
    assert verdict["D7-lm-genre"]["verdict"] == "not tested at this scale"  # the synthetic LM has not converged
    assert float(verdict["D7-lm-genre"]["effect"]) == pytest.approx(0.08)
    assert verdict["D8-lm-batch"]["verdict"] == "supported" and verdict["D8-lm-batch"]["effect"] == "1.0625"
    assert float(verdict["D1-lm"]["ci_low"]) <= float(verdict["D1-lm"]["effect"]) <= float(verdict["D1-lm"]["ci_high"])
    md = (out / "CLAIMS.md").read_text()
    assert all(f"| {i} |" in md for i in ids)
    first = _bytes(out)
    _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out)])
    assert _bytes(out) == first


def test_whole_ledger_merges_the_replications_own_and_says_which_have_not_run(tree_root, tmp_path, capsys):
    """Replications rendered apart (as the small scale runs them, one a day) merge into the same ledger,
    byte for byte, that evaluating every claim on the whole tree gives."""
    whole = tmp_path / "whole"
    _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(whole)])
    names = [n for n in replications(REPLICATIONS) if (REPLICATIONS / n / "claims.yaml").exists()]
    for name in names:
        assert _cli(["report", "--runs", str(tree_root), "--replication", name, "--replications", str(REPLICATIONS),
                     "--only", "claims", "--out", str(tmp_path / name)]) == 0
        assert {"claims.md", "claims.csv", "baselines.csv", "environments.json"} <= {
            p.name for p in (tmp_path / name).iterdir()}
    merged = tmp_path / "merged"
    ledgers = [str(tmp_path / n / "claims.csv") for n in names]
    assert _cli(["claims", "--ledgers", *ledgers, "--replications", str(REPLICATIONS), "--out", str(merged)]) == 0
    assert _bytes(merged) == _bytes(whole)
    # merged from each replication's claims.json (every number at full precision), which it writes in turn
    assert all((tmp_path / n / "claims.json").is_file() for n in names)
    assert (merged / "claims.json").read_bytes() == (whole / "claims.json").read_bytes()
    # environments: a record two replications read (a shared baseline) counts once; a mix is said
    for name, threads in ((names[0], 1), (names[1], 2)):
        (tmp_path / name / "environments.json").write_text(json.dumps({"records": {
            "lm/baseline/none/0.0/seed0": {"threads": 1}, f"{name}/own": {"threads": threads}}}))
    assert merged_environments([tmp_path / n for n in names[:2]]) == (
        "3 records from different environments: threads 1 (2) vs 2 (1)")

    # one replication not run yet: its claims stay in the ledger, "not run yet" (not inconclusive: nothing was
    # tested), saying so, and the page counts and explains them apart
    capsys.readouterr()
    part = tmp_path / "part"
    assert _cli(["claims", "--ledgers", *ledgers[1:], "--replications", str(REPLICATIONS), "--out", str(part)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((part / "claims.csv").open())}
    assert [r for r in rows] == [c.id for c in load_all(REPLICATIONS)]
    left = [c for c in load_all(REPLICATIONS, [names[0]]) if not c.not_tested]
    assert left and all(rows[c.id]["verdict"] == "not run yet" and f"`snakemake {names[0]}`, has not run"
                        in rows[c.id]["note"] for c in left)
    page = (part / "CLAIMS.md").read_text()
    assert f"not run yet: {len(left)}" in page.splitlines()[2] and "*not run yet*: the claim's replication" in page

    # a ledger written before a claim was declared: merged, but without that claim's row
    old = tmp_path / "old" / "claims.csv"
    old.parent.mkdir()
    lines = (tmp_path / names[0] / "claims.csv").read_text().splitlines(keepends=True)
    old.write_text("".join(line for line in lines if not line.startswith(left[0].id + ",")))
    for extra in ("baselines.csv", "environments.json"):
        shutil.copy(tmp_path / names[0] / extra, old.parent / extra)
    assert _cli(["claims", "--ledgers", str(old), *ledgers[1:], "--replications", str(REPLICATIONS),
                 "--out", str(part)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((part / "claims.csv").open())}
    assert rows[left[0].id]["verdict"] == "not run yet" and "predates this claim" in rows[left[0].id]["note"]

    # a replication that does not run at this preset (its settings are null there): not run, saying why
    assert _cli(["claims", "--ledgers", *ledgers, "--replications", str(REPLICATIONS), "--preset", "tiny",
                 "--out", str(part)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((part / "claims.csv").open())}
    pretrained = [c.id for c in load_all(REPLICATIONS, ["pretrained"])]
    assert "pretrained" in names and pretrained
    whole_rows = {r["claim"]: r["verdict"] for r in csv.DictReader((merged / "claims.csv").open())}
    assert all(rows[i]["verdict"] == whole_rows[i] for i in pretrained)  # its ledger is given: it is merged
    assert _cli(["claims", "--ledgers", *[x for x in ledgers if "pretrained" not in x], "--replications",
                 str(REPLICATIONS), "--preset", "tiny", "--out", str(part)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((part / "claims.csv").open())}
    assert all(rows[i]["verdict"] == "not run at this preset" and rows[i]["note"] ==
               "replication 'pretrained' does not run at preset 'tiny' (its settings.yaml sets it to null)"
               for i in pretrained)
    page = (part / "CLAIMS.md").read_text()
    # counted apart from "not tested at this scale" (the models measured and missed a precondition), and the
    # engineering claims (speed, time, memory, bytes) counted apart from the claims about what heads do
    assert f"not run at this preset: {len(pretrained)}" in page.splitlines()[2]
    assert "*not run at this preset*: the claim's replication does not run" in page
    engineering = [c.id for c in load_all(REPLICATIONS) if c.about == "engineering"]
    assert engineering and f"Of these, {len(engineering)} are engineering claims" in page

    # a ledger judged before the p_adjusted column (and before claims.json): refused, not passed off as current
    older = tmp_path / "older" / "claims.csv"
    older.parent.mkdir()
    with (tmp_path / names[0] / "claims.csv").open(newline="") as f:
        table = list(csv.reader(f))
    cut = table[0].index("p_adjusted")
    with older.open("w", newline="") as f:
        csv.writer(f).writerows([row[:cut] + row[cut + 1:] for row in table])
    with pytest.raises(SystemExit, match="older/claims.csv: .*no column p_adjusted.*re-render it"):
        _cli(["claims", "--ledgers", str(older), *ledgers[1:], "--replications", str(REPLICATIONS), "--out", str(part)])
    shutil.copy(tmp_path / names[0] / "claims.csv", older)  # its CSV alone, with every column: merged from the text
    assert _cli(["claims", "--ledgers", str(older), *ledgers[1:], "--replications", str(REPLICATIONS),
                 "--out", str(part)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((part / "claims.csv").open())}
    assert all(rows[c.id]["verdict"] == whole_rows[c.id] for c in load_all(REPLICATIONS, [names[0]]))

    # a damaged claims.json is one line naming it, not a traceback
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / names[0], broken)
    good = json.loads((broken / "claims.json").read_text())
    assert good["format"] == 1 and "NaN" not in (broken / "claims.json").read_text()  # strict JSON
    damaged = {"format": 1, "results": [{"claim": left[0].id, "verdict": "supported"}]}
    later = {**good, "format": 2}
    # the CSV beside replaced since the render: the two files disagree, and the merge says so
    swapped = {**good, "results": [{**good["results"][0], "verdict": "failed"}, *good["results"][1:]]}
    for doc, message in ((damaged, r"not a ledger written by heads \(KeyError"), (later, "format 2, not 1"),
                         (swapped, "differ from claims.csv beside it")):
        (broken / "claims.json").write_text(json.dumps(doc))
        with pytest.raises(SystemExit, match=f"broken/claims.json: .*{message}"):
            _cli(["claims", "--ledgers", str(broken / "claims.csv"), "--replications", str(REPLICATIONS),
                  "--out", str(part)])

    with pytest.raises(SystemExit, match="is in both"):
        _cli(["claims", "--ledgers", ledgers[0], ledgers[0], "--replications", str(REPLICATIONS), "--out", str(part)])
    with pytest.raises(SystemExit, match="no such file"):
        _cli(["claims", "--ledgers", str(tmp_path / "nope.csv"), "--replications", str(REPLICATIONS),
              "--out", str(part)])
    stray = tmp_path / "stray" / "claims.csv"
    stray.parent.mkdir()
    stray.write_text((tmp_path / names[0] / "claims.csv").read_text().replace(left[0].id + ",", "Z9-made-up,", 1))
    with pytest.raises(SystemExit, match="Z9-made-up.*declared by no"):
        _cli(["claims", "--ledgers", str(stray), "--replications", str(REPLICATIONS), "--out", str(part)])


def _claim(**kw):
    raw = {"id": "X", "text": "x", "task": "lm", "direction": "greater", "tolerance": 0.0, **kw}
    return parse_claim(raw, "test", "test")


BASE = {"variant": "baseline", "arm": "none", "ratio": 0.0}


def test_holm_makes_a_verdict_its_own_test_carried_inconclusive_and_says_why():
    """Each replication's tested claims are one family: a p under 2.5 % alone but not after Holm's adjustment
    leaves the verdict inconclusive; another replication's tests are not in the family; untested claims (no p)
    are not counted."""
    from heads.report.claims import ClaimResult, adjust

    def result(cid: str, replication: str, verdict: str, p: float | None) -> ClaimResult:
        return ClaimResult(replace(_claim(id=cid, kind="value", a={**BASE, "field": "value"}),
                                   replication=replication), verdict, p_value=p, note="n")

    family = [result("A", "r", "supported", 0.001), result("B", "r", "not supported", 0.02),
              result("C", "r", "inconclusive", 0.3), result("D", "r", "not tested at this scale", None),
              result("E", "other", "supported", 0.02)]
    adjust(family)
    a, b, c, d, e = family
    assert (a.verdict, a.p_adjusted) == ("supported", pytest.approx(0.003))
    assert b.verdict == "inconclusive" and b.p_adjusted == pytest.approx(0.04)
    assert b.note.startswith("not supported by its own test (p 0.02) but not after Holm's adjustment over the 3 "
                             "tests of replication r (adjusted p 0.04 >= 0.025)") and b.note.endswith("; n")
    assert c.p_adjusted == pytest.approx(0.3) and d.p_adjusted is None
    assert (e.verdict, e.p_adjusted) == ("supported", pytest.approx(0.02))  # a family of one


def test_a_claim_on_a_task_the_preset_does_not_run_is_not_run_at_this_preset(tmp_path):
    """A replication whose runs at a preset are on other tasks only (the GPU visit: translation) made no model
    that could show a classifier's claim: *not run at this preset*, its note naming the task, neither a run gone
    missing (*inconclusive*) nor a model too small for it (*not tested at this scale*). Its preconditions are not
    read, even one on a task that was run and fails it: the claim's own models, on which it would hold, were never
    made."""
    root = make_tree(tmp_path)
    claim = _claim(task="cls", kind="value", a={**BASE, "field": "value"})
    result = evaluate(claim, RunTree(root, tasks=["lm"]))
    assert (result.verdict, result.precondition, result.estimate.n, result.p_value) == (
        "not run at this preset", "not run", 0, None)
    assert result.note == ("this preset runs no 'cls' models for test (its runs are on ['lm']), so nothing was "
                           "measured")
    assert evaluate(claim, RunTree(root)).verdict != "not run at this preset"  # every task read: measured
    # lm-converged fails on the lm runs read (3.4 % from converged), yet the claim's cls models were never made
    lm = {c.id: c for c in load_all(REPLICATIONS)}["A2-lm-uniform"]
    assert evaluate(lm, RunTree(root, tasks=["lm"])).verdict == "not tested at this scale"
    off = evaluate(replace(lm, task="cls"), RunTree(root, tasks=["lm"]))
    assert (off.verdict, off.precondition) == ("not run at this preset", "not run")
    assert off.note.startswith("this preset runs no 'cls' models for overprovisioning (its runs are on ['lm'])")


def test_a_stated_choice_is_said_in_the_ledger_note(tmp_path):
    tree = RunTree(make_tree(tmp_path))
    claim = _claim(kind="value", a={**BASE, "field": "final_val_loss"}, choice="  a 1 % band, ours  ")
    assert claim.choice == "a 1 % band, ours"
    assert evaluate(claim, tree).note.endswith("our choice: a 1 % band, ours")


def test_a_run_stopped_by_its_time_limit_is_said_in_its_tasks_claims(tmp_path):
    """train.time_limit ends a run short of its steps (a GPU visit's baselines on a slow device): every claim on
    that task says which runs trained less than their config says; another task's claims do not."""
    root = make_tree(tmp_path)
    path = root / "lm/baseline/none/0.0/seed1/summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "steps": 350,
                                "stopped": {"by": "train.time_limit", "time_limit": 270.0, "of_steps": 400}}))
    tree = RunTree(root)
    note = "stopped by train.time_limit short of their steps: lm/baseline/none/0.0/seed1 after 350 of 400"
    assert note in evaluate(_claim(kind="value", a={**BASE, "field": "final_val_loss"}), tree).note
    assert "time_limit" not in evaluate(_claim(kind="value", task="mt", a={**BASE, "field": "value"}), tree).note


@pytest.mark.parametrize(("spec", "expected", "note"), [
    # a clear effect on the claimed side
    ({"kind": "value", "a": {**BASE, "field": "final_val_loss"}}, "supported", ""),
    # clearly the other way
    ({"kind": "value", "a": {**BASE, "field": "final_val_loss"}, "direction": "less"}, "not supported", ""),
    # the threshold inside the interval (seed values 3.00, 3.01, 3.02)
    ({"kind": "value", "a": {**BASE, "field": "final_val_loss"}, "tolerance": 3.01}, "inconclusive", ""),
    # one seed only
    ({"kind": "value", "a": {"variant": "posthoc_ft", "arm": "importance", "ratio": 0.75, "field": "value"}},
     "inconclusive", "one seed only"),
    # inputs missing
    ({"kind": "paired_difference", "a": {"variant": "during", "arm": "early", "ratio": 0.5, "field": "value"},
      "b": {**BASE, "field": "value"}}, "inconclusive", "missing inputs: no runs under lm/during/early/0.5"),
    # a diverged run: a failed row, with the effect over the other seeds
    ({"kind": "paired_difference", "a": {"variant": "during", "arm": "curriculum",
                                         "field": "final_val_loss"}, "b": {**BASE, "field": "final_val_loss"},
      "direction": "less"}, "failed", "lm/during/curriculum/0.4/seed1 diverged"),
    # ambiguous glob without pick
    ({"kind": "value", "task": "mt", "a": {"variant": "l0", "arm": "lam*", "field": "heads"}}, "inconclusive",
     "2 run groups match"),
    # the same glob with pick
    ({"kind": "value", "task": "mt", "a": {"variant": "l0", "arm": "lam*", "pick": {"arm": "min"},
                                           "field": "heads"}, "tolerance": 17.5},
     "inconclusive", "picked l0/lam0.005/0.0"),  # and every seed kept 18 heads: no spread, no verdict
    # a ratio claim below 1, its pruning side checked to have pruned
    ({"kind": "paired_ratio", "a": {"variant": "during", "arm": "oneshot", "ratio": 0.25,
                                    "field": "train_seconds", "pruned": True},
      "b": {**BASE, "field": "train_seconds"}, "direction": "less"}, "supported", ""),
    # post-hoc folders have no events: their head count says they pruned
    ({"kind": "value", "a": {"variant": "posthoc", "arm": "importance", "ratio": 0.5, "field": "value",
                             "pruned": True}}, "supported", ""),
    # a side that should have pruned but removed no head (a threshold no pair of heads crossed): not a test
    ({"kind": "paired_ratio", "a": {**BASE, "field": "params", "pruned": True},
      "b": {"variant": "during", "arm": "oneshot", "ratio": 0.25, "field": "params"}}, "inconclusive",
     "nothing was pruned, so the claim was not put to the test: lm/baseline/none/0.0/seed0 removed no heads"),
    # a curve measure that needs more than the curve has: missing, not a crash
    ({"kind": "value", "task": "mt", "a": {"from": "curve", "scorer": "importance", "measure": "area", "upto": 0.9}},
     "inconclusive", "nothing to measure"),
])
def test_verdicts_on_constructed_cases(tree_root, spec, expected, note):
    result = evaluate(_claim(**spec), RunTree(tree_root))
    assert result.verdict == expected, result
    assert note in result.note
    if expected == "failed":
        assert result.estimate.n == 2


def test_effects_are_the_claimed_quantities(tree_root):
    tree = RunTree(tree_root)
    # the classifier's margin over word overlap on the same seed's examples (0.80 + 0.01 s against 0.6 + 0.02 s)
    over = {r.seed: r.record["over_trivial"] for r in tree.select("cls", **BASE)}
    assert over == pytest.approx({s: 0.2 - 0.01 * s for s in SEEDS})
    assert all(r.record["over_trivial"] is None for r in tree.runs if r.task != "cls")
    share = evaluate(_claim(kind="value", task="mt", a={"from": "ablation", "measure": "significant_share",
                                                        "site_kind": "self"}, direction="less"), tree)
    assert share.estimate.mean == pytest.approx(1 / 8) and share.estimate.n == 3
    # a claim on BLEU's bootstrap reads only ablations that ran it: the classifier's ran the accuracy test
    for task, n in (("mt", 3), ("cls", 0)):
        tested = evaluate(_claim(kind="value", task=task, a={"from": "ablation", "measure": "significant_share",
                                                             "test": "bleu"}, direction="less"), tree)
        assert tested.estimate.n == n, (task, tested)
    removable = evaluate(_claim(kind="value", task="mt", a={"from": "curve", "scorer": "importance",
                                                            "measure": "removable", "budget": 0.028}), tree)
    assert removable.per_seed == {0: 0.25, 1: 0.25, 2: 0.25}
    speed = evaluate(_claim(kind="value", task="cls", a={"from": "speed", "measure": "speedup", "ratio": 0.5,
                                                         "batch": 32}), tree)
    assert speed.estimate.mean == pytest.approx(1.17) and speed.estimate.n == 5
    roles = evaluate(_claim(kind="value", task="mt", a={"from": "roles", "lam": "lam0.01",
                                                        "measure": "kept_minus_pruned", "field": "positional"}), tree)
    assert roles.estimate.mean == pytest.approx(0.3)
    ratio = evaluate(_claim(kind="paired_ratio", direction="less",
                            a={"variant": "during", "arm": "oneshot", "ratio": 0.25, "field": "time_to_target"},
                            b={**BASE, "field": "time_to_target"}), tree)
    base = {r.seed: r.record["time_to_target"] for r in tree.select("lm", **BASE)}
    one = {r.seed: r.record["time_to_target"] for r in tree.select("lm", "during", "oneshot", 0.25)}
    assert ratio.per_seed == pytest.approx({s: one[s] / base[s] for s in SEEDS})
    # the same ratio on CPU seconds of the same steps (0.9 of wall-clock in this tree, on both arms)
    cpu = evaluate(_claim(kind="paired_ratio", direction="less",
                          a={"variant": "during", "arm": "oneshot", "ratio": 0.25, "field": "cpu_time_to_target"},
                          b={**BASE, "field": "cpu_time_to_target"}), tree)
    assert cpu.per_seed == pytest.approx(ratio.per_seed, rel=1e-3)
    assert all(r.record["cpu_time_to_target"] == pytest.approx(0.9 * r.record["time_to_target"], rel=1e-3)
               for r in tree.select("lm", **BASE))
    # early throughput on CPU seconds: tokens over CPU time at the end of the early window (10 % of 400 steps)
    for r in tree.select("lm", **BASE):
        at = next(m for m in r.metrics if m["step"] == 40)
        assert r.record["cpu_tokens_per_s_early"] == pytest.approx(at["tokens"] / at["train_cpu_seconds"])


def test_malformed_analyses_do_not_crash_the_report(tmp_path, capsys):
    runs = tmp_path / "runs"
    _write(runs / "mt" / "analysis" / "ablation" / "seed1.json", {"heads": [{"site": 1}, "x"], "all_but_one": []})
    (runs / "mt" / "analysis" / "ablation" / "seed0.json").write_text("{not json")
    _write(runs / "mt" / "analysis" / "curve" / "importance" / "seed0.json", {"metric": "bleu", "points": "x"})
    _write(runs / "cls" / "analysis" / "speed.json", {"rows": [{"ratio": "fast"}]})
    _train_run(runs, "lm", "baseline/none/0.0", 0, metric="perplexity", value=float("nan"), final=3.0,
               sec_per_step=0.05, heads=8, params=1, tau=40.0)
    _train_run(runs, "lm", "baseline_2x/none/0.0", 0, metric="perplexity", value=float("nan"), final=3.0,
               sec_per_step=0.05, heads=8, params=1)  # converged (no lower twice as long): LM claims apply
    # a run killed before its first checkpoint: only the config it wrote first
    _write(runs / "lm" / "during" / "oneshot" / "0.25" / "seed0" / "config.json", {"task": "lm", "train": {"seed": 0}})
    stamp(runs)
    out = tmp_path / "out"
    for name in NAMES:
        assert _cli(["report", "--runs", str(runs), "--replication", name, "--out", str(out / name),
                     "--replications", str(REPLICATIONS)]) == 0
    assert _cli(["claims", "--runs", str(runs), "--replications", str(REPLICATIONS), "--out", str(out)]) == 0
    assert "ablation/seed0.json: seed0.json unreadable" in capsys.readouterr().err
    rows = {r["claim"]: r for r in csv.DictReader((out / "claims.csv").open())}
    assert rows["B1-mt"]["verdict"] == "inconclusive" and "missing inputs" in rows["B1-mt"]["note"]
    assert rows["B3-mt-random"]["verdict"] == "inconclusive" and "missing inputs" in rows["B3-mt-random"]["note"]
    assert rows["A1-lm"]["verdict"] == "inconclusive" and "no value" in rows["A1-lm"]["note"]
    assert rows["D8-lm"]["verdict"] == "inconclusive" and "incomplete" in rows["D8-lm"]["note"]
    # a claim blocked by a precondition says so, whatever its runs hold
    assert rows["D1-lm"]["verdict"] == "not tested at this scale"


def test_tables_and_the_ledger_say_when_runs_come_from_different_environments(tmp_path, capsys):
    runs = make_tree(tmp_path)
    out = tmp_path / "out"
    assert _cli(["claims", "--runs", str(runs), "--replications", str(REPLICATIONS), "--out", str(out)]) == 0
    assert "Environments differ" not in (out / "CLAIMS.md").read_text()  # one environment (here: none named)
    for seed, capability in ((0, "AVX512"), (1, "AVX2"), (2, "AVX512")):
        path = runs / "lm" / "baseline" / "none" / "0.0" / f"seed{seed}" / "summary.json"
        data = json.loads(path.read_text())
        _write(path, {**data, "environment": {"torch": {"version": "2.13.0"}, "cpu_capability": capability}})
    assert _cli(["claims", "--runs", str(runs), "--replications", str(REPLICATIONS), "--out", str(out)]) == 0
    assert "**Environments differ:**" in (out / "CLAIMS.md").read_text()
    assert "cpu_capability AVX2 (1) vs AVX512 (2)" in (out / "CLAIMS.md").read_text()
    assert _cli(["report", "--runs", str(runs), "--replication", "training_time", "--out", str(out / "tt"),
                 "--replications", str(REPLICATIONS), "--tasks", "lm"]) == 0
    assert "**Environments differ:**" in (out / "tt" / "runs.md").read_text()


def test_the_ledger_writes_each_tasks_baseline_beside_its_trivial_baseline(tree_root, tmp_path):
    """baselines.csv: per task the trained baseline's metric and convergence measure over seeds, and the trivial
    baseline of the same examples, with the columns issue 13 names."""
    from heads.report.baselines import baselines_table
    from heads.report.collect import late_improvement

    out = tmp_path / "out"
    assert _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "baselines.csv").open()))
    assert list(rows[0])[:7] == ["task", "model", "metric", "value", "ci_low", "ci_high", "n_seeds"]
    got = {(r["task"], r["model"], r["metric"]): r for r in rows}
    cls = got[("cls", "baseline", "accuracy")]
    assert float(cls["value"]) == pytest.approx(0.81) and cls["n_seeds"] == "3" and cls["n_failed"] == "0"
    # the Student-t interval of 0.80, 0.81, 0.82: mean +- t(0.975, 2) * 0.01 / sqrt(3)
    assert float(cls["ci_high"]) - 0.81 == pytest.approx(4.302653 * 0.01 / 3 ** 0.5, abs=1e-4)
    overlap = got[("cls", "trivial", "accuracy")]
    assert (overlap["name"], float(overlap["value"]), overlap["n_seeds"]) == ("word_overlap", pytest.approx(0.62),
                                                                              "3")
    assert ("lm", "trivial", "perplexity") not in got  # no trivial baseline for a language model
    tree = RunTree(tree_root)
    lm = [late_improvement(r.metrics) for r in tree.select("lm", **BASE)]
    assert float(got[("lm", "baseline", "late_improvement")]["value"]) == pytest.approx(sum(lm) / 3, abs=1e-4)
    # the convergence precondition's measure: seed 0 against itself trained twice as long (0.1 lower)
    gap = got[("lm", "baseline", "lm-converged")]
    assert float(gap["value"]) == pytest.approx(0.1 / 2.9, abs=1e-4) and gap["n_seeds"] == "1"
    assert gap["name"] == "baseline_2x/none/0.0" and gap["n_failed"] == "0"
    assert ("mt", "baseline", "lm-converged") not in got
    assert {k[0] for k in got} == {"lm", "mt", "cls"}
    # every yardstick a claim requires: lm-converged and the scaling sweep's per size (their runs absent here)
    yardstick = [p for c in load_all(REPLICATIONS) for p in c.requires if p.b is not None]
    assert {p.name for p in yardstick} == {"lm-converged", "lm-converged-half", "lm-converged-wide"}
    assert (out / "baselines.md").read_text() == baselines_table(tree, yardstick).to_markdown()


def test_the_ledger_marks_verdicts_a_perturbation_flipped_as_fragile(tree_root, tmp_path):
    measurement = tmp_path / "perturbation.json"
    measurement.write_text(json.dumps({"perturbation": {"label": "kernels at default, 2 threads"}, "claims": {
        "D5-lm": {"base": "supported", "perturbed": "inconclusive"},
        "B4-mt": {"base": "supported", "perturbed": "supported"}}}))
    out = tmp_path / "out"
    assert _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out),
                 "--robustness", str(measurement)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((out / "claims.csv").open())}
    assert rows["D5-lm"]["robustness"] == "fragile: inconclusive under kernels at default, 2 threads"
    assert rows["B4-mt"]["robustness"].startswith("same verdict under")
    assert rows["A1-mt"]["robustness"] == "not measured"
    md = (out / "CLAIMS.md").read_text()
    assert "**supported** (fragile)" in md and md.count("(fragile)") == 2  # the row and the rule above the table
    # several measurements: a real other machine beside the imitated one; fragile if either flipped
    machines = tmp_path / "machines.json"
    machines.write_text(json.dumps({"perturbation": {"label": "an AVX512 machine", "here": "AVX2"}, "symmetric": True,
                                    "claims": {"B4-mt": {"base": "supported", "perturbed": "inconclusive"},
                                               "D5-lm": {"base": "supported", "perturbed": "supported"}}}))
    assert _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out),
                 "--robustness", str(measurement), str(machines)]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((out / "claims.csv").open())}
    assert rows["B4-mt"]["robustness"] == "fragile: inconclusive under an AVX512 machine"
    assert rows["D5-lm"]["robustness"] == "fragile: inconclusive under kernels at default, 2 threads"
    from heads.cli.common import UserError

    with pytest.raises(UserError, match="absent.json: no such file"):
        _cli(["claims", "--runs", str(tree_root), "--replications", str(REPLICATIONS), "--out", str(out),
              "--robustness", str(tmp_path / "absent.json")])


def test_a_folder_that_vanishes_while_the_tree_is_read_is_skipped(tree_root, tmp_path, monkeypatch):
    # A running job rotates its checkpoint (temporary folder, rename, delete) while a table renders from the
    # same tree; the report must read what is there, not die of the folder it listed a moment ago (CI did).
    import os
    import shutil

    tree = tmp_path / "runs"
    shutil.copytree(tree_root, tree)
    doomed = tree / "lm" / "baseline" / "none" / "0.0" / "seed0" / "checkpoint.tmp-123"
    (doomed / "model").mkdir(parents=True)
    (doomed / "model" / "config.json").write_text("{}")
    before = {r.name for r in RunTree(tree_root).runs}
    real = os.scandir

    def scandir_then_delete(path="."):
        if not isinstance(path, int) and Path(path) == doomed and doomed.exists():
            shutil.rmtree(doomed)  # listed in its parent a moment ago, gone when the walk enters it
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir_then_delete)
    assert {r.name for r in RunTree(tree).runs} == before
    assert not doomed.exists()


def test_speed_claims_replicate_over_the_seeds_speed_jobs_not_one_jobs_repeats(tmp_path):
    # one speed job per seed's model: the claim's n is the jobs, each summarised by its median pass
    from heads.report.tables import speed_table

    runs = tmp_path / "runs"
    gains = {0: 1.10, 1: 1.20, 2: 1.15}
    for seed, gain in gains.items():
        rows = _speed_rows()
        for r in rows:
            if r["ratio"] == 0.5 and r["batch"] == 32:
                r["examples_per_s"] = 1000.0 * gain
                r["cpu_speedup"] = gain - 0.05
            elif r["ratio"] == 0.0:
                r["examples_per_s"] = 1000.0 if r["batch"] == 32 else 100.0
        _write(runs / "cls" / "analysis" / "speed" / f"seed{seed}.json", {"rows": rows})
    stamp(runs)
    tree = RunTree(runs)
    wall = evaluate(_claim(kind="value", task="cls", a={"from": "speed", "measure": "speedup", "ratio": 0.5,
                                                        "batch": 32}, null_value=1.0), tree)
    assert wall.per_seed == pytest.approx(gains) and wall.estimate.n == 3
    assert "n counts speed jobs" in wall.note
    cpu = evaluate(_claim(kind="value", task="cls", a={"from": "speed", "measure": "cpu_speedup", "ratio": 0.5,
                                                       "batch": 32}, null_value=1.0), tree)
    assert cpu.per_seed == pytest.approx({s: g - 0.05 for s, g in gains.items()})
    row = next(r for r in speed_table(tree).rows if r[1] == 0.5 and r[2] == 32)
    assert row[3] == 3 and row[8] == pytest.approx(1.15)  # n_seeds, mean speed-up over the seeds
    assert row[9] == pytest.approx(wall.estimate.ci_low) and row[10] == pytest.approx(wall.estimate.ci_high)


def test_one_speed_job_gives_the_table_and_the_claim_the_same_paired_repeats(tmp_path):
    # one job alone: both read its timed repeats paired by round, so the table's speed-up is the claim's effect
    # (it once showed the median pass's ratio beside an interval of the paired ratios' mean)
    from heads.report.tables import speed_table

    runs = tmp_path / "runs"
    rows = _speed_rows()
    for r in rows:  # rounds whose gains differ, so the median pass's ratio is not the paired ratios' mean
        if r["ratio"] == 0.5 and r["batch"] == 32:
            r["times"] = [32 * 4 / (1000.0 * g) for g in (1.0, 1.1, 1.5, 1.2, 1.3)]
    _write(runs / "cls" / "analysis" / "speed.json", {"rows": rows})
    stamp(runs)
    tree = RunTree(runs)
    claim = evaluate(_claim(kind="value", task="cls", a={"from": "speed", "measure": "speedup", "ratio": 0.5,
                                                         "batch": 32}, null_value=1.0), tree)
    assert claim.estimate.n == 5 and "n counts timed repeats" in claim.note
    row = next(r for r in speed_table(tree).rows if r[1] == 0.5 and r[2] == 32)
    assert row[4] == 5 and row[8] == pytest.approx(claim.estimate.mean)
    assert (row[9], row[10]) == pytest.approx((claim.estimate.ci_low, claim.estimate.ci_high))


def test_claims_on_an_evaluation_metric_count_the_examples_sampling(tmp_path):
    """Runs that kept example-level values (examples.json) give a two-level interval: equal per-seed differences
    are no longer 'no spread' but the test set's sampling, the resamples are the same for both arms (paired) and
    on every render, and a seed without the values falls back to seeds alone, saying so in the method."""
    from heads.examples import record

    runs = make_tree(tmp_path)
    claim = _claim(kind="paired_difference", task="cls", direction="greater", tolerance=-0.02,
                   a={"variant": "posthoc", "arm": "importance", "ratio": 0.5, "field": "value"},
                   b={**BASE, "field": "value"})
    seeds_only = evaluate(claim, RunTree(runs))
    assert seeds_only.verdict == "inconclusive" and "no spread" in seeds_only.note
    assert seeds_only.method.endswith("over seeds")
    for s in SEEDS:  # 200 pairs; pruning turns one right answer (the same pair on every seed) wrong
        right = 160 + 2 * s
        base = [1] * right + [0] * (200 - right)
        pruned = [0] + base[1:]
        for group, column in (("baseline/none/0.0", base), ("posthoc/importance/0.5", pruned)):
            _write(runs / "cls" / group / f"seed{s}" / "examples.json",
                   record({"correct": column, "loss": [0.5] * 200}, {"accuracy": sum(column) / 200}))
    both = evaluate(claim, RunTree(runs))
    assert both.verdict == "supported", both
    assert "two-level" in both.method and both.estimate.examples
    assert both.estimate.mean == pytest.approx(-0.005)
    # the only example-level difference is one pair: about one in 200 resampled pairs, +-1.96 * 0.005
    assert both.estimate.ci_low == pytest.approx(-0.005 - 1.96 * 0.005, abs=0.002)
    assert evaluate(claim, RunTree(runs)).estimate == both.estimate  # the same resamples on every render
    (runs / "cls" / "posthoc" / "importance" / "0.5" / "seed2" / "examples.json").unlink()
    fallback = evaluate(claim, RunTree(runs))
    assert fallback.verdict == "inconclusive" and not fallback.estimate.examples


def test_a3_compares_what_pruning_costs_each_model_and_their_redundancy(tree_root):
    """value_change is a pruned run's metric against the run it starts from (its sheet's from_run), so A3 can
    compare the cost of pruning a grouped-query or narrower model with the full model's; redundancy reads
    ``heads redundancy`` under the pooling the claim names."""
    tree = RunTree(tree_root)
    for r in tree.select("lm", "posthoc", "importance", 0.5):
        assert r.record["value_change"] == pytest.approx(0.01 + 0.002 * r.seed)
    assert all(r.record["value_change"] is None for r in tree.select("lm", **BASE))  # starts from nothing
    claims = {c.id: c for c in load_all(REPLICATIONS)}
    bare = {"requires": ()}  # the synthetic LM is not converged: judge the effects themselves here
    cost = evaluate(replace(claims["A3-gqa-cost"], **bare), tree)
    assert cost.per_seed == pytest.approx({s: 0.04 + 0.002 * s for s in SEEDS}) and cost.verdict == "supported"
    size = evaluate(replace(claims["A3-size"], **bare), tree)
    assert size.per_seed == pytest.approx({s: 0.07 + 0.001 * s for s in SEEDS}) and size.verdict == "supported"
    redundancy = evaluate(replace(claims["A3-gqa-redundancy"], **bare), tree)
    assert redundancy.per_seed == pytest.approx({s: -0.2 - 0.01 * s for s in SEEDS})
    assert redundancy.verdict == "supported" and "picked base-kv2" in redundancy.note
    token = evaluate(_claim(kind="value", a={"from": "redundancy", "arm": "base-mha", "measure": "redundancy_ratio",
                                             "pooling": "token"}), tree)
    assert token.per_seed == {0: 0.0, 1: 0.0, 2: 0.0}
    # the precondition on redundancy reads the same analysis: 0.3-0.34 of the full model's heads, so it holds
    from heads.report.claims import check_preconditions
    text, blocked = check_preconditions(replace(claims["A3-gqa-redundancy"],
                                                requires=claims["A3-gqa-redundancy"].requires[2:]), tree)
    assert blocked is None and text.startswith("met: share of the LM baseline's heads that are redundant"), text


def test_redundancy_over_training_reads_the_snapshots_in_training_order(tree_root):
    tree = RunTree(tree_root)
    later = evaluate({c.id: c for c in load_all(REPLICATIONS)}["D5-lm-later"], tree)
    assert later.per_seed == pytest.approx({s: 0.3 + 0.01 * s for s in SEEDS}) and later.verdict == "supported"
    assert "first: step30" in later.note and "last: final" in later.note
    table = tables("training_time", tree, REPLICATIONS)("redundancy_over_training")
    assert [r[1] for r in table.rows] == [30, 100, "final"]
    assert table.rows[-1][6] == pytest.approx(0.72) and table.rows[-1][5] == pytest.approx(0.36)
    # the threshold is the probes' (the report's definition's), not a constant of the report
    assert {r[table.columns.index("threshold")] for r in table.rows} == {0.9}
    at = evaluate(_claim(kind="value", a={"from": "redundancy_at", "step": 100, "measure": "max_similarity"}), tree)
    assert at.per_seed == pytest.approx({s: 0.5 for s in SEEDS})


def test_distribution_shift_reads_each_corpus_gap_of_the_pruned_model(tree_root):
    tree = RunTree(tree_root)
    claims = {c.id: c for c in load_all(REPLICATIONS)}
    kjv = evaluate(replace(claims["D7-lm-shift-kjv"], requires=()), tree)
    assert kjv.per_seed == pytest.approx({s: 0.02 + 0.002 * s for s in SEEDS}) and kjv.verdict == "supported"
    bbe = evaluate(replace(claims["D7-lm-shift"], requires=()), tree)
    assert bbe.per_seed == {0: 0.0, 1: 0.0, 2: 0.0} and bbe.verdict == "inconclusive"  # no spread, no verdict
    home = evaluate(_claim(kind="value", a={"from": "shift", "arm": "oneshot", "measure": "change"}), tree)
    assert home.per_seed == pytest.approx({s: 0.02 for s in SEEDS})
    with pytest.raises(ClaimSpecError, match="needs the shifted dataset"):  # a mistake in the spec, not the data
        _claim(kind="value", a={"from": "shift", "arm": "oneshot", "measure": "gap"})


def test_a_non_finite_analysis_value_leaves_its_seed_unmeasured_instead_of_crashing_the_ledger(tree_root, tmp_path):
    """JSON written by Python may carry NaN: that seed has nothing to measure, the claim is inconclusive."""
    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)
    path = runs / "lm" / "analysis" / "memory" / "oneshot" / "seed2.json"
    data = json.loads(path.read_text())
    data["models"]["model"]["batch_ratio"] = float("nan")
    path.write_text(json.dumps(data))
    result = evaluate({c.id: c for c in load_all(REPLICATIONS)}["D8-lm-batch"], RunTree(runs))
    assert result.verdict == "inconclusive" and "seed 2 has nothing to measure" in result.note
    assert sorted(result.per_seed) == [0, 1]


def test_a_non_finite_curve_level_is_left_out_of_the_curve():
    """A curve level whose metric is NaN or Infinity is read as missing (collect.number), not drawn or summed."""
    from heads.report.curves import curve_series

    points = [{"ratio": 0.0, "loss": 2.0}, {"ratio": 0.25, "loss": float("nan")}, {"ratio": 0.5, "loss": 2.5},
              {"ratio": float("inf"), "loss": 3.0}, {"ratio": 0.75, "loss": float("inf")}]
    curve = curve_series({"metric": "loss", "points": points})
    assert curve is not None and curve.ratios == [0.0, 0.5] and curve.retained == pytest.approx([1.0, 0.8])


def test_clock_claims_weigh_exact_steps_by_interleaved_step_times(tree_root, tmp_path):
    """D1 and D4 on the interleaved clock: step counts from the runs, step times from one job (heads clock)."""
    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)  # the prune moved and a run removed below
    tree = RunTree(runs)
    claims = {c.id: c for c in load_all(REPLICATIONS)}
    d1 = evaluate(claims["D1-lm-interleaved"], tree)
    one = {r.seed: r for r in tree.select("lm", "during", "oneshot", 0.25)}
    base = {r.seed: r for r in tree.select("lm", **BASE)}
    target = tree.baseline_target("lm", 0.01)
    steps = {s: reach_fields(one[s], target)["steps_to_target_or_total"] for s in SEEDS}
    base_steps = {s: reach_fields(base[s], target)["steps_to_target_or_total"] for s in SEEDS}
    # one-shot pruned at step 0 in this tree: every step runs at the pruned model's step time
    assert d1.per_seed == pytest.approx({s: steps[s] * (0.8 + 0.01 * s) / base_steps[s] for s in SEEDS})
    cpu = evaluate(claims["D1-lm-interleaved-cpu"], tree)
    assert cpu.per_seed == pytest.approx({s: steps[s] * 0.7 / base_steps[s] for s in SEEDS})
    # a prune later in the run: the steps before it at the full model's step time
    events = one[0].path / "events.jsonl"
    moved = [{**e, "step": 20} if e.get("event") == "prune" else e
             for e in map(json.loads, events.read_text().splitlines())]
    _jsonl(events, moved)
    later = evaluate(claims["D1-lm-interleaved"], RunTree(runs))
    assert later.per_seed[0] == pytest.approx((20 + (steps[0] - 20) * 0.8) / base_steps[0])
    table = tables("training_time", tree, REPLICATIONS)("clock")
    assert [r[1:4] for r in table.rows] == [["oneshot", m, 3] for m in ("baseline", "oneshot", "baseline + dropout")]
    assert table.rows[1][7] == pytest.approx(0.81) and table.rows[2][7] == pytest.approx(1.1)
    d4 = evaluate(claims["D4-lm-throughput-interleaved"], tree)
    assert d4.per_seed == pytest.approx({s: 0.9 + 0.01 * s for s in SEEDS}) and d4.verdict == "supported"
    assert evaluate(claims["D4-lm-throughput-interleaved-cpu"], tree).per_seed == pytest.approx(
        {s: 0.95 for s in SEEDS})
    (runs / "lm" / "during" / "oneshot" / "0.25" / "seed1" / "summary.json").unlink()
    gap = evaluate(claims["D1-lm-interleaved"], RunTree(runs))
    assert 1 not in gap.per_seed and "seed 1 lacks its pruned run" in gap.note


def test_shift_rows_orient_the_cost_so_that_larger_is_worse():
    from heads.analysis.shift import cost, shift_rows

    assert cost("perplexity", 22.0, 20.0) == pytest.approx(0.1)
    assert cost("accuracy", 0.72, 0.8) == pytest.approx(0.1)  # a fall of accuracy is a cost too
    assert cost("bleu", 5.0, 0.0) is None
    scores = {("m", None): 22.0, ("r", None): 20.0, ("m", "x"): 33.0, ("r", "x"): 25.0}

    def fake(model, dataset):
        return {"perplexity": scores[(model, dataset)], "loss": math.log(scores[(model, dataset)])}

    rows = shift_rows(fake, "m", "r", ["x"], "perplexity")
    assert rows["in_domain"]["change"] == pytest.approx(0.1)
    assert rows["shifted"]["x"]["change"] == pytest.approx(0.32) and rows["shifted"]["x"]["gap"] == pytest.approx(0.22)


def test_a_replications_ledger_names_the_environments_of_what_its_claims_read(tree_root, tmp_path):
    """Another replication's runs of the same task, finished or not when this one renders, never change its
    ledger files (environments.json included): the kill-and-resume run renders them in another order."""
    import shutil

    lean = tmp_path / "lean"
    shutil.copytree(tree_root, lean)
    shutil.rmtree(lean / "mt" / "posthoc")  # overprovisioning's, not voita2019's
    for root, out in ((tree_root, tmp_path / "full"), (lean, tmp_path / "lean_out")):
        assert _cli(["report", "--runs", str(root), "--replication", "voita2019", "--replications",
                     str(REPLICATIONS), "--tasks", "mt", "--only", "claims", "--out", str(out)]) == 0
    kinds = (".csv", ".md", ".json")
    assert _bytes(tmp_path / "full", kinds) == _bytes(tmp_path / "lean_out", kinds)
    records = json.loads((tmp_path / "full" / "environments.json").read_text())["records"]
    assert records and not any("/posthoc/" in k for k in records)


def test_lm_converged_compares_the_baseline_with_itself_trained_twice_as_long(tmp_path):
    """The issue's rule: converged when the final validation loss is within 2 % of the same model's after twice
    the steps, on the seeds the longer run has. A longer run that ends worse (overfitting) means converged; no
    longer run means the precondition is not measured (inconclusive), never met."""
    runs = make_tree(tmp_path)
    claims = {c.id: c for c in load_all(REPLICATIONS)}
    longer = runs / "lm" / "baseline_2x" / "none" / "0.0" / "seed0" / "summary.json"
    data = json.loads(longer.read_text())
    for final, verdict, column in ((3.1, "supported", "met: "), (2.95, "supported", "met: "),
                                   (2.9, "not tested at this scale", "not met: ")):
        _write(longer, {**data, "final_val_loss": final})
        got = evaluate(claims["A1-lm"], RunTree(runs))
        assert got.verdict == verdict and got.precondition.startswith(column), (final, got.precondition)
        assert f"{(3.0 - final) / final:.4g} (one seed)" in got.precondition
    longer.unlink()  # killed before it finished
    got = evaluate(claims["A1-lm"], RunTree(runs))
    assert got.verdict == "inconclusive" and got.precondition.startswith("not measured: LM baseline's final")
    assert "baseline_2x/none/0.0/seed0: incomplete" in got.precondition
    shutil.rmtree(longer.parent)  # never run
    got = evaluate(claims["A1-lm"], RunTree(runs))
    assert got.verdict == "inconclusive" and "no runs under lm/baseline_2x/none/0.0" in got.precondition
    # a seed the yardstick has but the baseline lacks is named, not skipped
    _train_run(runs, "lm", "baseline_2x/none/0.0", 5, metric="perplexity", value=20.0, final=3.0,
               sec_per_step=0.05, heads=8, params=1)
    stamp(runs)
    got = evaluate(claims["A1-lm"], RunTree(runs))
    assert got.verdict == "inconclusive" and "seed 5: no value to compare with its yardstick" in got.precondition


def test_redundancy_by_genre_shows_each_genre_the_genres_pooled_and_stratified(tree_root, tmp_path):
    tree = RunTree(tree_root)
    genre = tables("training_time", tree, REPLICATIONS)
    table = genre("redundancy_genre")
    got = {(r[1], r[2]): r for r in table.rows}
    assert [r[2] for r in table.rows if r[1] == "mean"] == ["lm_letters", "lm_wisdom", "pooled", "stratified"]
    assert got[("mean", "lm_letters")][3] == 3 and got[("mean", "lm_letters")][4] == pytest.approx(0.3)
    assert got[("token", "pooled")][4] == pytest.approx(0.25) and got[("token", "stratified")][4] == 0.0
    assert got[("mean", "lm_wisdom")][7] == pytest.approx(0.6)
    assert {r[table.columns.index("threshold")] for r in table.rows} == {0.85}
    from heads.report.figures import FIGURES

    png = FIGURES["redundancy_genre"](genre, tmp_path / "genre.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_redundancy_figures_draw_the_thresholds_their_probes_used():
    """A probe run at another cosine threshold is drawn at it: one line per distinct threshold of the rows."""
    from heads.report.figures import _plt, _thresholds

    plt = _plt()
    fig, ax = plt.subplots()
    _thresholds(ax, [{"threshold": 0.9}, {"threshold": 0.8}, {"threshold": 0.9}, {"threshold": None}, {}])
    assert sorted(line.get_ydata()[0] for line in ax.get_lines()) == [0.8, 0.9]
    plt.close(fig)


def test_a_replication_reads_only_the_runs_on_its_own_sheet(tmp_path):
    """``--labels`` (the workflow passes the replication's sheet entries): a run of the same task another
    replication declares, here the LM yardstick, is not read, whether or not it has finished; nor an analysis."""
    runs = make_tree(tmp_path)
    stamped = [read_json(p)[0] for p in runs.rglob("*.json")]
    labels = {d["run"]["label"] for d in stamped if isinstance(d, dict) and isinstance(d.get("run"), dict)}
    longer, genres = "lm/baseline_2x/none/0.0/seed0", "lm/analysis/redundancy_genre/genres/seed1"
    assert {longer, genres} <= labels
    every, tree = RunTree(runs), RunTree(runs, labels=labels - {longer, genres})
    assert every.select("lm", "baseline_2x") and not tree.select("lm", "baseline_2x")
    assert len(tree.runs) == len(every.runs) - 1
    assert set(by_seed(every, "redundancy_genre", "lm", "genres")) == {0, 1, 2}
    assert set(by_seed(tree, "redundancy_genre", "lm", "genres")) == {0, 2}
    a1 = evaluate({c.id: c for c in load_all(REPLICATIONS)}["A1-lm"], tree)
    assert a1.verdict == "inconclusive" and "no runs under lm/baseline_2x" in a1.precondition
    out = tmp_path / "out"
    assert _cli(["report", "--runs", str(runs), "--replication", "overprovisioning", "--out", str(out),
                 "--replications", str(REPLICATIONS), "--only", "claims",
                 "--labels", ",".join(sorted(labels - {longer}))]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((out / "claims.csv").open())}
    assert rows["A1-lm"]["verdict"] == "inconclusive"  # with the yardstick read it is "not tested" (3.4 %)
    with pytest.raises(SystemExit, match="names no run"):
        _cli(["report", "--runs", str(runs), "--replication", "overprovisioning", "--out", str(out),
              "--replications", str(REPLICATIONS), "--labels", ","])


def test_an_arm_the_preset_leaves_out_is_not_run_at_this_preset(tmp_path):
    """A claim reading an arm no entry of the replication's sheet declares (``--labels``; the preset's settings
    trim it) is *not run at this preset*, its note naming the arm: nothing was measured, which is not a run that
    went missing (*inconclusive*). A precondition the models that did run fail still says *not tested at this
    scale*. An arm declared whose runs are missing (failed, or not run yet) is judged as before, as is a tree read
    without labels (no sheet says what was declared)."""
    runs = make_tree(tmp_path)
    stamped = [read_json(p)[0] for p in runs.rglob("*.json")]
    labels = {d["run"]["label"] for d in stamped if isinstance(d, dict) and isinstance(d.get("run"), dict)}
    uniform = {label for label in labels if label.startswith("lm/scratch/uniform/0.5/")}
    longer = {label for label in labels if label.startswith("lm/baseline_2x/")}  # lm-converged's yardstick
    assert len(uniform) == 3 and longer
    claim = {c.id: c for c in load_all(REPLICATIONS)}["A2-lm-uniform"]
    failing = evaluate(claim, RunTree(runs, labels=labels - uniform))  # the baseline is 3.4 % from converged
    assert failing.verdict == "not tested at this scale" and failing.precondition.startswith("not met: ")
    trimmed = evaluate(claim, RunTree(runs, labels=labels - uniform - longer))
    assert (trimmed.verdict, trimmed.precondition, trimmed.estimate.n, trimmed.p_value) == (
        "not run at this preset", "not run", 0, None)
    assert trimmed.note == ("this preset's run sheet declares no run under lm/scratch/uniform/0.5 (the replication's "
                            "settings at this preset leave that arm out), so nothing was measured")
    # the same arm declared, its runs gone (and the yardstick's): a missing input, judged as without labels
    for label in uniform | longer:
        shutil.rmtree(runs / label)
    declared, bare = evaluate(claim, RunTree(runs, labels=labels)), evaluate(claim, RunTree(runs))
    assert (declared.verdict, declared.note, declared.precondition) == (bare.verdict, bare.note, bare.precondition)
    assert declared.verdict == "inconclusive" and declared.note.startswith(
        "missing inputs: no runs under lm/scratch/uniform/0.5")
    # rendered: counted apart, and the rule says this reason (not a null replication's) where a row has it
    out = tmp_path / "out"
    assert _cli(["report", "--runs", str(runs), "--replication", "overprovisioning", "--out", str(out),
                 "--replications", str(REPLICATIONS), "--only", "claims",
                 "--labels", ",".join(sorted(labels - uniform - longer))]) == 0
    rows = {r["claim"]: r for r in csv.DictReader((out / "claims.csv").open())}
    not_run = sorted(c for c, r in rows.items() if r["verdict"] == "not run at this preset")
    assert not_run == ["A1-lm-30", "A2-lm-uniform"]  # the tree has no 0.3 posthoc arm either: nor has its sheet
    assert "lm/posthoc/importance/0.3 (the replication's" in rows["A1-lm-30"]["note"]
    assert rows["A1-lm"]["verdict"] == "inconclusive"  # its arms are declared: its yardstick is what is missing
    page = (out / "claims.md").read_text()
    assert "not run at this preset: 2" in page.splitlines()[2]
    assert ("*not run at this preset*: the claim's replication runs at this preset but not an arm the claim reads"
            in page and "its settings say null" not in page)


def test_a_tree_says_which_runs_its_sheet_declares(tmp_path):
    """A run's label is spelled from its identity, so the sheet's labels say which arms it declares: patterns and
    any ratio as a selector gives them; an analysis's label is no run's; without labels everything counts."""
    tree = RunTree(tmp_path, labels=["lm/scratch/matched/0.5/seed0", "lm/analysis/redundancy/base-mha/seed0",
                                     "lm/analysis/curve/0.5/seed0"])
    assert tree.declares_run("lm", "scratch", "matched", 0.5) and tree.declares_run("lm", "*", "*", None)
    assert tree.declares_run("lm", "scratch", "match*", 0.5000000000001)
    assert not tree.declares_run("lm", "scratch", "uniform", 0.5) and not tree.declares_run("lm", "scratch", "*", 0.3)
    assert not tree.declares_run("mt", "scratch", "matched", 0.5) and not tree.declares_run("lm", "analysis", "*", None)
    assert RunTree(tmp_path).declares_run("lm", "scratch", "uniform", 0.5)



def test_an_analysis_the_preset_leaves_out_is_not_run_at_this_preset(tmp_path):
    """An analysis's label names its folder and arm (``TASK/analysis/FOLDER[/ARM]/seedN``), so a claim reading a
    curve scorer, or an ablation, that the sheet declares nowhere is *not run at this preset* (MPNet's battery
    drops the similarity curve and ablates one shard), not a missing input; a declared one is read as before."""
    tree = RunTree(tmp_path, labels=["lm/analysis/curve/importance/seed0", "lm/analysis/ablation/seed0",
                                     "lm/analysis/roles/importance0.5/seed0"])
    assert tree.declares_analysis("lm", "curve", "importance") and tree.declares_analysis("lm", "curve", None)
    assert not tree.declares_analysis("lm", "curve", "similarity") and not tree.declares_analysis("mt", "curve", None)
    assert tree.declares_analysis("lm", "ablation", None) and tree.declares_analysis("lm", "roles", "importance*")
    assert RunTree(tmp_path).declares_analysis("lm", "curve", "similarity")
    claims = {c.id: c for c in load_all(REPLICATIONS)}
    similarity = evaluate(claims["B3-pt-similarity"], tree)
    assert (similarity.verdict, similarity.precondition) == ("not run at this preset", "not run")
    assert "lm/analysis/curve/similarity" in similarity.note
    random = evaluate(claims["B3-pt-random"], tree)  # its random curve is undeclared too; importance is declared
    assert random.verdict == "not run at this preset" and "lm/analysis/curve/importance" not in random.note
    declared = RunTree(tmp_path, labels=["lm/analysis/curve/importance/seed0", "lm/analysis/curve/similarity/seed0"])
    assert evaluate(claims["B3-pt-similarity"], declared).verdict == "inconclusive"  # declared, its files missing


def test_the_rule_names_each_reason_a_claim_is_not_run_at_this_preset():
    """*not run at this preset* is explained for the reasons the ledger's rows have: a replication whose settings
    are null there, a task or an arm its settings leave out, or several (a merged ledger); none without such a
    row."""
    from heads.report.claims import NO_TASK, NOT_DECLARED, ClaimResult, ledger_markdown

    claims = load_all(REPLICATIONS, ["overprovisioning"])[:2]
    null = ClaimResult(claims[0], "not run at this preset", note="replication 'x' does not run at preset 'small'")
    arm = ClaimResult(claims[1], "not run at this preset", note=f"{NOT_DECLARED} lm/scratch/uniform/0.5 (...)")
    task = ClaimResult(claims[1], "not run at this preset", note=f"{NO_TASK} 'cls' models for x (its runs are ...)")
    replication, trimmed = "does not run at this preset (its settings say null)", "runs at this preset but not an arm"
    other = "runs at this preset but none of the claim's task (its settings at this preset make models of other tasks"
    assert replication in ledger_markdown([null]) and trimmed not in ledger_markdown([null])
    assert trimmed in ledger_markdown([arm]) and replication not in ledger_markdown([arm])
    assert f"the claim's replication {replication}, or {trimmed}" in ledger_markdown([null, arm])
    assert other not in ledger_markdown([null, arm])
    only_task = ledger_markdown([task])
    assert f"the claim's replication {other}" in only_task and replication not in only_task and trimmed not in only_task
    assert f"the claim's replication {replication}, or {other}" in ledger_markdown([null, task, arm])
    assert f"only; the note names them), or {trimmed}" in ledger_markdown([null, task, arm])
    assert "*not run at this preset*" not in ledger_markdown([replace(arm, verdict="inconclusive")])


def test_speed_timings_with_a_nan_are_read_without_it():
    """A speed row whose examples count is NaN falls back to its examples/s; a NaN time is skipped."""
    from heads.report.speed_records import samples as speed_samples

    rows = [{"ratio": 0.5, "batch": 1, "times": [0.5, float("nan"), 0.25], "examples": 10},
            {"ratio": 0.5, "batch": 2, "times": [0.5], "examples": float("nan"), "examples_per_s": 7.0}]
    assert speed_samples(rows, 0.5, 1) == [20.0, 40.0]
    assert speed_samples(rows, 0.5, 2) == [7.0]


def test_error_bars_are_never_negative_even_for_a_mean_outside_its_clipped_interval():
    """A share below 0 (bad data) has a mean under its interval clipped to [0, 1]: matplotlib refuses a negative
    error bar, so the figure would fail; the bar is empty instead, and a missing bound gives none."""
    from heads.report.figures import _yerr

    below, above = _yerr([-0.2, 0.5, None], [0.0, 0.25, 0.1], [0.1, None, 0.2])
    assert below == [0.0, 0.25, 0.0] and above == [pytest.approx(0.3), 0.0, 0.0]


def test_a_summary_whose_metric_is_not_a_name_is_read_with_its_tasks_metric(tree_root, tmp_path):
    """A corrupt summary (its metric a mapping) failed every table reading the metric's range; the task's
    metric stands in, and the replication renders."""
    from heads.report.render import render_replication

    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)
    path = runs / "lm" / "baseline" / "none" / "0.0" / "seed0" / "summary.json"
    data = json.loads(path.read_text())
    data["metric"] = {}
    path.write_text(json.dumps(data))
    tree = RunTree(runs)
    assert {r.record["metric"] for r in tree.runs if r.task == "lm"} == {"perplexity"}
    assert render_replication("overprovisioning", tree, tmp_path / "out", REPLICATIONS)


def test_a_summary_with_a_nan_step_count_is_read_without_it(tree_root, tmp_path):
    """The warm-up window fell back to 10 % of a NaN step count and int(NaN) failed the whole run tree."""
    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)
    summaries = sorted(runs.glob("lm/baseline/none/0.0/seed1/summary.json"))
    data = json.loads(summaries[0].read_text())
    data["steps"] = float("nan")
    summaries[0].write_text(json.dumps(data))
    run = next(r for r in RunTree(runs).runs if r.task == "lm" and r.variant == "baseline" and r.seed == 1)
    assert run.record["steps"] is None and run.record["final_val_loss"] is not None


@pytest.mark.parametrize("name", [n for n in NAMES if (REPLICATIONS / n / "claims.yaml").exists()])
def test_a_ledger_reads_no_record_it_does_not_register(tmp_path, name):
    """One path for reading runs: a replication's ledger names the environments of the records its claims read
    (RunTree.reads). Delete every run and analysis that was not registered, render again: the ledger is the
    same, so no claim, precondition or baseline read a record behind the environment note's back."""
    from heads.report.baselines import baselines_table
    from heads.report.claims import evaluate_all, ledger_table

    def render(root: Path) -> tuple[str, RunTree]:
        tree = RunTree(root)
        tree.reset_reads()
        results = evaluate_all(load_all(REPLICATIONS, [name]), tree)
        baselines = baselines_table(tree, (p for r in results for p in r.claim.requires))
        return ledger_table(results).to_csv() + baselines.to_csv(), tree

    root = make_tree(tmp_path)
    before, tree = render(root)
    read = tree.reads()
    assert read, "the claims read nothing: the test would prove nothing"
    removed = 0
    for run in tree.runs:
        if run.name not in read:
            shutil.rmtree(run.path)
            removed += 1
    for found in sorted(root.glob("*/analysis/*")):  # a kind's folder (or a file named after the kind)
        task, kind = found.parts[-3], found.name.split(".")[0]
        if f"{task}/analysis/{kind}" not in read:
            shutil.rmtree(found) if found.is_dir() else found.unlink()
            removed += 1
    assert removed, "every record was read: nothing left to check"
    after, _ = render(root)
    assert after == before


def test_a_claim_on_run_fields_registers_the_runs_it_read_for_the_environment_note(tmp_path):
    """The runs a `from: run` selector reads (A1's pruned and baseline runs) are among the records whose
    environments a ledger reports, as the analyses a claim reads are (a mixed-machine pair is never missed)."""
    tree = RunTree(make_tree(tmp_path))
    claim = _claim(kind="paired_difference", task="cls", direction="greater", tolerance=-0.02,
                   a={"variant": "posthoc", "arm": "importance", "ratio": 0.5, "field": "value"},
                   b={**BASE, "field": "value"})
    assert not tree.environments(read_only=True)
    evaluate(claim, tree)
    read = set(tree.environments(read_only=True))
    assert {f"cls/posthoc/importance/0.5/seed{s}" for s in SEEDS} <= read
    assert {f"cls/baseline/none/0.0/seed{s}" for s in SEEDS} <= read
    assert not any(k.startswith("lm/") for k in read)


def test_step_counts_are_judged_at_the_evaluation_interval(tree_root):
    """A count to the target is known only between two evaluations (every 50 steps here): each seed's bracket is
    recorded, the interval spans both ends, and seeds that all reached it at one evaluation are not a
    zero-width interval but the brackets' span."""
    tree = RunTree(tree_root)
    for run in tree.select("lm", **BASE):
        hit, before = run.record["steps_to_target"], run.record["steps_to_target_from"]
        assert hit - before == 50 and run.record["time_to_target_from"] < run.record["time_to_target"]
    # the baseline against itself: a ratio of exactly 1 on every seed, known to [before/hit, hit/before]
    same = _claim(kind="paired_ratio", direction="less", tolerance=-0.3,
                  a={**BASE, "field": "steps_to_target"}, b={**BASE, "field": "steps_to_target"})
    result = evaluate(same, tree)
    hit = tree.select("lm", **BASE)[0].record["steps_to_target"]
    assert result.verdict == "inconclusive" and result.p_value is None
    assert (result.estimate.ci_low, result.estimate.ci_high) == pytest.approx(((hit - 50) / hit, hit / (hit - 50)))
    assert "no spread to test" in result.note and "resolution" in result.note
    # a count that differs by seed: judged with every seed at the low and at the high end of its bracket
    steps = _claim(kind="value", direction="less", tolerance=10_000, a={**BASE, "field": "time_to_target"})
    both = evaluate(steps, tree)
    assert both.verdict == "supported" and "evaluation bracket" in both.method
    lows = [r.record["time_to_target_from"] for r in tree.select("lm", **BASE)]
    assert both.estimate.ci_low <= min(lows)  # the interval reaches down to the brackets' low ends


def test_a_share_of_significant_heads_resamples_examples_not_heads(tree_root, tmp_path):
    """The heads of one model are tested on one shared set of examples: where the ablation kept each head's
    per-example statistic, the share's interval comes from resampling those examples (every head's test redone
    on the same resample), not from heads counted as independent trials; a kept file that does not give the
    table's own share is not used."""
    from heads.paired import paired_ttests

    runs = tmp_path / "runs"
    shutil.copytree(tree_root, runs)
    rng = np.random.default_rng(7)
    sites = [(site, h) for site in CLS_SITES for h in range(HEADS)]
    for s in SEEDS:
        base = rng.integers(0, 2, 300).astype(float)
        flips = np.asarray([0.02 + 0.25 * (i % 5 == 0) for i in range(len(sites))])  # a few heads matter
        ablated = np.where(rng.random((len(sites), 300)) < flips[:, None], 0.0, base)  # heads that help
        p = paired_ttests(base, ablated)
        path = runs / "cls" / "analysis" / "ablation" / f"seed{s}.json"
        data = json.loads(path.read_text())
        data["heads"] = [{"site": site, "position": h, "head": h, "delta_loss": 0.0, "delta_accuracy": 0.0,
                          "p_value": float(q), "significant": bool(q < 0.05)}
                         for (site, h), q in zip(sites, p, strict=True)]
        _write(path, data)
        _write(path.with_name(f"seed{s}.examples.json"), {
            "units": 300, "test": "accuracy", "noise_tol": 1e-6, "heads": [list(x) for x in sites],
            "columns": {"base": base.tolist(), "ablated": ablated.tolist()}})
    claim = _claim(kind="value", task="cls", direction="less", tolerance=0.5,
                   a={"from": "ablation", "measure": "significant_share", "alpha": 0.01})
    result = evaluate(claim, RunTree(runs))
    assert result.estimate.examples and "two-level" in result.method and result.estimate.n == 3
    rows = [json.loads((runs / "cls" / "analysis" / "ablation" / f"seed{s}.json").read_text())["heads"]
            for s in SEEDS]
    assert result.estimate.mean == pytest.approx(np.mean([np.mean([r["p_value"] < 0.01 for r in h]) for h in rows]))
    assert result.estimate.ci_high > result.estimate.mean > result.estimate.ci_low
    # a kept file whose tests do not give the table's share (not the examples it was tested on): seed-level
    kept = runs / "cls" / "analysis" / "ablation" / "seed0.examples.json"
    data = json.loads(kept.read_text())
    data["columns"]["ablated"] = [data["columns"]["base"]] * len(sites)
    _write(kept, data)
    assert not evaluate(claim, RunTree(runs)).estimate.examples


def test_a_claim_on_shards_of_a_shipped_model_says_what_its_seeds_and_model_are(tree_root, monkeypatch):
    """Seeds that are shards of one shipped model's test text (its runs' eval.shards) and the model's provenance
    reach every row's note from the runs themselves; the shards' two-level resampling is not doubled."""
    from heads.report.collect import _provenance

    assert _provenance({"model": {"source": "bergamot-en-pt"}, "eval": {"shards": 4}}) == ("bergamot-en-pt", 4)
    assert _provenance({}) == ("config", 1)
    tree = RunTree(tree_root)
    claim = parse_claim({"id": "T", "text": "t", "task": "lm", "kind": "value", "direction": "less", "tolerance": 99,
                         "a": {"variant": "baseline", "arm": "none", "ratio": 0.0, "field": "value"}}, "x", "test")
    plain = evaluate(claim, tree).note
    assert "shards" not in plain and "Bible" not in plain
    monkeypatch.setattr(tree, "baselines_of", lambda task: ({"bergamot-en-pt"}, {4}))
    note = evaluate(claim, tree).note
    assert "seeds are disjoint shards of the held-out text (4, one per seed)" in note
    assert "bergamot-en-pt" in note and "may include Bible text" in note
