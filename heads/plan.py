"""What a preset's DAG costs before any job runs: runs, FLOPs, GPU-hours, memory per training job, disk.

Everything comes from the run sheet (:mod:`heads.sheet`) and each run's resolved configuration; models are
sized from their transformers *config* (:mod:`heads.flops`), never instantiated, so the paper preset's
334M-parameter LM is planned in seconds on a laptop. The numbers are estimates with stated assumptions
(:data:`ASSUMPTIONS`, printed with every plan):

* training FLOPs = ``flops_per_token(config, full layout, tokens per example).total`` (forward + backward =
  3 x forward) x ``steps * batch_size * tokens per example``. Runs that prune heads while or before training are
  costed as the full model (an upper bound: pruning removes attention projections and matmuls only);
* evaluation and analysis jobs are forward passes (importance scoring adds a backward) over the batches their
  sheet entry asks for, at the full model's FLOPs per token (pruned models cost less);
* GPU-hours = FLOPs / (peak dense bf16 TFLOP/s x MFU);
* peak memory of a training job = 16 bytes per parameter (fp32 weights and gradients, two fp32 AdamW moments)
  + activations of one micro-batch (Korthikanti et al. 2022), no recomputation, one GPU;
* disk = final model + one checkpoint (model + two AdamW moments), fp32, + snapshots + pruned models.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, astuple, dataclass, field
from pathlib import Path
from typing import Any

from heads.config import ConfigError, RunConfig, flatten, nest
from heads.sheet.assemble import build
from heads.sheet.declare import RunSpec
from heads.sheet.settings import preset_settings

# heads.flops (through heads.surgery) imports torch: it is imported where a model is sized, so the command
# line's parser, which reads the GPU table below for its help, starts without torch (~5 s a job).


class PlanError(ValueError):
    """A preset, GPU class or task the plan cannot cost; the message names what would do."""


@dataclass(frozen=True)
class Gpu:
    """A GPU class: peak dense bf16 tensor throughput and memory, from the vendor's datasheet."""

    name: str
    tflops: float  # dense bf16, no 2:4 sparsity
    memory_gib: float


# NVIDIA datasheets, dense BF16 tensor-core TFLOP/s (the datasheets' headline figures are twice these, "with
# sparsity"); H200 is the SXM part, whose compute equals the H100 SXM's.
GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("A100-40GB", 312, 40), Gpu("A100-80GB", 312, 80), Gpu("H100-PCIe", 756, 80), Gpu("H100-SXM", 989, 80),
    Gpu("H200", 989, 141), Gpu("L4", 121, 24), Gpu("L40S", 362, 48),
)}
DEFAULT_GPU = "H100-SXM"
DEFAULT_MFU = 0.35


ASSUMPTIONS = (
    "peak TFLOP/s: NVIDIA datasheets, dense bf16 (no sparsity); GPU-hours = FLOPs / (peak * MFU)",
    "FLOPs: heads.flops (matmuls only, backward = 2 x forward) of the full, unpruned model at the longest "
    "example (lm seq_len; mt seq_len per side; cls 2 * seq_len + 3): an upper bound for pruned and padded runs",
    "eval FLOPs: validation (eval_batches every eval_every steps) and one final evaluation per training run, "
    "plus analyses as forward passes over their batches (importance scoring: forward + backward; mt decoding "
    "counted as one forward per beam); rough",
    "memory per training job: 16 B/parameter (fp32 weights and gradients, two fp32 AdamW moments; autocast "
    "keeps weights fp32) + activations of one micro-batch (data.batch_size / train.accumulate), Korthikanti et "
    "al. 2022 'Reducing Activation Recomputation in Large Transformer Models': per layer s*b*d*(34 + 5*a*s/d) "
    "bytes at 16-bit (cross-attention adds s*b*d*(13 + 5*a*s/d)), doubled for train.precision=fp32, "
    "+ 4*s*b*V for fp32 logits in the loss; no recomputation, one GPU, no allocator slack",
    "disk per training run: final model + one checkpoint (model + 2 AdamW moments; none with "
    "train.keep_checkpoint=false), fp32 = 16 B/parameter, "
    "+ 4 B/parameter per snapshot; pruned models 4 B/parameter (upper bound); data and tokenizers not counted",
)

