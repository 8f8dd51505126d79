"""The process group's life in a command under torchrun: joined before the first run's record
(`join`), kept for every run of the command and left at its end (`collect_before_exit`), with a
gloo group the other ranks wait on between runs while rank 0 evaluates; a block on its own (a
`size` probe's process) joins and leaves it (`joined`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from tunelab.training.distributed import World

if TYPE_CHECKING:
    import torch


@contextmanager
def joined(world: World, device: torch.device) -> Iterator[World]:
    """The process group for the block (gloo on CPU, nccl on CUDA). A command that trains runs
    joins it first (`join`, before any record) and keeps it for all of them (`run --seeds`,
    `noise`, `ablate`), leaving it at its end (`collect_before_exit`): a group left after each
    run and joined again raced, the other ranks joining the next run's group while rank 0 still
    evaluated the last, meeting the old group's addresses in torchrun's store, and hanging or
    being refused (3 of 4 two-seed runs). A block that joined the group itself leaves it."""
    if not world.distributed:
        yield world
        return
    import torch.distributed as dist

    owned = not dist.is_initialized()  # a block on its own (a `size` probe) leaves what it joined
    backend = _group(world, device)
    try:
        yield World(world.rank, world.size, world.local_rank, world.strategy, backend)
        dist.barrier()  # every rank done with the block before any goes on
    finally:
        if owned:
            _leave()


BETWEEN_RUNS = timedelta(hours=24)
"""How long the other ranks wait at the start of a command's next run for rank 0, which
evaluates the last one alone: the process group's own timeout (30 minutes on gloo, 10 on
NCCL) had failed any evaluation longer than that."""

_between_runs = None
"""A gloo group with `BETWEEN_RUNS` as its timeout, made with the command's group."""


def join(world: World, device: torch.device) -> str | None:
    """Join the command's process group (its backend; None on one process). `run` and
    `resume` join before rank 0 opens the run's record: a rank that dies at its start then
    leaves no record `running` behind (rank 0, blocked in the rendezvous, cannot act on
    torchrun's SIGTERM and is killed). A later run of the same command (`run --seeds`,
    `noise`, `ablate`) joins by waiting for every rank, without the group's timeout: rank 0
    comes once it has evaluated the last run."""
    if not world.distributed:
        return None
    import torch.distributed as dist

    if dist.is_initialized():
        if _between_runs is not None:
            dist.barrier(group=_between_runs)
        return _backend(device)
    return _group(world, device)


def _backend(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def _group(world: World, device: torch.device) -> str:
    """The process group, made unless it is (with the gloo group that waits between runs)."""
    global _between_runs
    import torch.distributed as dist

    backend = _backend(device)
    if dist.is_initialized():
        return backend
    if device.type == "cuda":
        import torch

        torch.cuda.set_device(device)
        # bound to its GPU at once: a barrier without it warned on every run and guessed the
        # device from the current context
        dist.init_process_group(backend, device_id=device)
    else:
        dist.init_process_group(backend)
    _between_runs = dist.new_group(backend="gloo", timeout=BETWEEN_RUNS)
    return backend


def collect_before_exit() -> None:
    """Free what a command left under torchrun while the interpreter is whole: an FSDP model's
    reference cycles hold objects of the process group, and when they are collected during the
    interpreter's finalization instead, gloo aborts the process now and then ("terminate
    called without an active exception", SIGABRT, after a run that completed: 3 of 50
    two-process runs)."""
    import gc

    gc.collect()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # the group `join` kept, left last
        _leave()


def _leave() -> None:
    """Leave the process group (and the group that waits between runs, destroyed with it)."""
    global _between_runs
    import torch.distributed as dist

    dist.destroy_process_group()
    _between_runs = None
