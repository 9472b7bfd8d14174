"""Sizing the ``small`` preset: learning curves of candidate models on two CPU cores, within a wall-clock budget.

The ``small`` preset must meet the claims' preconditions (replications/preconditions.yaml) at a CPU cost one
working day can pay: mt at least 15 BLEU on held-out books, lm converged (validation loss within 2 % of what
twice the steps gives), a pair task's accuracy in 75-95 % (coherence, cls_hard). This measures what each
candidate reaches, against steps and seconds, so the preset is chosen from measurements, not guesses.

Each candidate is one ``heads train`` run (the tiny preset's task config with the candidate's overrides), at
most ``--budget`` minutes of wall-clock: a run still going at the budget is stopped and its snapshots are what it
reached. mt runs use an inverse-square-root schedule, so a snapshot at step S is what a run of S steps gives
(a cosine schedule's mid-run snapshots are not); every snapshot is decoded (greedy, ``--decode`` validation
sentences) for BLEU. lm candidates are trained to S and to 2S steps as separate runs (their own schedules),
which is the convergence rule itself. Candidates run ``--jobs`` at a time, one torch thread each.

    python benchmarks/bench_small_sizing.py --task mt --budget 45
    python benchmarks/bench_small_sizing.py --task lm coherence cls_hard --jobs 2
    python benchmarks/bench_small_sizing.py --task lm --candidates lm-4x128-union-3600 lm-4x128-union-7200

Rows go to ``results/small/sizing.csv`` (merged by candidate, so candidates can be measured in separate calls)
and the curves to ``results/small/sizing.png``. A candidate trained once is not trained again (its stop at the
budget is recorded beside its run folder, and resuming it would overrun the budget): a second call only evaluates
what the first left. The run folders (``--runs``) are git-ignored.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (task, overrides); steps and snapshots are part of each candidate
CANDIDATES: dict[str, tuple[str, list[str]]] = {
    # the tiny Marian's shape (2+2 x 128, 8 heads; a 4000-token BPE) given time, and two wider ones
    "mt-2x128": ("mt", ["model.layers=2", "model.d=128", "model.heads=8", "model.vocab=4000"]),
    "mt-3x256": ("mt", ["model.layers=3", "model.d=256", "model.heads=8", "model.ff=1024", "model.vocab=4000"]),
    "mt-4x256": ("mt", ["model.layers=4", "model.d=256", "model.heads=8", "model.ff=1024", "model.vocab=4000"]),
    # the small preset's Marian (2+2 x 128, 2000-token BPE, batch 32 x 48 tokens, label smoothing as the preset):
    # the shape the DAG trains at 0.29 s a step, given the recipe's schedule and all the steps its budget allows
    "mt-2x128-b32": ("mt", ["model.layers=2", "model.d=128", "model.heads=8", "model.vocab=2000",
                            "data.seq_len=48", "data.batch_size=32", "train.label_smoothing=0.1"]),
    # the tiny Llama (4 x 128, 8 heads) at S and 2S steps
    "lm-4x128-1200": ("lm", ["train.steps=1200", "train.warmup=100", "train.eval_every=100"]),
    "lm-4x128-2400": ("lm", ["train.steps=2400", "train.warmup=100", "train.eval_every=100"]),
    "lm-4x128-4800": ("lm", ["train.steps=4800", "train.warmup=100", "train.eval_every=200"]),
    # twice 4800: whether 4800 steps meet the convergence rule (4800 -> 9600 lowers the loss by at most 2 %)
    "lm-4x128-9600": ("lm", ["train.steps=9600", "train.warmup=100", "train.eval_every=400"]),
    # 3600 and twice it: whether three quarters of the steps (a quarter of the small DAG's LM cost) still converge
    "lm-4x128-3600": ("lm", ["train.steps=3600", "train.warmup=100", "train.eval_every=200"]),
    "lm-4x128-7200": ("lm", ["train.steps=7200", "train.warmup=100", "train.eval_every=400"]),
    # the same Llama on the Bible and Wikipedia's English extracts (data.dataset=lm_bible_wiki, about twice the
    # Bible's text: issue 55) at the small preset's batch (16 x 64 tokens) and evaluation, S and 2S: whether the
    # preset's 3600 steps meet the direct rule on a corpus it does not overfit as soon
    "lm-4x128-union-3600": ("lm", ["data.dataset=lm_bible_wiki", "data.batch_size=16", "eval.max_examples=512",
                                   "train.steps=3600", "train.warmup=100", "train.eval_every=200"]),
    "lm-4x128-union-7200": ("lm", ["data.dataset=lm_bible_wiki", "data.batch_size=16", "eval.max_examples=512",
                                   "train.steps=7200", "train.warmup=100", "train.eval_every=400"]),
    # a quarter of its width and half its depth, 8 heads still: converges in fewer, cheaper steps?
    "lm-2x64-2400": ("lm", ["model.layers=2", "model.d=64", "train.steps=2400", "train.warmup=100",
                            "train.eval_every=100"]),
    "lm-2x64-4800": ("lm", ["model.layers=2", "model.d=64", "train.steps=4800", "train.warmup=100",
                            "train.eval_every=200"]),
    # MiniLM fine-tuned on the coherence pairs and on the overlap-matched paraphrases (the tiny preset's recipe:
    # 500 steps)
    "coherence-minilm": ("coherence", []),
    "cls_hard-minilm": ("cls_hard", []),
}
MT_RECIPE = ["data.seq_len=64", "data.batch_size=64", "train.schedule=inverse_sqrt", "train.lr=0.001",
             "train.warmup=400", "train.steps=20000", "train.eval_every=250", "train.checkpoint_every=500",
             "train.dropout=0.1", "train.snapshots=[250,500,1000,1500,2000,3000,4000,5000,6000,8000,10000]"]


def _heads(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "heads", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def overrides_of(name: str) -> list[str]:
    """The candidate's overrides over the tiny preset's task config (mt: the inverse-sqrt recipe first)."""
    task, overrides = CANDIDATES[name]
    return [*(MT_RECIPE if task == "mt" else []), *overrides]


def warm_up(name: str, out: Path, data_root: str) -> None:
    """Prepare the candidate's data and tokenizer outside its budget (a 4000-token BPE takes minutes to train)."""
    task, _ = CANDIDATES[name]
    scratch = out / ".warmup" / name
    if scratch.exists():
        return
    done = _heads("train", "--task", task, "--preset", "tiny", "--out", str(scratch), f"data.root={data_root}",
                  "train.threads=1", *overrides_of(name), "train.steps=1", "train.snapshots=[]", "train.warmup=0",
                  "train.eval_every=1", "train.checkpoint_every=1", "eval.max_examples=1")
    if done.returncode != 0:
        raise RuntimeError(f"warm-up failed:\n{(done.stdout + done.stderr)[-2000:]}")


