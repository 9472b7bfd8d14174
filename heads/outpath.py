"""One rule for every output path a command writes (``--out`` of every command, the files ``python -m tools.readme``
rewrites): checked before any work, then claimed with an advisory lock, then written.

The rule:

- never onto a run's records nor into its folders (a run folder is one holding ``metrics.jsonl``,
  ``checkpoint/`` or ``summary.json``): nothing is written inside another run's folder, whatever its name;
- never below a file, never a folder where a file is meant (nor a file where a folder is);
- a symlink is written through: the output goes where it points (created there when it points at nothing, as
  the shell's ``>`` would), the link stays, and the checks apply to where it points; a symlink loop is refused;
- a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a pipe) is written through as a stream: never
  replaced by a regular file, whoever runs the command; a block device or a socket is refused;
- one writer per output: :func:`claim` holds an advisory ``fcntl.flock`` lock on ``.NAME.lock`` beside the
  output for the command's whole run; a second writer is refused naming the holder's process id.
"""

from __future__ import annotations

import contextvars
import errno
import fcntl
import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from heads.config import flatten
from heads.io import (
    MODEL_ENTRIES,
    PRUNE_MARK,
    RUN_ENTRIES,
    RUN_OWN,
    OutputConflict,
    enclosing_run,
    is_run_folder,
    is_stream,
)

# What a command's --out is: a result file, a folder it writes files into (report, claims), a model folder it
# replaces whole (prune) or a run folder (train).
FILE, FOLDER, MODEL, RUN = "file", "folder", "model", "run"

# Inside a pruned model's folder (its pruning.json), an evaluation of it may be written again: `heads evaluate
# PRUNED --out PRUNED/eval.json` redoes what `prune --evaluate` wrote there.
PRUNED_REDO = ("eval.json", "eval.examples.json")


class OutputBusy(OutputConflict):
    """Another process is writing the same output."""


def _kind_of(mode: int) -> str | None:
    """What a non-regular, non-folder file is, in words."""
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None


def target(out: str | Path, command: str, kind: str = FILE) -> Path:
    """The path ``command`` writes for ``--out out`` (a symlink followed), or an ``OutputConflict`` naming why
    it may not: checked before any work, writing nothing. A stream (``/dev/null``, ``/dev/stdout``, a FIFO)
    comes back as given, to be written through."""
    out = Path(out)
    where = f"{command}: --out {out}" if command else f"--out {out}"
    try:
        st = os.stat(out)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputConflict(f"{where} is a symlink loop; give a path that leads somewhere") from None
        if exc.errno != errno.ENOTDIR:
            raise
        st = None  # a path through a file: named below
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        what = _kind_of(st.st_mode)
        if kind == FILE and what in ("a character device", "a FIFO"):
            return out  # written through as a stream (heads.io.write_bytes), never replaced
        raise OutputConflict(f"{where} is {what}; write to a {'file' if kind == FILE else 'folder'} instead")
    real = Path(os.path.realpath(out)) if out.is_symlink() else out.absolute()
    if kind == FILE and is_stream(out):  # /dev/stdout onto a log file: written through, the log kept
        return out
    for parent in real.parents:  # below a file nothing can be written: say so before any work
        if parent.exists() and not parent.is_dir():
            raise OutputConflict(f"{where}: {parent} is a file, not a folder")
    if st is not None and kind == FILE and stat.S_ISDIR(st.st_mode):
        raise OutputConflict(f"{where} is a folder; name a file to write the result to")
    if st is not None and kind != FILE and not stat.S_ISDIR(st.st_mode):
        raise OutputConflict(f"{where} is a file, not a folder")
    _not_in_a_run(real, where, kind)
    _not_an_input(out, st, where)
    return real if out.is_symlink() else out


