"""Pruned checkpoints as stock ``transformers`` sees them: loadable where the family's own config can say the
pruned shape, refused loudly everywhere else (never a silent re-initialisation).

A uniform layout on a Llama-style model (Llama, Mistral, Qwen2, Gemma 3 text: every site keeps the same number of
heads and of key/value heads) is a stock shape: ``num_attention_heads``, ``num_key_value_heads`` and an explicit
``head_dim``; its config.json says that shape, so ``AutoModelForCausalLM.from_pretrained`` builds exactly these
tensors and gives the same logits. Any other pruned layout has no stock shape; its config.json names a model type no
``transformers`` knows, which names :func:`heads.surgery.load`, so stock loading stops at the config with that
message. The model's own counts and type are kept under ``MARK`` and :func:`from_disk` restores them, so heads sees
the model it saved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARK = "heads_saved_as"  # what the file says differently from the model heads built: {key: the model's value}
REFUSED_TYPE = "pruned-by-heads (load it with heads.surgery.load; stock transformers cannot build this layout)"
STOCK_FAMILIES = ("llama", "mistral", "qwen2", "gemma3_text")


def stock_shape(config: dict[str, Any], layout: dict[str, list[int]]) -> dict[str, Any] | None:
    """The config keys that make a pruned Llama-style layout a stock model, or None when there are none."""
    if config.get("model_type") not in STOCK_FAMILIES or not layout:
        return None
    counts = {len(kept) for kept in layout.values()}
    if len(counts) != 1 or 0 in counts:
        return None
    (kept,) = counts
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    group = heads // kv
    if kept % group:  # the grouped-query rule removes whole groups; a partial group has no stock shape
        return None
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return {"num_attention_heads": kept, "num_key_value_heads": kept // group, "head_dim": head_dim}


def to_disk(config: dict[str, Any], layout: dict[str, list[int]] | None) -> dict[str, Any]:
    """config.json of a model with ``layout`` (None or full: unchanged)."""
    if not layout or MARK in config:
        return config
    shape = stock_shape(config, layout)
    if shape is None:
        shape = {"model_type": REFUSED_TYPE}
    saved = {key: config.get(key) for key in shape}
    return {**config, **shape, MARK: saved}


def from_disk(config: dict[str, Any]) -> dict[str, Any]:
    """What :func:`to_disk` changed, undone: the model heads builds before applying the layout."""
    if MARK not in config:
        return config
    out = {k: v for k, v in config.items() if k != MARK}
    for key, value in config[MARK].items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def rewrite(folder: Path, layout: dict[str, list[int]] | None) -> None:
    """Rewrite ``folder/config.json`` (just written by save_pretrained) as :func:`to_disk` says."""
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text())
    new = to_disk(config, layout)
    if new is not config:
        path.write_text(json.dumps(new, indent=2, sort_keys=True) + "\n")


def read_config(folder: str | Path):
    """The transformers config of a checkpoint saved by heads (or any other), as heads built the model."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = Path(folder) / "config.json"
    data = json.loads(path.read_text())
    saved = isinstance(data, dict) and MARK in data
    data = from_disk(data) if saved else data
    kind = data.get("model_type") if isinstance(data, dict) else None
    if kind not in CONFIG_MAPPING:  # what transformers would stop at with a traceback
        from heads.surgery.persist import CheckpointError

        raise CheckpointError(f"{path}: not a model configuration (" + (
            f"model_type {kind!r} is not one transformers knows" if kind is not None else
            "no model_type" if isinstance(data, dict) else f"a {type(data).__name__}") + ")")
    if not saved:
        return AutoConfig.from_pretrained(folder, local_files_only=True)
    return CONFIG_MAPPING[kind].from_dict(data)