def train(name: str, out: Path, budget_s: float, data_root: str) -> dict:
    """Train one candidate for at most ``budget_s`` (once: a recorded result is returned as it was); whether it
    finished, was stopped at the budget or failed, and how long it took."""
    task, _ = CANDIDATES[name]
    record = out / f"{name}.train.json"
    if record.is_file():
        return json.loads(record.read_text())
    result = {"candidate": name, "status": "finished", "budget_s": budget_s}
    started = time.perf_counter()
    try:
        warm_up(name, out, data_root)
        started = time.perf_counter()
        run = _heads("train", "--task", task, "--preset", "tiny", "--out", str(out / name),
                     f"data.root={data_root}", "train.threads=1", *overrides_of(name), timeout=budget_s)
        if run.returncode != 0:
            result.update(status="failed", message=(run.stdout + run.stderr)[-2000:])
    except subprocess.TimeoutExpired:
        result["status"] = "stopped at the budget"  # the snapshots so far are what it reached
    except RuntimeError as exc:
        result.update(status="failed", message=str(exc))
    result["seconds"] = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _metrics(folder: Path) -> list[dict]:
    path = folder / "metrics.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line torn by the budget's stop
    return rows


def curve(name: str, out: Path, data_root: str, decode: int) -> list[dict]:
    """One row per evaluated step: validation loss, seconds of training to get there and, for mt snapshots, every
    finished run and the last checkpoint of a run stopped at the budget, the task metric on the validation split."""
    task, _ = CANDIDATES[name]
    folder = out / name
    rows = []
    metrics = _metrics(folder)  # read once: the seconds and the losses come from the same records
    seconds = {m["step"]: m.get("train_seconds") for m in metrics}
    for m in metrics:
        if m.get("val_loss") is not None:
            rows.append({"candidate": name, "task": task, "step": m["step"], "train_seconds": m.get("train_seconds"),
                         "val_loss": m["val_loss"], "metric": "", "value": ""})
    # (model, step): mt snapshots, then the finished run; a run stopped at the budget, its last checkpoint (what
    # it reached, where no snapshot was kept)
    models = [(p, int(p.name[5:])) for p in sorted((folder / "snapshots").glob("step-*"),
                                                   key=lambda p: int(p.name[5:]))] if task == "mt" else []
    if (folder / "summary.json").is_file():
        models.append((folder, json.loads((folder / "summary.json").read_text())["steps"]))
    elif (folder / "checkpoint" / "state.json").is_file():
        step = json.loads((folder / "checkpoint" / "state.json").read_text())["step"]
        if step not in {s for _, s in models}:
            models.append((folder / "checkpoint" / "model", step))
    for model, step in models:
        # beside the run folder, never in it: heads train refuses a folder holding files it did not write
        result_file = out / f"{name}.eval" / f"step-{step}.json"
        if not result_file.is_file():
            args = ["evaluate", str(model), "--split", "validation", "--out", str(result_file),
                    f"data.root={data_root}", "train.threads=1"]
            if model != folder:  # a snapshot or checkpoint is a model folder: the run's task and config apply
                args[2:2] = ["--task", task, "--config", str(folder / "config.json")]
            if task == "mt":
                args += ["eval.beams=1", f"eval.max_examples={decode}"]
            done = _heads(*args)
            if done.returncode != 0:
                print(f"{name} step {step}: heads evaluate failed:\n{(done.stdout + done.stderr)[-2000:]}",
                      file=sys.stderr)
                continue
        result = json.loads(result_file.read_text())
        metric = {"mt": "bleu", "lm": "perplexity"}.get(task, "accuracy")
        rows.append({"candidate": name, "task": task, "step": step, "train_seconds": seconds.get(step),
                     "val_loss": result.get("loss"), "metric": metric, "value": result.get(metric)})
    return rows


