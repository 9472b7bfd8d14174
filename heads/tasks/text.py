"""Shared pieces of the tasks: the tokenizer (a cached BPE for models from config, a pretrained model's own
otherwise) and the model (from config, a trained or pruned heads checkpoint, or any supported pretrained one
given as a folder or a hub id, with the task's head whatever the checkpoint's ``architectures`` says)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from heads import shipped
from heads.config import RunConfig
from heads.io import InputError
from heads.tasks.base import ModelMismatch, Task


class SourceError(InputError):
    """A model.source that cannot be loaded: no such folder, no tokenizer, or the hub out of reach."""


def pretrained(cfg: RunConfig) -> bool:
    """Whether the run starts from a checkpoint (shipped, a folder, a hub id) rather than from config."""
    return cfg.model.source != "config"


def source_path(source: str, root: str = shipped.DEFAULT_ROOT) -> str | Path:
    """A shipped name (converted on first use, cached under the data ``root``) or local folder as a path (a run
    folder: its model/); anything else as a hub id."""
    if source in shipped.SHIPPED:
        try:
            return shipped.path(source, root)
        except shipped.ShippedError as exc:
            raise SourceError(f"model.source {source}: {exc}") from None
    path = Path(source).expanduser()
    if path.exists():
        from heads.surgery.persist import CheckpointError, model_folder

        try:
            return model_folder(path)
        except CheckpointError as exc:
            raise SourceError(f"model.source: {exc}") from None
    return source


def _is_local(where: str | Path) -> bool:
    return isinstance(where, Path)


def _from_hub(what: str, where: str | Path, load: Callable[[], Any]) -> Any:
    """``load()``, with a missing network or repository said in one line naming model.source."""
    try:
        return load()
    except OSError as exc:
        if _is_local(where):
            raise SourceError(f"model.source {where}: cannot load its {what} ({str(exc).splitlines()[0]})") from None
        raise SourceError(
            f"model.source {where!r}: not a local folder, and its {what} could not be fetched from the hub "
            f"({str(exc).splitlines()[0]}); download it once and give the folder"
        ) from None


def bpe_tokenizer(task, cfg: RunConfig):
    """Byte-level BPE trained on the training split's text columns, cached in the prepared data folder."""
    from heads.data.tokenizer import tokenizer

    return tokenizer(task.data_path(cfg), vocab_size=cfg.model.vocab)


