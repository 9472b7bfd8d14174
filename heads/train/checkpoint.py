"""Training checkpoints: model + optimizer + RNG + data position + strategy state, safetensors and JSON only.

A checkpoint folder holds ``model/`` (safetensors + config.json with the head
layout), ``optimizer.safetensors`` (moments keyed by parameter name),
``rng.safetensors`` and ``state.json``. It is written into a temp folder and
renamed into place, so the previous checkpoint survives any interruption.
Nothing is unpickled when it loads. ``state.json`` records the run's identity (model shape, tokenizer
and data checksums); a resume with another identity is refused, naming both.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from heads.io import BadFileError, read_json, read_jsonl, replace_dir, temp_dir_beside, write_json
from heads.surgery.persist import CheckpointError, load, safetensors_io, write_model

# Config keys that fix the shape of every weight (the head layout aside: strategies prune mid-run, and pruning
# leaves these keys as they were).
SHAPE_KEYS = (
    "vocab_size", "hidden_size", "d_model", "num_hidden_layers", "encoder_layers", "decoder_layers",
    "num_attention_heads", "encoder_attention_heads", "decoder_attention_heads", "num_key_value_heads",
    "intermediate_size", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
)


# the shape keys pruning changes (a pruned checkpoint's config may say fewer heads)
PRUNABLE_KEYS = ("num_attention_heads", "encoder_attention_heads", "decoder_attention_heads", "num_key_value_heads")


def model_shape(model: nn.Module | dict) -> dict[str, Any]:
    """Architecture and size keys of a model (or of the dict in its saved config.json)."""
    if isinstance(model, dict):
        data, architecture = model, (model.get("architectures") or [None])[0]
    else:
        data, architecture = model.config.to_dict(), type(model).__name__
    shape = {k: data[k] for k in SHAPE_KEYS if data.get(k) is not None}
    shape["architecture"] = architecture
    if str(architecture).endswith("ForSequenceClassification"):  # config.json omits the default of 2 labels
        shape["labels"] = len(data.get("id2label") or (0, 1))
    return shape


def tokenizer_checksum(tokenizer: Any) -> str:
    """sha256 of the tokenizer's full serialisation (vocabulary, merges, specials)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_identity(model: nn.Module, tokenizer: Any, data_checksum: str | None) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the model's shape, the tokenizer and the data."""
    return {"model": model_shape(model), "tokenizer": tokenizer_checksum(tokenizer), "data": data_checksum}


def check_identity(
    path: Path,
    expected: dict[str, Any],
    against: str = "config",
    hint: str = "train into a new --out, or delete the run folder to start over",
) -> None:
    """Refuse ``path`` for a run of another identity, naming what differs (checkpoint vs ``against``); only the
    keys of ``expected`` count. Checkpoints written before identities were recorded are checked on the model
    shape alone."""
    state = read_json(path / "state.json", "a checkpoint state")
    found = state.get("identity") if isinstance(state, dict) else None
    if found is None:
        config = path / "model" / "config.json"
        found = {"model": model_shape(read_json(config, "a model config"))} if config.is_file() else {}
    problems = []
    # the weights on disk, not only what the state says they were: a checkpoint model swapped for another
    # shape (another run's, copied in) would otherwise be loaded, or fail inside the optimizer
    # (head counts left out: a run that pruned saves fewer heads, by design)
    config = path / "model" / "config.json"
    if "model" in expected and config.is_file():
        on_disk = model_shape(read_json(config, "a model config"))
        keys = sorted(k for k in set(on_disk) | set(expected["model"])
                      if k not in PRUNABLE_KEYS and on_disk.get(k) != expected["model"].get(k))
        if keys:
            problems.append("model shape of " + str(config) + " ("
                            + ", ".join(f"{k} {on_disk.get(k)!r} vs {expected['model'].get(k)!r}" for k in keys) + ")")
    for key in ("model", "tokenizer", "data"):
        if key not in found or key not in expected or found[key] == expected[key]:
            continue
        if key == "model":
            a, b = found[key], expected[key]
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            diff = ", ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in keys)
            problems.append(f"model shape ({diff})")
        else:
            problems.append(f"{key} checksum {str(found[key])[:12]} vs {str(expected.get(key))[:12]}")
    if problems:
        raise CheckpointError(
            f"{path} belongs to another run than the {against}: checkpoint vs {against}: {'; '.join(problems)}; {hint}"
        )


def check_history(path: Path, out: Path) -> None:
    """Refuse to resume from the checkpoint ``path`` when the run's history in ``out`` is cut: ``metrics.jsonl``
    or ``events.jsonl`` deleted, or holding fewer whole records than the checkpoint saw when it was written (a
    resume would go on as if the steps before it had never been logged, and the run's curves and summary would
    miss them). Names what is missing; checked before anything is written."""
    state = read_json(path / "state.json", "a checkpoint state")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path / 'state.json'}: not a checkpoint state (a {type(state).__name__})")
    step = state.get("step")
    # a checkpoint from before the counts were kept: the step-0 record, written before its first checkpoint
    wanted = {"metrics.jsonl": state.get("metric_records", 1), "events.jsonl": state.get("event_records") or 0}
    for name, count in wanted.items():
        if not isinstance(count, int) or count <= 0:
            continue
        file = out / name
        found = len(read_jsonl(file, torn_tail_ok=True)) if file.is_file() else None
        if found is None or found < count:
            held = "is missing" if found is None else f"holds {found} records"
            raise CheckpointError(
                f"{file} {held}, but the checkpoint at step {step} saw {count}: the run's history is cut; restore "
                f"{name} from a copy, or delete {out} to start the run over"
            )


def optimizer_tensors(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for name, param in model.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            if torch.is_tensor(value):
                out[f"{name}::{key}"] = value.detach().contiguous().cpu()
    return out


def save_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> Path:
    tmp = temp_dir_beside(path)
    try:
        write_model(model, tmp / "model")
        with safetensors_io(tmp / "optimizer.safetensors"):
            save_file(optimizer_tensors(model, optimizer), str(tmp / "optimizer.safetensors"))
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                rng[f"cuda{i}"] = s
        with safetensors_io(tmp / "rng.safetensors"):
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
            dropped = not any((path / p).exists() for p in ("model", "optimizer.safetensors"))
            if (path / "state.json").is_file() and dropped:
                raise CheckpointError(
                    f"{path}: this finished run's checkpoint kept only its state (train.keep_checkpoint=false), so "
                    "it cannot be trained on; the trained model is in the run's model/ folder"
                )
            raise CheckpointError(f"{path}: incomplete checkpoint, {part} is missing")
    try:
        state = read_json(path / "state.json", "a checkpoint state")
        opt = load_file(str(path / "optimizer.safetensors"))
        rng = load_file(str(path / "rng.safetensors"))
    except BadFileError as exc:
        raise CheckpointError(f"unreadable checkpoint: {exc}; delete {path} to restart the run") from exc
    except Exception as exc:  # a truncated or corrupted file
        raise CheckpointError(f"{path}: unreadable checkpoint ({exc}); delete it to restart the run") from exc
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
        param = by_name[name]
        # Moments live with their parameter; AdamW keeps its step count on the CPU unless it is capturable.
        optimizer.state[param][field] = value.clone() if field == "step" else value.to(param.device).clone()


def drop_weights(path: Path) -> None:
    """Keep only ``state.json`` of a finished run's checkpoint (``train.keep_checkpoint: false``): the model is
    in the run's ``model/`` and the moments are needed only to train on, which is twice the model's size per
    run at the paper scale. The identity stays, so commands still check that a model is this run's."""
    if not (path / "state.json").is_file():
        return
    for part in ("optimizer.safetensors", "rng.safetensors"):
        (path / part).unlink(missing_ok=True)
    shutil.rmtree(path / "model", ignore_errors=True)
