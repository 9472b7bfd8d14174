"""The head-level battery on one model of the user's choosing (the workflow's ``model`` key).

The ``pretrained`` replication runs every head-level analysis (masking at Michel's unit, ablation, curves,
speed, redundancy, roles, shift) on one pretrained model, read on the task its kind of model does
(:func:`task_of`: a causal LM on ``lm``, an MPNet sentence encoder on ``retrieval``). :func:`for_model` points it
at another model (a shipped name, a local checkpoint folder or a hub id), writes that task into the battery's
settings (``task``: what ``runs.py`` labels its runs by and the ledger judges its claims on) and keeps that run
apart from every other: its rendered outputs go under ``results/<preset>/<slug>/`` (:func:`model_slug`), and
only the battery runs. What the settings size by the model's layout (the layers an ablation samples) the
commands resolve on the model they load; what must be known when the workflow is planned (a floor of heads per
layer, under multi-query attention) :func:`layout_settings` writes.

This module imports nothing heavy: the workflow calls it at parse time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heads.sheet import SheetError, replications

BATTERY = "pretrained"  # the replication that runs the battery
# the task a model is read on, by its config's model type: an encoder family's own task; any other type is read as
# a causal LM (check_task refuses, in one line, a type that cannot do it). Each task here lists the family among
# its ``families`` (a test checks), so the battery never picks a task its model cannot do.
TASK_OF_TYPE = {"mpnet": "retrieval"}
CAUSAL = "lm"
WHAT = {"lm": "a causal LM", "retrieval": "a sentence encoder"}  # how a refusal names what the task reads
# folders the preset's own outputs already use under results/<preset>/: a model's slug may not take one
RESERVED = frozenset({"runs", "surgery", "decoding", "CLAIMS.md"})


def model_slug(source: str) -> str:
    """A results folder's name for ``source``: a shipped name as it is, a local folder by its own name, a hub id
    with its ``/`` as ``--``; any other character outside ``[A-Za-z0-9_.-]`` as ``_``."""
    from heads.shipped import SHIPPED

    if source in SHIPPED:
        name = source
    elif Path(source).exists():
        name = Path(source).resolve().name
    else:
        name = source.strip("/").replace("/", "--")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if not name.strip("._"):
        raise SheetError(f"model {source!r}: gives no usable folder name; set out= to say where results go")
    return name


def check_source(source: str) -> None:
    """``source`` names a model the battery can load: a shipped checkpoint, a local folder holding a
    ``config.json``, or a hub id (``owner/name``); anything else is refused in one line."""
    from heads.shipped import SHIPPED

    if source in SHIPPED:
        return
    where = Path(source)
    if where.exists():
        if not (where / "config.json").is_file():
            raise SheetError(f"model {source!r}: the folder holds no config.json (save the model with "
                             "save_pretrained, its tokenizer beside it)")
        return
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", source):
        raise SheetError(f"model {source!r}: neither a shipped checkpoint ({', '.join(sorted(SHIPPED))}), a local "
                         "folder, nor a hub id (owner/name)")


def task_of(source: str, preset: str = BATTERY) -> str:
    """The task the battery reads ``source`` on: a shipped model's own (the task whose config at ``preset`` names
    it), a local folder's by its ``config.json``'s ``model_type`` (:data:`TASK_OF_TYPE`), and ``lm`` (a causal
    LM) for anything else (a hub id: its config is not read at parse time; check_task reads it)."""
    from heads.presets import preset as load_preset
    from heads.shipped import SHIPPED

    if source in SHIPPED:
        ships = [t for t, c in load_preset(preset)["tasks"].items() if (c.get("model") or {}).get("source") == source]
        return ships[0] if ships else CAUSAL
    config = Path(source) / "config.json"
    if config.is_file():
        try:
            kind = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):  # unreadable: loading it says what is wrong, in its own words
            kind = None
        return TASK_OF_TYPE.get(kind, CAUSAL)
    return CAUSAL


def kv_heads(source: str) -> int | None:
    """Key/value heads of each attention layer of ``source``, where known before it is loaded: a shipped model's
    stated count, a local folder's ``config.json`` (``num_key_value_heads``, else one per query head); None for a
    hub id or a config that does not say."""
    from heads.shipped import SHIPPED

    if source in SHIPPED:
        return SHIPPED[source].kv_heads or None
    try:
        config = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
        heads = config.get("num_key_value_heads") or config.get("num_attention_heads")
    except (OSError, ValueError, AttributeError):  # absent or unreadable: loading it says what is wrong
        return None
    return heads if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0 else None


def layout_settings(source: str) -> dict[str, Any]:
    """The battery's settings that ``source``'s layout decides: under multi-query attention (one key/value head
    per layer: Gemma 3 270M) a layer's only group is its whole attention, which a floor of one head per layer
    would keep, so nothing could go by whole groups: ``floor: 0`` lets whole layers' attention go (and the speed
    job choose them by importance, a uniform share of one group per layer being all or none)."""
    return {"floor": 0} if kv_heads(source) == 1 else {}


def for_model(dag: Mapping[str, Any], source: str, root: str | Path = "replications") -> tuple[dict, str]:
    """``dag`` (a preset's, from :func:`heads.sheet.preset_settings`) reduced to the battery with its model read from
    ``source`` on the task it does (:func:`task_of`, written into the battery's settings as ``task``), and the slug
    its outputs are kept under. Refused where the preset has no battery, or where the dag's own task config already
    names another model."""
    if dag.get(BATTERY) is None:
        raise SheetError(f"model {source!r}: the battery (the {BATTERY!r} replication) runs at preset "
                         f"'pretrained' only, not {dag.get('preset')!r}; add preset=pretrained")
    check_source(source)
    task = task_of(source, dag["preset"])
    tasks = dict(dag.get("tasks") or {})
    sections = dict(tasks.get(task) or {})
    named = (sections.get("model") or {}).get("source")
    if named not in (None, source):
        raise SheetError(f"model {source!r}: dag.{dag.get('preset')}.tasks.{task}.model.source names "
                         f"{named!r}; give the model once")
    sections["model"] = {**(sections.get("model") or {}), "source": source}
    tasks[task] = sections
    others = set(replications(root)) - {BATTERY}
    reduced = {k: v for k, v in dag.items() if k not in others}
    reduced["tasks"] = tasks
    # what the layout decides, under any of the same keys a user set (the workflow config wins)
    reduced[BATTERY] = {**layout_settings(source), **dag[BATTERY], "task": task}
    slug = model_slug(source)
    if slug in RESERVED or slug in others | {BATTERY}:
        raise SheetError(f"model {source!r}: its folder name {slug!r} is one the preset's outputs use; rename the "
                         "folder or set out=")
    return reduced, slug


def check_task(cfg) -> None:
    """The model ``cfg`` names can do the battery's task, ``cfg.task`` (a causal LM of a family heads supports on
    ``lm``, an MPNet on ``retrieval``): refused when the workflow is planned, in one line, not when its first job
    loads it (a BERT encoder, which neither task reads)."""
    from heads.plan import model_config
    from heads.tasks import get_task
    from heads.tasks.base import ModelMismatch
    from heads.tasks.text import check_family

    try:
        check_family(model_config(cfg), get_task(cfg.task), cfg.model.source)
    except ModelMismatch as exc:
        what = WHAT.get(cfg.task, f"a model of task {cfg.task!r}")
        raise SheetError(f"model {cfg.model.source!r}: the battery reads {what}; {exc}") from None
