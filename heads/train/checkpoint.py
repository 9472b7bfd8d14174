"""Training checkpoints: model + optimizer + RNG + data position + strategy state, safetensors and JSON only.

A checkpoint folder holds ``model/`` (safetensors + config.json with the head
layout), ``optimizer.safetensors`` (moments keyed by parameter name),
``rng.safetensors`` and ``state.json``. It is written into a temp folder and
renamed into place, so the previous checkpoint survives any interruption.
Nothing is unpickled when it loads.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from heads.io import replace_dir, temp_dir_beside, write_json
from heads.surgery.persist import CheckpointError, load, write_model


def optimizer_tensors(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for name, param in model.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            if torch.is_tensor(value):
                out[f"{name}::{key}"] = value.detach().contiguous()
    return out


def save_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> Path:
    tmp = temp_dir_beside(path)
    try:
        write_model(model, tmp / "model")
        save_file(optimizer_tensors(model, optimizer), str(tmp / "optimizer.safetensors"))
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                rng[f"cuda{i}"] = s
        save_file(rng, str(tmp / "rng.safetensors"))
        version, internal, gauss = random.getstate()
        state = {**state, "python_random": [version, list(internal), gauss]}
        write_json(tmp / "state.json", state)
        replace_dir(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_checkpoint(path: Path) -> tuple[nn.Module, dict[str, torch.Tensor], dict[str, Any]]:
    """(model, optimizer tensors by ``name::key``, state) of a checkpoint; RNG restored."""
    for part in ("model", "optimizer.safetensors", "rng.safetensors", "state.json"):
        if not (path / part).exists():
            raise CheckpointError(f"{path}: incomplete checkpoint, {part} is missing")
    try:
        state = json.loads((path / "state.json").read_text())
        opt = load_file(str(path / "optimizer.safetensors"))
        rng = load_file(str(path / "rng.safetensors"))
    except Exception as exc:  # a truncated or corrupted file
        raise CheckpointError(f"{path}: unreadable checkpoint ({exc})") from exc
    model = load(path / "model")
    torch.set_rng_state(rng["torch"])
    if torch.cuda.is_available():
        torch.cuda.set_rng_state_all([rng[k] for k in sorted(rng) if k.startswith("cuda")])
    version, internal, gauss = state.pop("python_random")
    random.setstate((version, tuple(internal), gauss))
    return model, opt, state


def restore_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]) -> None:
    by_name = dict(model.named_parameters())
    for key, value in tensors.items():
        name, _, field = key.partition("::")
        if name not in by_name:
            raise CheckpointError(f"optimizer state for unknown parameter {name}")
        optimizer.state[by_name[name]][field] = value.clone()