def task_tokenizer(task: Task, cfg: RunConfig):
    """The tokenizer of a run: a pretrained model's own (never a fresh BPE, which would feed it other token
    ids than it was trained on), else the task's BPE."""
    if not pretrained(cfg):
        return bpe_tokenizer(task, cfg)
    from transformers import AutoTokenizer

    where = source_path(cfg.model.source, cfg.data.root)
    if _is_local(where) and not any((where / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
        raise SourceError(
            f"model.source {where}: the folder holds no tokenizer (tokenizer.json or tokenizer_config.json); "
            "a pretrained model is never given a fresh BPE: save its tokenizer beside it (save_pretrained)"
        )
    if _is_local(where):
        return _from_hub("tokenizer", where, lambda: saved_tokenizer(where))
    return _from_hub("tokenizer", where, lambda: AutoTokenizer.from_pretrained(where, local_files_only=False))


def saved_tokenizer(folder: Path):
    """The tokenizer saved in a local folder, as it was saved.

    One saved as a plain ``tokenizer.json`` (TokenizersBackend / PreTrainedTokenizerFast: our BPE, and every
    run's model folder) loads as exactly that: AutoTokenizer would rebuild some model types' own pipelines over
    its vocabulary instead (Qwen2's pre-tokenizer and unknown token replace the saved ones), and the model
    would be fed other ids than it was trained on."""
    from transformers import AutoTokenizer, TokenizersBackend

    if _generic_tokenizer(folder):
        return TokenizersBackend.from_pretrained(folder, local_files_only=True)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


GENERIC_TOKENIZERS = ("TokenizersBackend", "PreTrainedTokenizerFast")


def _generic_tokenizer(folder: Path) -> bool:
    """Whether a local tokenizer was saved as a plain ``tokenizer.json`` under a generic class."""
    config = folder / "tokenizer_config.json"
    if not (folder / "tokenizer.json").is_file() or not config.is_file():
        return False
    try:
        declared = json.loads(config.read_text()).get("tokenizer_class")
    except (OSError, ValueError):
        return False
    return declared in GENERIC_TOKENIZERS


def build_or_load(cfg: RunConfig, fresh: Callable[[], nn.Module], task: Task, **head: Any) -> nn.Module:
    """A model from config (seeded), or from ``model.source`` with the task's head; one that cannot do ``task``
    is refused, naming the families that can. ``head``: arguments of a new task head (cls: ``num_labels``)."""
    from heads.surgery import install

    if not pretrained(cfg):
        if cfg.model.family not in task.families:
            raise ModelMismatch(
                f"model.family: {cfg.model.family!r} cannot do task {task.name!r}; "
                f"families that can: {list(task.families)}"
            )
        check_fits(cfg)
        return install(fresh())
    model = load_source(cfg, task, **head)
    task.check_model(model, f"model.source {cfg.model.source}")
    return install(model)


def training_bytes_at_least(cfg: RunConfig) -> dict[str, int]:
    """A lower bound on the bytes a model from ``cfg.model`` takes to train, by the size keys that set them, so
    a refusal names the one to change. Trained tensors count four times in float32 (weights, gradients and
    AdamW's two moments): the blocks' attention and feed-forward weights (4 d^2 + 3 d ff per layer; norms left
    out), the token embeddings (vocab x d) and a BERT's learned position table (max_len x d); Marian's fixed
    sinusoidal tables (encoder and decoder, max_len x d each) once. Llama's rotary positions need no table.
    Activations are left out: a batch is cut to the rows the data has, which is not known yet (an allocation
    they fail is one line at the command line's boundary)."""
    m = cfg.model
    ff, trained = m.ff or 4 * m.d, 4 * 4
    parts = {"model.layers, model.d, model.ff": trained * m.layers * (4 * m.d * m.d + 3 * m.d * ff),
             "model.vocab": trained * m.vocab * m.d}
    if m.family == "bert":
        parts["model.max_len"] = trained * m.max_len * m.d
    elif m.family == "marian":
        parts["model.max_len"] = 4 * 2 * m.max_len * m.d
    return parts


def available_bytes() -> int | None:
    """Memory the system can still give (``MemAvailable``), or None where it does not say."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fits(cfg: RunConfig) -> None:
    """Refuse, before anything is allocated, a model whose training state cannot fit in the memory left (an
    allocation that large would fail inside torch, or be killed by the system, instead of saying why)."""
    parts, have = training_bytes_at_least(cfg), available_bytes()
    need = sum(parts.values())
    if have is not None and need > have:
        m = cfg.model
        key = max(parts, key=parts.__getitem__)
        raise InputError(f"model (layers={m.layers}, d={m.d}, ff={m.ff or 4 * m.d}, vocab={m.vocab}, "
                         f"max_len={m.max_len}) needs at least {need / 2**30:.1f} GiB to train (float32 weights, "
                         f"gradients and AdamW moments), {parts[key] / 2**30:.1f} GiB of it for {key}, and "
                         f"{have / 2**30:.1f} GiB of memory is available; choose a smaller {key}")


def load_source(cfg: RunConfig, task: Task, **head: Any) -> nn.Module:
    """``model.source`` as the task's model class. A checkpoint that already is that class (a run's model, a
    pruned model) loads exactly through :func:`heads.surgery.load`, layout included; any other checkpoint of a
    supported family (a pretraining checkpoint, a bare encoder) loads its body through ``from_pretrained`` and
    gets a new task head, seeded by ``train.seed``."""
    import transformers

    from heads.surgery import load
    from heads.surgery.model_sites import LAYOUT_KEY
    from heads.surgery.persist import CheckpointError
    from heads.surgery.stock import read_config

    where = source_path(cfg.model.source, cfg.data.root)
    if _is_local(where):  # a heads-saved pruned model's config.json is read back as heads built it
        config = _from_hub("config", where, lambda: read_config(where))
    else:
        config = _from_hub("config", where, lambda: transformers.AutoConfig.from_pretrained(where))
    check_family(config, task, cfg.model.source)
    wanted = task_class(task, config, cfg.model.source)
    if wanted.__name__ in (getattr(config, "architectures", None) or []):
        if not _is_local(where):  # a hub checkpoint of the task's class: fetched once, then loaded exactly
            from huggingface_hub import snapshot_download

            where = Path(_from_hub("weights", where, lambda: snapshot_download(str(where))))
        try:
            model = load(where, model_class=wanted)
        except CheckpointError as exc:
            raise SourceError(f"model.source: {exc}") from None
        _check_head(model, head, cfg.model.source)
        return model
    if getattr(config, LAYOUT_KEY, None):
        raise SourceError(
            f"model.source {cfg.model.source}: a pruned {config.architectures} cannot take task {task.name!r}'s "
            f"head ({wanted.__name__}); prune a checkpoint that has it, or start from the unpruned one"
        )
    torch.manual_seed(cfg.train.seed)  # the new head's initialisation
    return _from_hub(
        "weights",
        where,
        # fp32 weights whatever the checkpoint stores: they are the optimizer's master copy (autocast does the rest)
        lambda: wanted.from_pretrained(where, local_files_only=_is_local(where), dtype=torch.float32, **head),
    )


def check_family(config: Any, task: Task, source: str) -> None:
    from heads.surgery.families import FAMILIES

    family = getattr(FAMILIES.get(getattr(config, "model_type", None)), "name", None)
    if family is None:
        raise ModelMismatch(
            f"model.source {source}: model type {config.model_type!r} is not a family head surgery supports "
            f"({sorted({f.name for f in FAMILIES.values()})}); docs/ADDING_A_FAMILY.md shows how to add one"
        )
    if family not in task.families:
        arch = ", ".join(getattr(config, "architectures", None) or [config.model_type])
        raise ModelMismatch(
            f"model.source {source}: a {arch} ({family} family) cannot do task {task.name!r}; families that can: "
            f"{list(task.families)}"
        )


def task_class(task: Task, config: Any, source: str) -> type:
    """The model class with the task's head for this config (sequence classification, causal LM, seq2seq)."""
    import transformers

    auto = getattr(transformers, task.auto_class)
    try:
        return auto._model_mapping[type(config)]
    except KeyError:
        raise ModelMismatch(
            f"model.source {source}: transformers has no {task.auto_class} for model type {config.model_type!r}"
        ) from None


def _check_head(model: nn.Module, head: dict, source: str) -> None:
    labels = head.get("num_labels")
    if labels is not None and getattr(model.config, "num_labels", labels) != labels:
        raise ModelMismatch(
            f"model.source {source}: its classifier has {model.config.num_labels} labels, the data has {labels}; "
            "start from its encoder (a checkpoint without the classifier) to train a new head"
        )
