"""Save and load (pruned) models: safetensors weights + config.json carrying the head layout.

Loading builds the model from its config, prunes it to the recorded layout,
then fills every tensor from safetensors with exact shape checks: a layout
that does not match the weights fails loudly, never re-initialises silently.
Nothing is unpickled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from torch import nn

from heads.io import (
    PRUNE_ENTRIES,
    PRUNE_MARK,
    InputError,
    OutputConflict,
    check_not_a_record,
    check_output_folder,
    contains,
    is_run_folder,
    replace_dir,
    temp_dir_beside,
)
from heads.surgery.gates import install
from heads.surgery.model_sites import LAYOUT_KEY, record_layout
from heads.surgery.prune import apply_layout
from heads.surgery.stock import read_config, rewrite

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


class CheckpointError(InputError):
    """A checkpoint that cannot be loaded exactly (missing, corrupt, or a layout mismatch)."""


class UnfinishedRun(CheckpointError):
    """A run folder given as a model before its run wrote one."""


def model_folder(path: str | Path) -> Path:
    """The model folder of ``path``: ``path/model`` for a training run folder, else ``path`` itself.

    A run folder's own config.json is a run configuration, not a model's, so its ``model/`` is what loads."""
    path = Path(path)
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if (path / "checkpoint").is_dir() or (path / "metrics.jsonl").exists():  # a run: its config.json is no model's
        raise UnfinishedRun(f"{path}: a run folder without its model/ (the run has not finished): train it to the "
                              f"end first (the same heads train command resumes it)")
    if not (path / "config.json").is_file():
        raise CheckpointError(
            f"{path}: neither a checkpoint folder (with config.json) nor a run folder (with model/config.json)"
            + ("; the run has not finished: train it first" if (path / "checkpoint").is_dir() else "")
        )
    return path


def save(model: nn.Module, path: str | Path) -> Path:
    """Write ``model`` (pruned or not) as safetensors + config.json under ``path``.

    Written to a sibling temp folder first and renamed into place, so an
    interrupted save never leaves a folder that looks like a checkpoint.
    """
    path = Path(path)
    tmp = temp_dir_beside(path)
    try:
        write_model(model, tmp)
        replace_dir(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def check_pruned_out(out: Path, source: Path, overwrite: bool) -> None:
    """Where ``heads prune`` may write a pruned model (an ``OutputConflict`` otherwise): never the source, a folder
    holding it, the working directory, or (without ``overwrite``) a folder prune did not write: a run folder's
    model, or one holding other files."""
    for keep, what in ((source, "the source it reads"), (Path.cwd(), "the working directory")):
        if contains(out, keep):
            raise OutputConflict(f"prune: --out {out} is or holds {what} ({keep}); write the pruned model elsewhere")
    check_not_a_record(out, "prune")  # a run's checkpoint/, model/ or records: never, --overwrite or not
    if is_run_folder(out) and not (out / PRUNE_MARK).is_file():
        raise OutputConflict(f"prune: --out {out} is a run folder; write the pruned model elsewhere")
    if overwrite:
        return
    hint = "choose a new --out, or pass --overwrite to replace it"
    parent = out.resolve().parent
    if is_run_folder(parent):
        raise OutputConflict(f"prune: --out {out} lies inside the run folder {parent}; {hint}")
    check_output_folder(out, PRUNE_ENTRIES, "prune", hint)
    # prune replaces only what it wrote itself (its pruning.json says so): a model folder of the user's own,
    # however model-like, is kept
    if out.is_dir() and any(out.iterdir()) and not (out / PRUNE_MARK).is_file():
        raise OutputConflict(f"prune: --out {out} holds files prune did not write (no {PRUNE_MARK}); {hint}")


def os_error_of(exc: BaseException, path: str | Path | None = None) -> OSError | None:
    """The OS error inside a safetensors error, as an ``OSError`` naming ``path``: its Rust message carries it
    as ``Os { code: 28, ... }`` (a full disk) and nothing else does. None when it holds none."""
    found = re.search(r"Os \{ code: (\d+)", str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), *([str(path)] if path is not None else []))


@contextmanager
def safetensors_io(path: str | Path) -> Iterator[None]:
    """Safetensors writing or reading ``path``: an OS error it wraps in a ``SafetensorError`` (no space left,
    a read-only disk) is raised as the ``OSError`` it is, naming ``path``, so the command says it in one line."""
    try:
        yield
    except Exception as exc:
        found = os_error_of(exc, path) if type(exc).__name__ == "SafetensorError" else None
        if found is None:
            raise
        raise found from exc


def write_model(model: nn.Module, folder: Path) -> None:
    """save_pretrained into an existing folder (no atomicity: callers write into a temp folder); a pruned
    model's config.json says its shape to stock transformers, or refuses it loudly (:mod:`heads.surgery.stock`)."""
    with safetensors_io(folder):
        model.save_pretrained(folder, safe_serialization=True)
    rewrite(folder, getattr(model.config, LAYOUT_KEY, None))