# task -> (architecture heads.flops sizes, tokens per example from data.seq_len: the longest an example gets)
_TASKS = {
    "lm": ("LlamaForCausalLM", lambda n: n),  # windows of exactly seq_len
    "mt": ("MarianMTModel", lambda n: n),  # each side cut to seq_len; a token is a source + a target token
    "cls": ("BertForSequenceClassification", lambda n: 2 * n + 3),  # [CLS] a [SEP] b [SEP]
    # a group of 8 verse pairs: 16 sentences, each cut to seq_len (heads.tasks.retrieval.GROUP)
    "retrieval": ("MPNetForRetrieval", lambda n: 16 * n),
}
# sentences an example holds where the model encodes each apart (attention spans one sentence, not the example)
_SENTENCES = {"retrieval": 16}
_LABELS = {"hub": 3, "offline": 2}  # MNLI's three classes; the offline paraphrase task's two


@dataclass(frozen=True)
class Shape:
    """A model as the plan sees it: config, architecture, parameters and FLOPs per token (full model)."""

    config: Any
    architecture: str
    tokens: int  # per example
    params: int
    train_per_token: float  # forward + backward
    forward_per_token: float
    heads: tuple[int, ...]  # heads per attention site


def model_config(cfg: RunConfig):
    """The transformers config the task's ``build_model`` would build, without weights (vocabulary: the
    configured tokenizer size, an upper bound on a tokenizer trained on little text)."""
    from heads import models

    m, n = cfg.model, cfg.data.seq_len
    from heads import shipped

    if m.source in shipped.SHIPPED and m.source != "minilm":  # a shipped checkpoint: its own config
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(shipped.path(m.source, cfg.data.root))
    if m.source not in ("config", "minilm"):  # a checkpoint folder: its own config
        from transformers import AutoConfig

        if not (Path(m.source) / "config.json").is_file():
            raise PlanError(f"model.source: {m.source!r} has no config.json to size the model from")
        return AutoConfig.from_pretrained(m.source)
    if cfg.task == "lm":
        return models.llama_config(m.vocab, m.d, m.layers, m.heads, m.kv_heads or None, m.ff or None,
                                   max(m.max_len, n))
    if cfg.task == "retrieval":
        from heads.embedding import mpnet_config

        return mpnet_config(m.vocab, m.d, m.layers, m.heads, m.ff or None, max(m.max_len, n))
    if cfg.task == "mt":
        return models.marian_config(m.vocab, m.d, m.layers, m.heads, m.ff or None, max(m.max_len, n + 2))
    labels = _LABELS.get(cfg.data.source, 2)
    if m.source == "minilm":
        from transformers import BertConfig

        return BertConfig.from_pretrained(models.minilm_path(), num_labels=labels)
    config = models.bert_config(m.vocab, m.d, m.layers, m.heads, m.ff or None, max(m.max_len, 2 * n + 3))
    config.num_labels = labels
    return config


def shape(cfg: RunConfig) -> Shape:
    """The full model of ``cfg``, sized from its config (cached: a DAG has few distinct models)."""
    if cfg.task not in _TASKS:
        raise PlanError(f"task {cfg.task!r}: the plan sizes {sorted(_TASKS)} only")
    key = (cfg.task, astuple(cfg.model), cfg.data.seq_len, cfg.data.source)
    if key not in _SHAPES:
        from heads.flops import count_params, flops_per_token

        architecture, tokens_of = _TASKS[cfg.task]
        config = model_config(cfg)
        tokens = tokens_of(cfg.data.seq_len)
        seq = tokens // _SENTENCES.get(cfg.task, 1)  # the length attention spans
        try:
            flops = flops_per_token(config, None, seq, architecture=architecture)
        except ValueError:  # a checkpoint of a class the task's default is not (a shipped Bergamot student is no
            # MarianMTModel): size the class its config names
            architecture = (getattr(config, "architectures", None) or [architecture])[0]
            flops = flops_per_token(config, None, seq, architecture=architecture)
        _SHAPES[key] = Shape(config, architecture, tokens, count_params(config, architecture=architecture),
                             flops.total, flops.forward, tuple(_site_heads(config)))
    return _SHAPES[key]