FIELDS = ["candidate", "task", "step", "train_seconds", "val_loss", "metric", "value"]


def merge(path: Path, rows: list[dict], names: set[str]) -> list[dict]:
    """Rows of the file for other candidates, then these; sorted by candidate and step."""
    kept = [r for r in csv.DictReader(path.open())] if path.is_file() else []
    kept = [r for r in kept if r["candidate"] not in names] + rows
    return sorted(kept, key=lambda r: (r["candidate"], int(r["step"]), r["metric"]))


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 6.4), squeeze=False)
    for j, task in enumerate(tasks):
        for name in sorted({r["candidate"] for r in rows if r["task"] == task}):
            mine = [r for r in rows if r["candidate"] == name]
            loss = [r for r in mine if not r["metric"] and r["train_seconds"] not in ("", None)]
            axes[0][j].plot([float(r["train_seconds"]) / 60 for r in loss], [float(r["val_loss"]) for r in loss],
                            label=name)
            scored = [r for r in mine if r["metric"] and r["value"] not in ("", None)]
            if scored:
                axes[1][j].plot([int(r["step"]) for r in scored], [float(r["value"]) for r in scored], "o-",
                                label=name)
                axes[1][j].set_ylabel(scored[0]["metric"] + " (validation)")
        axes[0][j].set(title=task, xlabel="minutes of training (1 thread)", ylabel="validation loss")
        axes[1][j].set_xlabel("step")
        for ax in axes[:, j]:
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


CONVERGED = 0.02  # the lm-converged rule: a run's final validation loss within 2 % of twice the steps'


def _final(rows: list[dict], name: str) -> dict:
    """The candidate's last evaluated step: validation loss and (where scored) its metric."""
    mine = [r for r in rows if r["candidate"] == name]
    loss = max((r for r in mine if not r["metric"] and r["val_loss"] not in ("", None)),
               key=lambda r: int(r["step"]), default=None)
    scored = max((r for r in mine if r["metric"] and r["value"] not in ("", None)),
                 key=lambda r: int(r["step"]), default=None)
    return {"loss": loss, "scored": scored}


def kept_notes(path: Path, new: list[str]) -> list[str]:
    """Every note on the measurement's conditions so far (``path``, one paragraph each, committed beside the
    results) with ``new`` appended: a later call measures other candidates, and the earlier ones' conditions
    still describe their rows."""
    notes = [n.strip() for n in path.read_text().split("\n\n") if n.strip()] if path.is_file() else []
    notes += [n.strip() for n in new if n.strip() and n.strip() not in notes]
    if notes:
        path.write_text("\n\n".join(notes) + "\n")
    return notes


