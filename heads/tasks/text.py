"""Shared pieces of the tasks: the cached BPE tokenizer and model construction from config or checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torch import nn

from heads.config import RunConfig


def bpe_tokenizer(task, cfg: RunConfig):
    """Byte-level BPE trained on the training split's text columns, cached in the prepared data folder."""
    from heads.data.tokenizer import tokenizer

    return tokenizer(task.data_path(cfg), vocab_size=cfg.model.vocab)


def build_or_load(cfg: RunConfig, fresh: Callable[[], nn.Module]) -> nn.Module:
    """A model from config (seeded, optionally born at ``model.layout``) or from a checkpoint folder."""
    from heads.surgery import apply_layout, install, load

    source = cfg.model.source
    if source not in ("config", "minilm"):
        if not (Path(source) / "config.json").exists():
            raise FileNotFoundError(f"model.source: {source!r} is not a checkpoint folder (no config.json)")
        model = load(source)
    else:
        model = fresh()
    if cfg.model.layout:
        apply_layout(model, cfg.model.layout)
    return install(model)
