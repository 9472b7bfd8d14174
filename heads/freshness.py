"""What decides each run-sheet entry's output, kept as one small file per entry, and the checks its job would
make before any work, made when the plan is drawn.

A workflow tracks files by their times: an output is stale when an input is newer. The settings of a run are
not a file, so changing one (michel2019's ``curve_step``, a task's learning rate) used to leave every output
"up to date". :func:`settle` writes one JSON file per entry holding everything that decides its output (the
entry as declared, and a training run's whole resolved configuration), and rewrites it only when that content
changes: its time moves exactly when a setting moves, and the workflow lists it among the job's inputs, so the
jobs a change affects (and only those, with whatever reads them) run again.

It also refuses, in one line naming the folder and the first differing key, a run folder whose config.json is
not the run the sheet now declares (``heads train`` would refuse it job by job), and checks every changed entry
the way its command will before any work: the configuration resolved and checked (:func:`heads.resolve.resolve`,
:func:`heads.resolve.check_run`), the strategy and its parameters built, the model and data sources found.

Cheap by design: the workflow calls it while parsing. Composing configurations and finding sources imports no
torch; the checks that build strategies do, so they run only for entries whose settings changed since the last
plan (an entry's file is written only once its checks pass: an unchanged file is a checked one).
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from heads.sheet.assemble import Sheet
from heads.sheet.commands import entry_overrides, overrides_file, param_words
from heads.sheet.declare import RunSpec, SheetError

# Keys that change what is shown or where the run runs, never what it computes (beyond the float tolerance of
# another device): a resume with another value is the same run (a GPU run may resume on a CPU, and back).
# train.time_limit is the budget of one call, not the run: a run stopped by it is finished whatever limit a
# later call gives (its summary says where it stopped), and an unfinished one resumes under the new limit.
NOT_THE_RUN = (
    "train.progress", "train.device", "train.threads", "train.compile", "train.workers", "train.keep_checkpoint",
    "train.time_limit",
)
STALE_LIST = "stale.txt"  # under the settings folder: the run folders a refusal names, one a line


def config_changes(before: Any, wanted: Any, prefix: str = "") -> list[str]:
    """``key: old -> new`` for every key of a run's configuration that differs, but for :data:`NOT_THE_RUN`
    (what ``heads train`` compares before it resumes or skips a run)."""
    if isinstance(before, dict) and isinstance(wanted, dict):
        return [d for k in sorted(set(before) | set(wanted))
                for d in config_changes(before.get(k), wanted.get(k), f"{prefix}{k}.")]
    if prefix.rstrip(".") in NOT_THE_RUN:
        return []
    return [] if before == wanted else [f"{prefix.rstrip('.')}: {before!r} -> {wanted!r}"]


def train_config(e: RunSpec, preset: str, runs: str, data_root: str) -> dict:
    """The configuration ``heads train`` resolves for a training entry and records in its config.json (the
    preset's, under the entry's overrides, with its run-sheet identity), as JSON types; not yet checked."""
    from heads.config import RunConfig, merge
    from heads.presets import preset_for

    config = RunConfig(task=e.task, preset=preset)
    merge(config, preset_for(e.task, preset))
    overrides = entry_overrides(e, runs, data_root)
    overrides["train"] = {**overrides.get("train", {}), "threads": 1}  # as --threads 1 sets it
    merge(config, overrides)
    config.run = json.loads(json.dumps(e.identity(), sort_keys=True))  # as --run hands it over
    return json.loads(json.dumps(config.to_dict()))


def _without(config: Mapping[str, Any], keys: Iterable[str]) -> dict:
    out = json.loads(json.dumps(config))
    for key in keys:
        section, _, name = key.partition(".")
        (out.get(section) or {}).pop(name, None)
    return out


def entry_settings(e: RunSpec, preset: str, config: Mapping[str, Any] | None) -> dict:
    """What decides an entry's output: the entry as declared (the replications that share it aside) at
    ``preset``, and a training run's resolved configuration (less what never changes a result). The runs it
    starts from are inputs of its job already: a retrained source reruns it by its own time."""
    entry = asdict(e)
    entry.pop("replication")
    entry["after"] = list(entry["after"])
    out: dict[str, Any] = {"preset": preset, "entry": entry}
    if config is not None:
        out["config"] = _without(config, NOT_THE_RUN)
    return out


def write_settings(path: str | os.PathLike, content: Any, backdate: bool = False) -> bool:
    """Write ``content`` as JSON to ``path`` unless it holds exactly that already (so its time moves only when a
    setting moves); ``backdate``: a file new here is given the oldest time, so it reruns nothing (its output is
    known to be of these settings). True when written."""
    path = Path(path)
    text = json.dumps(content, indent=1, sort_keys=True) + "\n"
    try:
        old = path.read_text()
    except (OSError, UnicodeDecodeError):
        old = None
    if old == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)  # another plan drawn at once reads the old file or this one, never half of it
    if backdate and old is None:
        os.utime(path, (0, 0))
    return True


def write_overrides(sheet: Sheet, runs: str, data_root: str, folder: str) -> dict[str, str]:
    """Every entry's ``--overrides-file`` under ``folder`` (label -> path; none for an entry that lays nothing
    over its base), rewritten only where its content changed. Its content follows from what the entry's settings
    file holds (:func:`entry_settings`), which is the job's input that moves when it does."""
    paths = {}
    for label, e in sheet.runs.items():
        content = entry_overrides(e, runs, data_root)
        if content:
            paths[label] = overrides_file(folder, label)
            write_settings(paths[label], content)
    return paths