_SHAPES: dict[tuple, Shape] = {}


def _site_heads(config) -> list[int]:
    """Heads of every attention site (Marian decoders have a self and a cross site per layer)."""
    if config.model_type == "marian":
        return [config.encoder_attention_heads] * config.encoder_layers + \
            [config.decoder_attention_heads] * 2 * config.decoder_layers
    return [config.num_attention_heads] * config.num_hidden_layers


def activation_bytes(config, tokens: int, batch: int, wide: bool = False) -> int:
    """Korthikanti et al. 2022 (eq. 1 per layer, 16-bit, no recomputation; ``wide``: fp32, twice that) plus the
    fp32 logits of the loss."""
    scale = 2 if wide else 1

    def layer(d: int, a: int, per_d: int) -> float:
        return scale * tokens * batch * d * (per_d + 5 * a * tokens / d)

    t = config.model_type
    if t == "marian":
        d = config.d_model
        enc = config.encoder_layers * layer(d, config.encoder_attention_heads, 34)
        # a decoder layer is an encoder layer plus a cross-attention block and its norm (13 sbh + 5 as^2 b)
        dec = config.decoder_layers * (layer(d, config.decoder_attention_heads, 34)
                                       + layer(d, config.decoder_attention_heads, 13))
        return int(enc + dec + 4 * tokens * batch * config.decoder_vocab_size)
    body = config.num_hidden_layers * layer(config.hidden_size, config.num_attention_heads, 34)
    # causal LMs (Llama, Gemma 3): a logit row per token; cls: one per example
    outputs = config.vocab_size if t in ("llama", "gemma3_text") else config.num_labels / tokens
    return int(body + 4 * tokens * batch * outputs)


@dataclass
class Job:
    """The estimated cost of one sheet entry."""

    label: str
    task: str
    command: str
    train_flops: float = 0.0
    eval_flops: float = 0.0
    memory_bytes: int = 0  # training jobs only
    disk_bytes: int = 0
    params: int = 0
    precision: str = ""  # training jobs: train.precision, which the memory estimate follows


def run_config(e: RunSpec, preset: str) -> RunConfig:
    """The entry's resolved configuration, as ``sheet.command_line`` would pass it (other runs' files left out:
    they change where a model starts, not its size, or shrink it)."""
    from heads.resolve import resolve

    pairs = flatten(e.config)
    if e.command == "train" and e.strategy != "none":
        pairs += [("strategy.name", e.strategy), *((f"strategy.params.{k}", v) for k, v in e.params.items())]
    return resolve(e.task, preset, overlay=json.loads(json.dumps(nest(pairs))))


def _eval_examples(cfg: RunConfig) -> int:
    """Forward passes (in examples) of one ``task.evaluate``: mt decodes with ``beams`` hypotheses."""
    if cfg.task == "retrieval":  # max_examples counts verse pairs; an example (what a token count is of) is 8
        return math.ceil(cfg.eval.max_examples / 8)
    return cfg.eval.max_examples * (cfg.eval.beams if cfg.task == "mt" else 1)