def _weight_files(path: Path) -> list[Path]:
    if (path / INDEX).exists():
        index = json.loads((path / INDEX).read_text())
        return sorted({path / f for f in index["weight_map"].values()})
    if (path / WEIGHTS).exists():
        return [path / WEIGHTS]
    raise CheckpointError(f"{path}: no {WEIGHTS} (or {INDEX}); loading accepts safetensors only")


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a safetensors checkpoint folder; a corrupt file is named in the error."""
    tensors: dict[str, torch.Tensor] = {}
    for file in _weight_files(Path(path)):
        try:
            with safe_open(str(file), framework="pt") as f:
                for key in f.keys():
                    tensors[key] = f.get_tensor(key)
        except Exception as exc:  # safetensors raises several types for a bad header/body
            raise CheckpointError(f"{file}: unreadable safetensors file ({exc})") from exc
    return tensors


# Where a model type registered outside transformers (heads.bergamot) has its classes
AUTO_CLASSES = ("AutoModelForSeq2SeqLM", "AutoModelForCausalLM", "AutoModelForSequenceClassification", "AutoModel",
                "AutoModelForTextEncoding")  # the last: heads.embedding's sentence-embedding models


def _registered(config, name: str) -> type | None:
    """The class ``name`` that an auto class maps ``config``'s type to (a model type registered by heads)."""
    for auto in AUTO_CLASSES:
        try:
            cls = getattr(transformers, auto)._model_mapping[type(config)]
        except KeyError:
            continue
        if cls.__name__ == name:
            return cls
    return None


def _model_class(config) -> type:
    names = getattr(config, "architectures", None) or []
    for name in names:
        cls = getattr(transformers, name, None) or _registered(config, name)
        if cls is not None:
            return cls
    raise CheckpointError(f"config names no known architecture ({names!r}); pass model_class=")


def load(path: str | Path, model_class: type | None = None, gated: bool = True) -> nn.Module:
    """Load a checkpoint saved by :func:`save` (or any safetensors HF checkpoint) exactly.

    ``gated``: route attention through the gated function (identical outputs
    while no gate is set), ready for masking and scoring.
    """
    path = Path(path)
    if not (path / "config.json").exists():
        raise CheckpointError(f"{path}: no config.json")
    config = read_config(path)
    layout = getattr(config, LAYOUT_KEY, None)
    record_layout(config, None)  # the model is built full; apply_layout records the layout again
    cls = model_class or _model_class(config)
    model = cls(config)
    if layout:
        apply_layout(model, layout)
    state = read_state(path)
    _load_exact(model, state, path)
    model.eval()
    if gated:
        install(model)
    return model


def _load_exact(model: nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    own = model.state_dict()
    # Older checkpoints carry buffers the model now rebuilds itself (BERT's position_ids): skip those.
    rebuilt = {name for name, _ in model.named_buffers()} - set(own)
    state = {k: v for k, v in state.items() if k not in rebuilt}
    problems = []
    for key, tensor in state.items():
        if key not in own:
            problems.append(f"unexpected tensor {key} {tuple(tensor.shape)}")
        elif own[key].shape != tensor.shape:
            problems.append(f"{key}: checkpoint {tuple(tensor.shape)} vs model {tuple(own[key].shape)}")
    # Tensors absent from the file are fine only when tied to one that is present.
    # Or when the model never saves them (Marian's sinusoidal positions are rebuilt at init).
    loaded_ptrs = {own[k].data_ptr() for k in state if k in own and own[k].numel()}
    unsaved = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_save", None) or ()]
    for key, tensor in own.items():
        if key in state or tensor.numel() == 0 or tensor.data_ptr() in loaded_ptrs:
            continue
        if not any(p.search(key) for p in unsaved):
            problems.append(f"missing tensor {key} {tuple(tensor.shape)}")
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise CheckpointError(
            f"{path}: weights do not match the model built from its config "
            f"(head_layout in config.json and the tensors disagree?):\n  {shown}{more}"
        )
    with torch.no_grad():
        for key, tensor in state.items():
            own[key].copy_(tensor)