def settings_file(folder: str, label: str) -> str:
    """Where an entry's settings live (under the run tree's output folder, beside, not inside, its runs)."""
    return f"{folder}/runs/{label}.json"


# -- checks ---------------------------------------------------------------------------------------------------
def _looks_local(where: str) -> bool:
    """A path rather than a hub id (``owner/name``): the data reader's own test (heads.data.hub), less its look
    at the disk."""
    return os.path.isabs(where) or where.startswith((".", "~")) or where.count("/") > 1


def check_sources(config: Mapping[str, Any], made: Iterable[str] = ()) -> None:
    """The model and data a run reads exist: a shipped model's packages are installed, a local folder is there
    (a hub id is only found online, by the job; ``made``: paths other jobs write first). Imports nothing heavy."""
    from heads import shipped

    made = set(made)
    source = str(config["model"]["source"])
    if source in made:
        pass
    elif source in shipped.SHIPPED:
        try:
            shipped.check_installed(source)
        except shipped.ShippedError as exc:
            raise SheetError(f"model.source {source}: {exc}") from None
    elif source != "config" and not Path(source).expanduser().exists() and _looks_local(source):
        raise SheetError(f"model.source {source}: no such folder (nor a shipped model {sorted(shipped.SHIPPED)}, "
                         "nor a hub id owner/name)")
    data = config["data"]
    for key in ("dataset", "hub_path"):
        where = data.get(key)
        if (data.get("source") == "hub" and where and where not in made and _looks_local(str(where))
                and not Path(where).expanduser().exists()):
            raise SheetError(f"data.{key} {where}: no such folder or file (nor a hub id owner/name)")


def check_entry(e: RunSpec, preset: str, runs: str, data_root: str, configs: Mapping[str, dict]) -> None:
    """What the entry's command checks before any work: its configuration resolved and checked (a training run's
    from the preset, an analysis's from its source run's, as that run will record it), its strategy's parameters.
    Imports the registries (torch): called only for entries whose settings changed."""
    from heads.config import ConfigError, merge, parse_overrides
    from heads.resolve import check_run, from_dict, resolve
    from heads.strategies import build_strategy

    try:
        overrides = entry_overrides(e, runs, data_root)
        if e.command == "train":
            resolve(e.task, preset, overlay=overrides)
            return
        if e.command in ("prune", "curve"):  # `heads curve` prunes by the iterative strategy
            build_strategy(e.strategy if e.command == "prune" else "iterative", parse_overrides(param_words(e)))
        if e.options.get("task"):  # a bare model folder: the task's preset, as for training
            resolve(e.task, preset, overlay=overrides)
        elif e.after and e.after[0] in configs:  # the run it reads: its config.json, as that run will write it
            config = from_dict(json.loads(json.dumps(configs[e.after[0]])))
            merge(config, overrides)
            check_run(config)
    except (ConfigError, KeyError) as exc:
        message = str(exc.args[0] if isinstance(exc, KeyError) else exc)
        if any(f"{runs}/{path}" in message for path in e.paths.values()):
            return  # a file a run before it writes (a layout to copy): its job checks it once it is there
        raise SheetError(f"{e.label}: {message}") from None


