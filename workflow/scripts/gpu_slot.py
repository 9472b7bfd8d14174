#!/usr/bin/env python3
"""Run a command on GPUs of its own: ``python gpu_slot.py N [--wait SECONDS] -- COMMAND [ARG ...]``.

Snakemake's ``--resources gpu=K`` bounds how many GPU jobs run at once but gives none of them a device id, so
every job would start on GPU 0. This takes N free slots (one ``flock``'ed lock file per visible GPU), sets
``CUDA_VISIBLE_DEVICES`` to them and execs the command. The command inherits the locked descriptors, so the
slots stay taken until it, and every child that inherited them, has exited, however it ends. N = 0 execs the
command as it is.

The GPUs: ``HEADS_GPUS`` (a count, or ids separated by commas), else ``CUDA_VISIBLE_DEVICES`` when set (a
SLURM allocation, or your own choice), else the GPUs ``nvidia-smi -L`` lists. The locks: in ``HEADS_GPU_LOCKS``,
else ``/tmp/heads-gpu-slots-<uid>``, one folder per machine so that two runs on it share its GPUs; under
SLURM one per job (``...-job<id>``), since ids there number the job's own allocation. Standard library only:
it runs before anything of the project is imported.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.5


class SlotError(RuntimeError):
    """No GPUs to be had: the message says how many were asked for and which exist."""


def visible_gpus(environ: dict[str, str] | None = None) -> list[str]:
    """The ids this process may hand out, in order."""
    env = os.environ if environ is None else environ
    given = env.get("HEADS_GPUS", "").strip()
    if given:
        return [str(i) for i in range(int(given))] if given.isdigit() else _ids(given)
    if "CUDA_VISIBLE_DEVICES" in env:  # set, even empty: someone already chose (empty means none)
        return _ids(env["CUDA_VISIBLE_DEVICES"])
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    # MIG instances are indented below their GPU; only whole GPUs ("GPU 0: ...") are numbered ids.
    return [m.group(1) for m in re.finditer(r"^GPU (\d+):", listing, re.M)]


def _ids(text: str) -> list[str]:
    return [i.strip() for i in text.split(",") if i.strip()]


def lock_folder(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("HEADS_GPU_LOCKS"):
        return Path(env["HEADS_GPU_LOCKS"])
    job = f"-job{env['SLURM_JOB_ID']}" if env.get("SLURM_JOB_ID") else ""
    return Path("/tmp") / f"heads-gpu-slots-{os.getuid()}{job}"


def acquire(ids: list[str], wanted: int, folder: Path, wait: float | None = None) -> list[tuple[str, int]]:
    """``wanted`` of ``ids`` locked: (id, descriptor) pairs. Waits for free ones (``wait`` seconds at most,
    None: as long as it takes), holding none while it waits so two waiting jobs cannot block each other."""
    if wanted > len(ids):
        raise SlotError(f"asks for {wanted} GPUs, but this machine shows {len(ids)} ({','.join(ids) or 'none'}); "
                        "set HEADS_GPUS or CUDA_VISIBLE_DEVICES if it has more, or ask for fewer")
    folder.mkdir(parents=True, exist_ok=True)
    deadline = None if wait is None else time.monotonic() + wait
    told = False
    while True:
        held: list[tuple[str, int]] = []
        busy: dict[str, str] = {}  # id -> the pid holding it
        for gpu in ids:
            fd = os.open(folder / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy[gpu] = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())  # exec keeps the pid: the holder, for a busy message
            held.append((gpu, fd))
            if len(held) == wanted:
                return held
        for _, fd in held:
            os.close(fd)
        if deadline is not None and time.monotonic() >= deadline:
            raise SlotError(f"no {wanted} free GPUs among {','.join(ids)} after {wait:g} s ({_holders(busy)}); "
                            "run at most as many GPU jobs at once as there are GPUs (--resources gpu=K)")
        if not told:
            print(f"gpu_slot: waiting for {wanted} free GPUs among {','.join(ids)} ({_holders(busy)})",
                  file=sys.stderr, flush=True)
            told = True
        time.sleep(POLL_S)


def _holders(busy: dict[str, str]) -> str:
    return "; ".join(f"GPU {gpu} held by pid {pid}" for gpu, pid in busy.items()) or "none busy"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("gpu_slot: usage: gpu_slot.py N [--wait SECONDS] -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    split = argv.index("--")
    p = argparse.ArgumentParser(prog="gpu_slot.py", description=__doc__.splitlines()[0])
    p.add_argument("gpus", type=int, help="GPUs the command needs (0: none, run it as it is)")
    p.add_argument("--wait", type=float, help="seconds to wait for free GPUs (default: as long as it takes)")
    args = p.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command or args.gpus < 0:
        p.error("give N >= 0 and a command after --")
    if args.gpus > 0:
        try:
            held = acquire(visible_gpus(), args.gpus, lock_folder(), args.wait)
        except SlotError as exc:
            print(f"gpu_slot: {exc}", file=sys.stderr)
            return 2
        for _, fd in held:
            os.set_inheritable(fd, True)  # Python opens descriptors close-on-exec; the lock must outlive exec
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpu for gpu, _ in held)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"gpu_slot: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