def _not_an_input(out: Path, st: os.stat_result | None, where: str) -> None:
    """Refuse a file the running command reads (``evaluate --config c.yaml --out c.yaml`` replaced the config with
    its result), and a JSON record inside a run tree it reads (``rows --runs T --out T/.../seed0.json`` replaced an
    analysis, which lies in no run folder)."""
    inputs = _INPUTS.get() or {}
    real = os.path.realpath(out)
    given = inputs.get(real) if st is not None and stat.S_ISREG(st.st_mode) else None
    if given is not None:
        raise OutputConflict(f"{where} is a file this command reads ({given}); write the result elsewhere")
    if st is None or not stat.S_ISREG(st.st_mode) or not real.endswith((".json", ".jsonl")):
        return  # new files in a tree, or a table beside its records, lose nothing (--runs OUT --out OUT/rep)
    for path, given in inputs.items():
        if os.path.isdir(path) and real.startswith(path.rstrip(os.sep) + os.sep):
            raise OutputConflict(f"{where} is a record of the run tree this command reads ({given}); write "
                                 "elsewhere")


def _not_in_a_run(real: Path, where: str, kind: str) -> None:
    """Refuse a path inside a run folder (its records, its own parts or anything else: a stray file there would
    stop the run from resuming) and a run folder as the output of any command but ``train``."""
    found = enclosing_run(real)
    if found is not None:
        run, rel = found
        if rel.parts[0] in RUN_OWN:
            raise OutputConflict(f"{where} lies in the run folder {run}'s own {rel.parts[0]}/, which only the run "
                                 "writes; write elsewhere")
        if len(rel.parts) == 1 and any(fnmatch(rel.name, p) for p in RUN_ENTRIES):
            raise OutputConflict(f"{where} is the record {rel.name} of the run folder {run}; write elsewhere")
        if not (kind == FILE and len(rel.parts) == 1 and rel.name in PRUNED_REDO and (run / PRUNE_MARK).is_file()):
            raise OutputConflict(f"{where} lies inside the run folder {run}; write elsewhere")
    parent = real.parent
    if (kind == FILE and real.exists() and (parent / "config.json").is_file() and any(parent.glob("*.safetensors"))
            and real.name not in PRUNED_REDO and any(fnmatch(real.name, p) for p in MODEL_ENTRIES)):
        raise OutputConflict(f"{where} is a record of the model folder {parent}, not a result file; write elsewhere")
    if kind == FOLDER and is_run_folder(real):
        raise OutputConflict(f"{where} is a run folder; write elsewhere")
    if kind == FOLDER and (real / "config.json").is_file() and any(real.glob("*.safetensors")):
        raise OutputConflict(f"{where} is a model folder; write elsewhere")


# -- one writer per output ------------------------------------------------------------------------------------------
def lock_path(path: Path) -> Path:
    """The lock file of an output: hidden, beside it (a folder output's lock is not one of its entries)."""
    return path.with_name(f".{path.name}.lock")


def _holder(lock: Path) -> str:
    try:
        pid = lock.read_text().strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


@contextmanager
def claim(path: str | Path, command: str, part: str | None = None) -> Iterator[Path]:
    """Hold the advisory lock of the output ``path`` (as :func:`target` returned it) while the block runs; a
    second writer of the same output is refused, naming the holder's process id. A command that writes one
    ``part`` of a folder (one table of a replication's report, its claims page) shares the folder's lock and
    holds the part's alone: the workflow renders a folder's parts in parallel, and a writer of the whole folder
    still excludes them all. Folders made here for the lock are removed again when the block fails and left them
    empty: a refused command leaves no trace. A stream needs no lock."""
    path = Path(path)
    if is_stream(path):
        yield path
        return
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    where = f"{command}: --out {path}" if command else f"--out {path}"
    locks = [(lock_path(path), part is not None)]
    if part is not None:
        locks.append((path.with_name(f".{path.name}.{part}.lock"), False))
    fds: list[tuple[Path, int, bool]] = []
    try:
        for lock, shared in locks:
            named = where if shared or part is None else f"{where} ({part})"
            fds.append((lock, _acquire(lock, named, shared), shared))
        try:
            yield path
        finally:
            for lock, fd, shared in reversed(fds):
                _release(lock, fd, shared)
            fds = []
    except BaseException:
        for _, fd, _ in fds:
            os.close(fd)
        for folder in made:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _acquire(lock: Path, where: str, shared: bool = False) -> int:
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusy(f"{where} is being written by {_holder(lock)} (lock {lock}); wait for it to end, "
                             "or give another --out") from None
        try:  # the holder before us may have removed the file between our open and our lock: lock the new one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            if not shared:  # a shared lock's file names its first holder, left as it is
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _release(lock: Path, fd: int, shared: bool) -> None:
    """Give the lock up, removing its file while it is still held alone: the next writer then locks a fresh file,
    and no lock file is left beside a finished output. A sharer removes it only if it is the last one holding it."""
    try:
        if shared:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the last sharer: no other holder is left
            except BlockingIOError:
                return
        lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


