"""Shared pieces of the tasks: the cached BPE tokenizer and model construction from config or checkpoint."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from heads.config import RunConfig
from heads.tasks.base import ModelMismatch, Task


def bpe_tokenizer(task, cfg: RunConfig):
    """Byte-level BPE trained on the training split's text columns, cached in the prepared data folder."""
    from heads.data.tokenizer import tokenizer

    return tokenizer(task.data_path(cfg), vocab_size=cfg.model.vocab)


def build_or_load(cfg: RunConfig, fresh: Callable[[], nn.Module], task: Task) -> nn.Module:
    """A model from config (seeded) or from a checkpoint or run folder;
    one that cannot do ``task`` is refused, naming the families that can."""
    from heads.surgery import install, load
    from heads.surgery.persist import CheckpointError, model_folder

    source = cfg.model.source
    if cfg.model.family not in task.families:
        raise ModelMismatch(
            f"model.family: {cfg.model.family!r} cannot do task {task.name!r}; families that can: {list(task.families)}"
        )
    if source not in ("config", "minilm"):
        try:
            model = load(model_folder(source))
        except CheckpointError as exc:
            raise CheckpointError(f"model.source: {exc}") from None
        task.check_model(model, f"model.source {source}")
    elif source == "minilm" and "bert" not in task.families:
        raise ModelMismatch(
            f"model.source: minilm (a BERT encoder) cannot do task {task.name!r}; families that can: "
            f"{list(task.families)}"
        )
    else:
        model = fresh()
    return install(model)