def summary_markdown(rows: list[dict], runs: Path, jobs: int, notes: list[str] = ()) -> str:
    """``sizing.md``: per candidate what it reached in its budget, and the lm convergence rule between S and 2S
    (decided only where both runs finished all their steps)."""
    import torch

    lines = ["# Sizing the small preset", "",
             f"Measured by `benchmarks/bench_small_sizing.py` on {os.cpu_count()} CPU cores, one torch thread per "
             f"candidate, torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()} kernels); {jobs} "
             "candidate(s) at a time in the latest call. Curves: `sizing.csv`, `sizing.png`; the notes below are "
             "kept in `sizing_notes.md`.", "",
             *[line for note in notes for line in (note, "")],
             "| candidate | task | status | steps | training min | final val loss | metric at the last scored step |",
             "|---|---|---|--:|--:|--:|---|"]
    finals, statuses = {}, {}
    for name in sorted({r["candidate"] for r in rows}):
        record = runs / f"{name}.train.json"
        got = finals[name] = _final(rows, name)
        if record.is_file():
            status = json.loads(record.read_text())["status"]
        else:  # trained in an earlier session whose run folders are gone: sizing.csv says how far it got
            steps = next((int(o.split("=")[1]) for o in CANDIDATES.get(name, ("", []))[1]
                          if o.startswith("train.steps=")), None)
            reached = int(got["loss"]["step"]) if got["loss"] else None
            status = "finished" if steps is not None and reached == steps else "stopped before its steps"
        statuses[name] = status
        loss, scored = got["loss"], got["scored"]
        task = CANDIDATES[name][0] if name in CANDIDATES else "?"
        metric = f"{scored['metric']} {float(scored['value']):.4g} at step {scored['step']}" if scored else "–"
        if loss is None:
            lines.append(f"| {name} | {task} | {status} | – | – | – | {metric} |")
            continue
        minutes = "–" if loss["train_seconds"] in ("", None) else f"{float(loss['train_seconds']) / 60:.1f}"
        lines.append(f"| {name} | {task} | {status} | {loss['step']} | {minutes} | {float(loss['val_loss']):.4f} "
                     f"| {metric} |")
    def shape(over: list[str]) -> set[str]:  # a candidate's model and recipe, its step count aside
        return {o for o in over if not o.startswith(("train.steps=", "train.eval_every="))}

    pairs = []
    for name in finals:
        task, over = CANDIDATES.get(name, ("", []))
        steps = next((int(o.split("=")[1]) for o in over if o.startswith("train.steps=")), None)
        twice = next((n for n, (t, o) in CANDIDATES.items() if t == task and shape(o) == shape(over)
                      and f"train.steps={2 * (steps or 0)}" in o), None)
        if task == "lm" and steps and twice in finals:
            done = [n for n, want in ((name, steps), (twice, 2 * steps)) if statuses[n] == "finished"
                    and finals[n]["loss"] and int(finals[n]["loss"]["step"]) == want]
            if len(done) < 2:
                pairs.append(f"- {name} against {twice}: not decidable (both runs must finish their steps)")
                continue
            a, b = float(finals[name]["loss"]["val_loss"]), float(finals[twice]["loss"]["val_loss"])
            pairs.append(f"- {name}: final validation loss {a:.4f} against {b:.4f} at twice the steps "
                         f"({twice}): {100 * (a - b) / b:+.1f} % -> "
                         f"{'converged' if a - b <= CONVERGED * b else 'not converged'} by the 2 % rule")
    if pairs:
        lines += ["", "The lm convergence rule (a run of S steps is converged when twice the steps lowers its final "
                  "validation loss by at most 2 %):", "", *pairs]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", nargs="+", default=["mt", "lm", "coherence", "cls_hard"])
    p.add_argument("--candidates", nargs="+", help=f"(default: every one of --task; known: {sorted(CANDIDATES)})")
    p.add_argument("--budget", type=float, default=45.0, help="minutes of wall-clock per candidate")
    p.add_argument("--jobs", type=int, default=2, help="candidates trained at once, one thread each")
    p.add_argument("--decode", type=int, default=200, help="mt: validation sentences decoded per snapshot")
    p.add_argument("--runs", type=Path, default=ROOT / "results/small/sizing_runs", help="run folders (ignored)")
    p.add_argument("--data-root", default="resources/data")
    p.add_argument("--out", type=Path, default=ROOT / "results/small/sizing.csv")
    p.add_argument("--note", action="append", default=[],
                   help="a line for sizing.md on the conditions of the measurement (repeatable)")
    args = p.parse_args(argv)
    names = args.candidates or [n for n, (t, _) in CANDIDATES.items() if t in args.task]
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        raise SystemExit(f"unknown candidates {unknown}; known: {sorted(CANDIDATES)}")
    with ThreadPoolExecutor(args.jobs) as pool:
        trained = list(pool.map(lambda n: train(n, args.runs, args.budget * 60, args.data_root), names))
        curves = list(pool.map(lambda n: curve(n, args.runs, args.data_root, args.decode), names))
    rows = merge(args.out, [r for c in curves for r in c], set(names))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows({k: r.get(k, "") for k in FIELDS} for r in rows)
    if rows:
        figure(rows, args.out.with_suffix(".png"))
        notes = kept_notes(args.out.with_name(f"{args.out.stem}_notes.md"), args.note)
        args.out.with_suffix(".md").write_text(summary_markdown(rows, args.runs, args.jobs, notes))
    for t in trained:
        print(f"{t['candidate']}: {t['status']} in {t['seconds'] / 60:.1f} min"
              + (f"\n{t['message']}" if t.get("message") else ""), file=sys.stderr)
    print(args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