# -- the command line's side: outputs claimed for the command's whole run ------------------------------------------
_HELD: contextvars.ContextVar[ExitStack | None] = contextvars.ContextVar("heads_outputs", default=None)
# the files the running command reads, by real path -> how it was given (`--config`): never its output
_INPUTS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("heads_inputs", default=None)
# arguments that are outputs, not inputs
_NOT_INPUTS = {"out", "func", "command"}
# folders whose every file the command reads (a run tree: its analyses are files, in no run folder)
_TREES = {"runs"}


def inputs_of(args: Any) -> dict[str, str]:
    """The existing files an argparse namespace names (options, positionals, ``KEY=VALUE`` values), by real
    path: what the command reads, which its ``--out`` must not replace."""
    found: dict[str, str] = {}
    for name, value in vars(args).items():
        if name in _NOT_INPUTS:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, (str, Path)):
                continue
            text = str(item)
            key, sep, rest = text.partition("=")
            given, path = (f"{key}=", rest) if name == "overrides" and sep else (f"--{name.replace('_', '-')} ", text)
            try:
                if path and (os.path.isfile(path) or name in _TREES and os.path.isdir(path)):
                    found.setdefault(os.path.realpath(path), f"{given}{path}".strip())
            except (OSError, ValueError):  # a name too long or with a NUL byte is no file it reads
                continue
    for key, path in _overlay_paths(getattr(args, "overrides_file", None)):
        found.setdefault(os.path.realpath(path), f"{key}={path}")
    return found


def _overlay_paths(file: Any) -> list[tuple[str, str]]:
    """``(dotted.key, path)`` of every value of an ``--overrides-file`` that names an existing file, as its
    ``KEY=VALUE`` twin would be found (an unreadable file: none; its command says why)."""
    try:
        data = json.loads(Path(file).read_text()) if file is not None else None
    except (OSError, ValueError):
        return []
    out: list[tuple[str, str]] = []
    for key, value in flatten(data) if isinstance(data, dict) else []:
        try:
            if isinstance(value, str) and value and os.path.isfile(value):
                out.append((key, value))
        except (OSError, ValueError):  # a name too long or with a NUL byte is no file it reads
            continue
    return out


@contextmanager
def reading(inputs: dict[str, str]) -> Iterator[None]:
    """While the command runs: ``inputs`` (:func:`inputs_of`) are refused as its outputs by :func:`target`."""
    token = _INPUTS.set(inputs)
    try:
        yield
    finally:
        _INPUTS.reset(token)


def writes_outputs(func: Callable) -> Callable:
    """Decorate a command: the outputs it :func:`hold` s stay locked until it returns or fails."""

    @functools.wraps(func)
    def run(*args, **kwargs):
        with ExitStack() as stack:
            token = _HELD.set(stack)
            try:
                return func(*args, **kwargs)
            finally:
                _HELD.reset(token)

    return run


def hold(out: str | Path, command: str, kind: str = FILE, part: str | None = None) -> Path:
    """:func:`target`, then :func:`claim` (of ``part`` of the folder, if given) until the command (decorated with
    :func:`writes_outputs`) ends; the path to write. Outside such a command only the checks run."""
    path = target(out, command, kind)
    stack = _HELD.get()
    if stack is not None:
        stack.enter_context(claim(path, command, part))
    return path