def check_finite(e: RunSpec) -> None:
    """No NaN or infinity among an entry's values: its command line would carry ``NaN``, which reads back as
    text, or a level, step or ratio no job can act on."""
    def walk(value: Any, where: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise SheetError(f"{e.label}: {where} is {value!r}; give a finite number")
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{where}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    for name in ("ratio", "knob", "params", "config", "options"):
        walk(getattr(e, name), name)


# -- the whole sheet -------------------------------------------------------------------------------------------
def settle(sheet: Sheet, preset: str, runs: str, data_root: str, folder: str) -> dict[str, str]:
    """Every entry's settings file under ``folder`` (label -> path), rewritten where its settings changed, once
    the entries are checked: the changed ones as their commands will check them, every source found, and no run
    folder holding a run of other settings (refused in one line naming the first, its first differing key and
    how to redo them; every such folder listed in ``folder``/stale.txt). Raises :class:`SheetError`."""
    configs: dict[str, dict] = {}
    for label, e in sheet.runs.items():
        check_finite(e)
        if e.command == "train":
            try:
                configs[label] = train_config(e, preset, runs, data_root)
            except (ValueError, KeyError) as exc:  # ConfigError is a ValueError
                raise SheetError(f"{label}: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None
    seen: set[str] = set()
    for label, config in configs.items():
        made = [f"{runs}/{path}" for path in sheet.runs[label].paths.values()]  # what runs before it writes
        key = json.dumps([config["model"]["source"], config["data"], made], sort_keys=True)
        if key not in seen:
            seen.add(key)
            try:
                check_sources(config, made)
            except SheetError as exc:
                raise SheetError(f"{label}: {exc}") from None
    wanted = {label: entry_settings(e, preset, configs.get(label)) for label, e in sheet.runs.items()}
    paths = {label: settings_file(folder, label) for label in sheet.runs}
    changed = [label for label in sheet.runs if _read(paths[label]) != wanted[label]]
    for label in changed:
        check_entry(sheet.runs[label], preset, runs, data_root, configs)
    stale = []
    for label, config in configs.items():
        record = Path(runs) / label / "config.json"
        before = _read(record)
        if isinstance(before, dict):
            differ = config_changes(before, config)
            if differ:
                stale.append((str(record.parent), differ[0]))
    if stale:
        listing = Path(folder) / STALE_LIST
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text("".join(f"{where}\n" for where, _ in stale))
        where, change = stale[0]
        if len(stale) > 1:
            how = f"delete them (all {len(stale)} are listed in {listing})"
        else:
            how = f"delete it (rm -r {shlex.quote(where)})"
        raise SheetError(f"{where} holds a run of other settings than the sheet's ({change}); to retrain with the "
                         f"new settings {how}, or set the value back")
    (Path(folder) / STALE_LIST).unlink(missing_ok=True)
    for label in changed:
        # a run folder already of these settings (found just above) needs no rerun: its file is backdated
        write_settings(paths[label], wanted[label], backdate=(Path(runs) / label / "config.json").is_file())
    return paths


def _read(path: str | os.PathLike) -> Any:
    """A JSON file's content; None when absent or unreadable (then it is rewritten, or its job says why)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


# -- head surgery ------------------------------------------------------------------------------------------------
HEAD_KEYS = ("num_attention_heads", "encoder_attention_heads", "decoder_attention_heads", "n_head", "num_heads")


def source_heads(source: str) -> int | None:
    """The most heads of any attention site of a surgery source (a shipped model, a model or run folder), read
    from its config.json without loading it; None where only its first use would tell (a GGUF or Marian model
    not yet converted). Refuses a source that is neither shipped nor a folder, or whose package is missing."""
    from heads import shipped

    if source in shipped.SHIPPED:
        try:
            where = shipped.check_installed(source)
        except shipped.ShippedError as exc:
            raise SheetError(f"surgery.sources {source}: {exc}") from None
        folder = where / shipped.SHIPPED[source].folder if shipped.SHIPPED[source].folder else None
    else:
        folder = Path(source).expanduser()
        if not folder.is_dir():
            raise SheetError(f"surgery.sources {source}: neither a model or run folder nor a shipped model "
                             f"{sorted(shipped.SHIPPED)}")
        folder = folder / "model" if (folder / "model" / "config.json").is_file() else folder
    config = _read(folder / "config.json") if folder is not None else None
    if not isinstance(config, dict):
        return None
    counts = [v for k, v in config.items() if k in HEAD_KEYS and isinstance(v, int) and not isinstance(v, bool)]
    return max(counts) if counts else None


def check_surgery(sources: Iterable[str], keeps: Iterable[int]) -> None:
    """Every uniform cut the surgery table asks for is one ``heads prune --keep`` makes (no keep above a site's
    heads, which would keep every head without a word)."""
    keeps = list(keeps)
    for source in sources:
        most = source_heads(source)
        over = [k for k in keeps if most is not None and k > most]
        if over:
            raise SheetError(f"surgery.keep: {over[0]} exceeds the {most} heads of {source}'s largest site; "
                             f"use 0..{most}")
