"""One training run over several processes (DistributedDataParallel), started by any launcher that sets the
usual environment (``torchrun --nproc_per_node N -m heads train ...``: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT).

Every rank reads the same global batch and trains on its share of the micro-batches; DDP averages the
gradients. What only one process may do (write metrics, events, checkpoints, the model) is rank 0's; what
every rank must agree on (which heads to prune, dropout changes) is decided on rank 0 and broadcast.
A single process is a world of one, and every call here is then a no-op.

Every rank's end is bounded: a rank exits when its launcher dies (whatever it is doing), and once the run is
over it has :data:`EXIT_TIMEOUT` seconds to tear its group down and exit before a watchdog ends it, saying where
it hung. A rank that sleeps on after the run keeps its launcher (torchrun, a cluster job) waiting forever.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int | None = None

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def launched() -> bool:
    """Started by a multi-process launcher (torchrun sets WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def join(device: torch.device) -> World:
    """This process's place in the launcher's world, with the process group up (gloo on CPU, nccl on CUDA)."""
    if not launched():
        return World()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, device_id=device if device.type == "cuda" else None)
    world = World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    _deadline.cancel()  # a group joined again: the process lives on
    watch_launcher(world.rank)
    return world


def local_rank() -> int | None:
    """The GPU index a launcher gives this process (None outside a launcher)."""
    return int(os.environ["LOCAL_RANK"]) if launched() and "LOCAL_RANK" in os.environ else None


EXIT_TIMEOUT = 60.0  # seconds a rank has, after the run, to tear its group down and exit (normally well under 1)
LAUNCHER_POLL = 1.0  # seconds between two looks at whether the launcher is still there


def leave(world: World, ok: bool = True, timeout: float = EXIT_TIMEOUT) -> None:
    """This rank's end of the run: after it, the process exits within ``timeout`` seconds, or a watchdog ends it
    (stacks and one line on stderr; exit status 0 when the run was ``ok``: its records are complete).

    ``ok``: every rank leaves together: a barrier (rank 0 evaluates and saves after training while the others wait
    there; a rank tearing its group down while a peer still worked was seen to hang at shutdown under load), then
    the group torn down. After a failure neither: a peer may be inside a collective this rank never enters, where
    a barrier or a teardown would wait for it (the launcher ends the other ranks when this one exits)."""
    if not (world.distributed and dist.is_initialized()):
        return
    code = 1
    try:
        if ok:
            dist.barrier()  # waits for rank 0's evaluation: bounded by the group's timeout and the launcher watch
            code = 0
    finally:
        _deadline.arm(timeout, code, world.rank)
    if ok:
        dist.destroy_process_group()


class _Deadline:
    """The time by which this process must have exited. A Python thread ends it with the run's exit status; it
    cannot run once the interpreter finalizes, so faulthandler's C watchdog (no GIL needed) ends it a little
    later with status 1 should the hang be there."""

    def __init__(self) -> None:
        self._cancel: threading.Event | None = None

    def arm(self, timeout: float, code: int, rank: int) -> None:
        self.cancel()
        self._cancel = threading.Event()
        faulthandler.dump_traceback_later(timeout + 10.0, exit=True, file=sys.__stderr__)
        threading.Thread(
            target=self._watch, args=(self._cancel, timeout, code, rank), name="heads-exit-deadline", daemon=True
        ).start()

    def cancel(self) -> None:
        if self._cancel is not None:  # armed: a faulthandler timer set elsewhere is not this one to cancel
            self._cancel.set()
            self._cancel = None
            faulthandler.cancel_dump_traceback_later()

    @staticmethod
    def _watch(cancel: threading.Event, timeout: float, code: int, rank: int) -> None:
        if cancel.wait(timeout):
            return
        _exit_now(code, f"rank {rank} had not exited {timeout:g} s after the run ended (a hung teardown: the "
                        f"threads' stacks are above); exiting with status {code}", stacks=True)


_deadline = _Deadline()
_watching = False


def watch_launcher(rank: int, poll: float = LAUNCHER_POLL) -> None:
    """Exit when the launcher that started this process dies: nothing would collect this rank's exit, and a peer
    waiting on it in a collective would wait out the group's timeout. On Linux under torchrun the kernel sends
    SIGKILL (it reaches a process hung where no Python runs); everywhere, a thread looks for a changed parent
    every ``poll`` seconds. (The kernel's signal follows the thread that started the process, which only
    torchrun is known to keep alive: under another launcher only the look.)"""
    global _watching
    if _watching:
        return
    _watching = True
    parent = os.getppid()
    if sys.platform.startswith("linux") and "TORCHELASTIC_RUN_ID" in os.environ:
        _die_with_parent()
    threading.Thread(target=_watch_parent, args=(parent, poll, rank), name="heads-launcher-watch", daemon=True).start()


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # no prctl here: the thread's look still ends this process


def _watch_parent(parent: int, poll: float, rank: int) -> None:
    while os.getppid() == parent:
        time.sleep(poll)
    _exit_now(1, f"rank {rank}: its launcher (pid {parent}) is gone; exiting")


def _exit_now(code: int, message: str, stacks: bool = False) -> None:
    """End the process at once, from any thread (no cleanup runs: what hangs would hang it again)."""
    try:
        if stacks:
            faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        os.write(sys.__stderr__.fileno(), f"heads: {message}\n".encode())  # no lock a hung thread may hold
        flush = threading.Thread(target=sys.stdout.flush, daemon=True)  # what the run printed, if it can go
        flush.start()
        flush.join(2.0)
    finally:
        os._exit(code)


def broadcast(world: World, value: Any) -> Any:
    """Rank 0's ``value`` on every rank (any picklable object)."""
    if not world.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()


def sum_all(world: World, values: list[float], device: torch.device) -> list[float]:
    """Element-wise sums over ranks (float64, so summed losses and counts stay exact enough)."""
    if not world.distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def average_gradients(world: World, params: list[torch.nn.Parameter]) -> None:
    """Average gradients over ranks for parameters DDP does not own (a strategy's own parameter group, such as
    L0's gate logits): DDP syncs only the wrapped module's parameters."""
    if not world.distributed:
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= world.size


def wrap(model: torch.nn.Module, world: World, device: torch.device, unused: bool = False) -> torch.nn.Module:
    """``model`` under DDP in a distributed run (built again after every physical pruning: DDP holds the
    parameters it was built with, and building it syncs rank 0's weights to every rank); the model itself
    otherwise."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    # ``unused``: some parameters get no gradient (a site with every head pruned leaves its projections out of the
    # graph); DDP must then look for them every step, which costs a graph traversal, so only then.
    return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=unused)
