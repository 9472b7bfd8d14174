"""One training run over several processes (DistributedDataParallel), started by any launcher that sets the
usual environment (``torchrun --nproc_per_node N -m heads train ...``: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT).

Every rank reads the same global batch and trains on its share of the micro-batches; DDP averages the
gradients. What only one process may do (write metrics, events, checkpoints, the model) is rank 0's; what
every rank must agree on (which heads to prune, dropout changes) is decided on rank 0 and broadcast.
A single process is a world of one, and every call here is then a no-op.
"""

from __future__ import annotations

import os
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
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def local_rank() -> int | None:
    """The GPU index a launcher gives this process (None outside a launcher)."""
    return int(os.environ["LOCAL_RANK"]) if launched() and "LOCAL_RANK" in os.environ else None


def leave(world: World) -> None:
    """Every rank leaves together: rank 0 evaluates and saves after training while the others are done, and a
    rank tearing its group down while a peer still works was seen to hang at shutdown under load."""
    if world.distributed and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


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