def train_job(e: RunSpec, cfg: RunConfig) -> Job:
    """A training run: its steps' FLOPs, in-loop validation and final evaluation, memory on one GPU, disk."""
    s, t, b = shape(cfg), cfg.train, cfg.data.batch_size
    validation = (t.steps // t.eval_every) * t.eval_batches * b if t.eval_every > 0 else 0
    # train.accumulate / precision / keep_checkpoint are read with defaults: configs from before they existed
    micro = math.ceil(b / getattr(t, "accumulate", 1))
    wide = getattr(t, "precision", "fp32") == "fp32"  # fp32 activations: twice the 16-bit estimate
    checkpoint = 12 if getattr(t, "keep_checkpoint", True) else 0  # weights + two moments, fp32
    return Job(e.label, e.task, e.command, train_flops=s.train_per_token * t.steps * b * s.tokens,
               eval_flops=s.forward_per_token * s.tokens * (validation + _eval_examples(cfg)),
               memory_bytes=16 * s.params + activation_bytes(s.config, s.tokens, micro, wide),
               disk_bytes=s.params * (4 + checkpoint + 4 * len(t.snapshots)), params=s.params,
               precision=getattr(t, "precision", "fp32"))


def job_memory_mb(cfg: RunConfig, slack: float = 1.25, runtime_mb: int = 1024) -> int:
    """What a job of ``cfg`` on this model asks the scheduler for: a training run's memory (weights, gradients,
    two AdamW moments, one micro-batch's activations; the costliest job of the battery) with ``slack`` for the
    allocator, plus ``runtime_mb`` for the interpreter, torch and the data."""
    s, t = shape(cfg), cfg.train
    micro = math.ceil(cfg.data.batch_size / getattr(t, "accumulate", 1))
    wide = getattr(t, "precision", "fp32") == "fp32"
    per = _SENTENCES.get(cfg.task, 1)  # sentences encoded apart: their attention is per sentence
    need = 16 * s.params + activation_bytes(s.config, s.tokens // per, micro * per, wide)
    return math.ceil(need * slack / 2**20) + runtime_mb


def _curve_levels(heads: tuple[int, ...], step: float, max_ratio: float, floor: int) -> int:
    """Levels past the unpruned one that an iterative curve evaluates, as ``Iterative.curve`` counts them: a
    level that rounds to no new head is skipped, and the curve ends at ``max_ratio`` or where the ``floor`` every
    site keeps makes the level unreachable."""
    def half_up(x: float) -> int:
        return math.floor(x + 0.5)

    total = sum(heads)
    prunable = total - sum(min(floor, h) for h in heads)
    cap = half_up(max_ratio * total)
    level, pruned, points = 0, 0, 0
    while True:
        level += 1
        target = min(half_up(level * step * total), cap)
        if target <= pruned:
            if target >= cap:
                return points
            continue
        if target > prunable:
            return points
        pruned, points = target, points + 1


# scorer -> forward-pass equivalents per scoring batch (importance needs gradients: forward + backward)
_SCORER_PASSES = {"importance": 3, "random": 0}


def analysis_job(e: RunSpec, cfg: RunConfig) -> Job:
    """Forward passes of an analysis, in examples, at the full model's FLOPs per token."""
    from heads.strategies import build_strategy

    s, b = shape(cfg), cfg.data.batch_size
    p, o = e.params, e.options
    heads, sites = sum(s.heads), len(s.heads)
    disk = 0
    if e.command == "ablate":  # every head alone and every site's all-but-one, plus the unablated model
        examples = (heads + sites + 2) * o.get("batches", 8) * b
        if o.get("test") == "bleu":  # and the decoding set translated once per head and once unablated
            examples += (heads + 1) * _eval_examples(cfg)
    elif e.command == "curve":
        q = build_strategy("iterative", p).params
        levels = _curve_levels(s.heads, q.step, q.max_ratio, q.floor)
        scoring = _SCORER_PASSES.get(q.scorer, 1) * q.batches * b
        examples = q.orders * ((levels + 1) * _eval_examples(cfg) + levels * scoring)
    elif e.command == "prune":
        q = build_strategy(e.strategy, p).params
        scoring = _SCORER_PASSES.get(getattr(q, "scorer", "importance"), 1) * getattr(q, "batches", 8) * b
        scoring *= max(1, len(o.get("domains", [])))  # --domains: the batches are drawn from each domain
        examples = scoring + (_eval_examples(cfg) if o.get("evaluate") else 0)
        disk = 4 * s.params
    elif e.command == "mask":  # scoring (forward + backward), the oracle's measurements, every mask on the test set
        units = list(o.get("units", ["head", "group"]))
        kv = getattr(s.config, "num_key_value_heads", None) or s.config.num_attention_heads
        per_unit = {"head": heads, "group": heads * kv // s.config.num_attention_heads}
        masks = len(units) * len(o.get("orders", ["importance"])) * len(o.get("ratios", [0.3, 0.5]))
        examples = 3 * o.get("score_windows", 16) + (masks + 1) * o.get("test_windows", 256)
        if "oracle" in o.get("orders", []):  # each level closes every open unit alone on the scoring windows
            levels = math.floor(max(o.get("ratios", [0.5])) / o.get("oracle_step", 0.1) + 1e-9)
            examples += sum(per_unit[u] for u in units) * levels * o.get("score_windows", 16)
    elif e.command == "roles":  # the pruned model and its reference
        examples = 2 * o.get("batches", 4) * b
    elif e.command == "redundancy":  # one pass over the batches per similarity definition
        examples = len(o.get("pooling", ["token", "mean"])) * o.get("batches", 4) * b
    elif e.command == "shift":  # both models evaluated in domain and on each shifted corpus
        examples = 2 * (1 + len(o.get("datasets", []))) * _eval_examples(cfg)
    elif e.command == "memory":  # per model a warm step and ~7 measured ones (doubling, then bisection) up to
        # twice the cap batch; a training step is about three forward passes
        examples = 2 * 3 * (1 + 7 * 2 * o.get("cap_batch", 32))
    elif e.command == "clock":  # per model a warm step and (repeats x steps) timed ones at the training batch
        models = 3 if o.get("dropout") is not None else 2
        examples = 3 * models * (1 + o.get("repeats", 7) * o.get("steps", 10)) * b
    elif e.command == "speed":  # (repeats 5 + warm-up 1) timed passes of 32 examples per ratio and batch size
        examples = 6 * len(o.get("ratios", [0.0])) * sum(max(32, k) for k in o.get("batches", [1, 32]))
    else:  # trivial: a logistic regression on the CPU
        examples = 0
    return Job(e.label, e.task, e.command, eval_flops=s.forward_per_token * s.tokens * examples,
               disk_bytes=disk, params=s.params)


@dataclass
class Totals:
    """Costs summed over a set of jobs (memory: the largest training job)."""

    train_runs: int = 0
    analyses: Counter = field(default_factory=Counter)  # command -> jobs
    train_flops: float = 0.0
    eval_flops: float = 0.0
    gpu_hours: float = 0.0
    train_gpu_hours: float = 0.0
    peak_memory_bytes: int = 0
    disk_bytes: int = 0
    params: int = 0  # the largest model

    def add(self, job: Job, seconds_per_flop: float) -> None:
        if job.command == "train":
            self.train_runs += 1
        else:
            self.analyses[job.command] += 1
        self.train_flops += job.train_flops
        self.eval_flops += job.eval_flops
        self.train_gpu_hours += job.train_flops * seconds_per_flop / 3600
        self.gpu_hours += (job.train_flops + job.eval_flops) * seconds_per_flop / 3600
        self.peak_memory_bytes = max(self.peak_memory_bytes, job.memory_bytes)
        self.disk_bytes += job.disk_bytes
        self.params = max(self.params, job.params)


@dataclass
class Plan:
    """A preset's DAG, costed per task and in all."""

    preset: str
    gpu: Gpu
    mfu: float
    jobs: list[Job]
    tasks: dict[str, Totals]
    total: Totals
    assumptions: tuple[str, ...] = ASSUMPTIONS

    @property
    def precisions(self) -> list[str]:
        """The ``train.precision`` values of the training runs (GPU-hours assume bf16 throughput whatever they are)."""
        return sorted({j.precision for j in self.jobs if j.command == "train"})

    def to_dict(self) -> dict[str, Any]:
        def totals(t: Totals) -> dict[str, Any]:
            return {**asdict(t), "analyses": dict(sorted(t.analyses.items())),
                    "analysis_jobs": sum(t.analyses.values()),
                    "fits_gpu": t.peak_memory_bytes <= self.gpu.memory_gib * 2**30}

        return {"preset": self.preset, "gpu": asdict(self.gpu), "mfu": self.mfu,
                "tasks": {k: totals(v) for k, v in self.tasks.items()}, "total": totals(self.total),
                "precisions": self.precisions, "assumptions": list(self.assumptions),
                "jobs": [asdict(j) for j in self.jobs]}


def gpu(name: str) -> Gpu:
    if name not in GPUS:
        raise PlanError(f"GPU class {name!r} is not one of {sorted(GPUS)}")
    return GPUS[name]


def plan(preset: str, gpu_name: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU,
         root: str | Path = "replications") -> Plan:
    """Cost every entry of ``preset``'s run sheet (``root``: the replications folder)."""
    from heads.presets import names

    if preset not in names():
        raise PlanError(f"preset {preset!r} is not one of {names()}")
    if not 0.0 < mfu <= 1.0:
        raise PlanError(f"MFU {mfu} is outside (0, 1]")
    g = gpu(gpu_name)
    if not any(Path(root).glob("*/runs.py")):
        raise PlanError(f"{root}: holds no replication (a folder with runs.py); run from the repository root")
    seconds_per_flop = 1 / (g.tflops * 1e12 * mfu)
    try:
        sheet = build(root, preset_settings(root, preset, None))
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    jobs = [train_job(e, cfg) if e.command == "train" else analysis_job(e, cfg)
            for e in sheet.runs.values() for cfg in [run_config(e, preset)]]
    tasks: dict[str, Totals] = {}
    total = Totals()
    for job in jobs:
        tasks.setdefault(job.task, Totals()).add(job, seconds_per_flop)
        total.add(job, seconds_per_flop)
    return Plan(preset, g, mfu, jobs, dict(sorted(tasks.items())), total)


def _flops(x: float) -> str:
    return f"{x:.2e}" if x else "0"


def _bytes(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _hours(h: float) -> str:
    """Three significant figures: the small presets cost seconds, not tenths of an hour."""
    return f"{h:,.1f}" if h >= 10 else f"{h:.3g}"


def table(p: Plan) -> list[str]:
    """The plan as Markdown table lines: one row per task and one in all (a job too big for the GPU says so)."""

    def row(name: str, t: Totals) -> str:
        fits = t.peak_memory_bytes <= p.gpu.memory_gib * 2**30
        cells = [name, str(t.train_runs), str(sum(t.analyses.values())), f"{t.params / 1e6:,.1f}M",
                 _flops(t.train_flops), _flops(t.eval_flops), _hours(t.train_gpu_hours), _hours(t.gpu_hours),
                 _bytes(t.peak_memory_bytes) + ("" if fits else " (too big)"), _bytes(t.disk_bytes)]
        return "| " + " | ".join(cells) + " |"

    return ["| task | training runs | analysis jobs | params (largest) | train FLOPs | eval + analysis FLOPs "
            "| GPU-h train | GPU-h all | peak memory / training job | disk |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
            *(row(name, t) for name, t in p.tasks.items()), row("**all**", p.total)]


def share(p: Plan) -> str:
    """One sentence on the task that costs most: its share of the FLOPs and what its training runs are."""
    name, t = max(p.tasks.items(), key=lambda kv: kv[1].train_flops + kv[1].eval_flops)
    whole = p.total.train_flops + p.total.eval_flops
    part = (t.train_flops + t.eval_flops) / whole if whole else 0.0
    each = t.train_flops / t.train_runs if t.train_runs else 0.0
    return (f"`{name}` is {part * 100:.0f} % of the compute: {t.train_runs} training runs, the largest model "
            f"{t.params / 1e6:,.1f} M parameters, {_flops(each)} training FLOPs a run on average.")
