"""Several processes under `torchrun`: who this process is, and what it shares with the others.

A run under `torchrun --nproc_per_node N` is one run, not N: every rank computes the same
seeded global order of examples, and each takes its own contiguous share of every global batch
(`World.share`), so N × microbatch × accumulation is the spec's global batch and the examples a
step sees are exactly those one process would see. The loss stays normalised by the count of
the *whole* global batch (known to every rank from the shared order, so no collective is needed
for it); DDP averages the ranks' gradients, so each rank divides by that count / N and the
average is the single-process gradient. Rank 0 alone writes records, events, heartbeats,
checkpoints and predictions, and evaluates on the whole validation split after training.

Strategies: `ddp` (each rank a full replica, gradients all-reduced and averaged, so each rank's
loss is divided by the count / N) and `fsdp` (FSDP2, `tunelab.training.sharding`: parameters,
gradients and optimizer state sharded, gradients summed, so each rank divides by the whole
count). On CPU the backend is gloo, on CUDA nccl with `cuda:LOCAL_RANK`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunelab.core.errors import TunelabError

if TYPE_CHECKING:
    import torch

TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


class DistributedError(TunelabError):
    """The processes cannot share this run as the spec says."""


@dataclass(frozen=True)
class StepTotals:
    """One optimizer step as every rank read it (`World.step_totals`)."""

    loss: float
    """The task's loss, normalised as the gradients are."""
    tokens: int
    grad_norm: float | None
    stop: bool
    """Whether any rank was asked to stop."""
    out_of_time: bool
    """Whether any rank's training time passed `training.budget.seconds`."""
    balance: float | None
    """A mixture of experts' load-balancing term, trained on beside `loss`; None otherwise."""


@dataclass(frozen=True)
class World:
    """This process's place among the run's processes (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    strategy: str | None = None
    backend: str | None = None

    @property
    def main(self) -> bool:
        """The rank that writes (records, events, checkpoints) and evaluates."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def sharded(self) -> bool:
        """FSDP: no rank holds the whole model (checkpoints and the final gather need all)."""
        return self.distributed and self.strategy == "fsdp"

    @property
    def divisor(self) -> int:
        """What the ranks' gradients are divided by when they are combined: DDP averages (N),
        FSDP here sums (1); the loss is normalised by the global count / divisor."""
        return self.size if self.distributed and not self.sharded else 1

    def share(self, batch: list[int]) -> list[int]:
        """This rank's contiguous share of a global batch of example indices."""
        per = len(batch) // self.size
        return batch[self.rank * per : (self.rank + 1) * per]

    def step_totals(self, out, stop: bool, out_of_time: bool = False) -> StepTotals:
        """One step's loss (normalised as the gradients are: / `divisor`) and tokens summed
        over every rank, its gradient norm, and whether any rank asked to stop, from one
        collective of one small tensor on the training device and one read to the host: the
        only point of the step where the host waits for the device (`out`: the step's
        `StepResult`). The norm is the same on every rank (it is taken after the gradients are
        combined), so its sum is divided by the ranks."""
        import torch

        loss = out.loss
        norm = out.grad_norm if out.grad_norm is not None else torch.zeros_like(loss)
        balance = out.balance if out.balance is not None else torch.zeros_like(loss)
        packed = torch.stack(
            [
                loss.double(),
                out.tokens.double(),
                norm.to(loss.device).double(),
                loss.new_tensor(1.0 if stop else 0.0).double(),
                balance.double(),
                loss.new_tensor(1.0 if out_of_time else 0.0).double(),
            ]
        )
        if self.distributed:
            import torch.distributed as dist

            dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        total, tokens, norms, stops, balanced, late = packed.tolist()
        return StepTotals(
            loss=total / self.divisor,
            tokens=round(tokens),
            grad_norm=norms / self.size if out.grad_norm is not None else None,
            stop=stops > 0,
            out_of_time=late > 0,
            balance=balanced / self.divisor if out.balance is not None else None,
        )

    def gather(self, value) -> list:
        """Every rank's `value` (picklable), in rank order, on every rank."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        values: list = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def broadcast(self, value):
        """Rank 0's `value` on every rank (a picklable object; itself in one process)."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def wrap(
        self, model: torch.nn.Module, device: torch.device, precision: str
    ) -> tuple[torch.nn.Module, dict | None]:
        """The model as this strategy trains it (DDP around it, or sharded in place by FSDP;
        itself in one process), and what the record keeps of the sharding."""
        if not self.distributed:
            return model, None
        if self.sharded:
            from tunelab.training.sharding import shard

            return model, shard(model, device, self.size, precision)
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), None

    def devices(self, device: torch.device) -> list[str]:
        """Every rank's device, in rank order."""
        return [str(n) for n in self.gather(_device_name(device))]

    def record(
        self, device: torch.device, microbatch: int, global_batch: int, fsdp: dict | None = None
    ) -> dict:
        """What the run record keeps of the processes and how the data and model were shared."""
        per = global_batch // self.size
        return {
            "world_size": self.size,
            "strategy": self.strategy if self.distributed else None,
            "backend": self.backend,
            "devices": self.devices(device),
            "sharding": (
                f"each global batch of {global_batch} in the single-process order, cut into "
                f"{self.size} contiguous shares of {per} ({per // microbatch} microbatch(es) of "
                f"{microbatch} per rank)"
                if self.distributed
                else None
            ),
            "loss_normalisation": (
                f"the whole global batch's count / {self.divisor} on every rank (gradients "
                + ("averaged" if self.divisor > 1 else "summed")
                + " across ranks)"
                if self.distributed
                else None
            ),
            "fsdp": fsdp,
            "shared_cores": (
                oversubscribed(int(os.environ.get("LOCAL_WORLD_SIZE", self.size)))
                if self.distributed and device.type == "cpu"
                else None
            ),
        }


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        import torch

        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Broken pipe")
"""What gloo says when another rank's end of a collective went away (it died, or was killed)."""


def peer_lost(err: BaseException) -> str | None:
    """Under several processes, an error that says another rank went away, in words: gloo's
    own ("... GLHF!") suggest a bug to report. None otherwise."""
    if os.environ.get("WORLD_SIZE", "1") == "1":
        return None
    text = str(err)
    seen = next((p for p in PEER_LOST if p in text), None)
    if seen is None:
        return None
    return (
        f"another process of this run stopped ({seen.lower()}, says {type(err).__name__}): a "
        "rank died or was killed, so the collectives it left cannot go on; torchrun's report "
        "names the rank that stopped first and why (its own error, above, or a signal)"
    )


def oversubscribed(nproc: int) -> str | None:
    """Why the ranks' speeds are not what `nproc` cores would give, when this machine has fewer
    cores than processes (the memory per rank holds; the speed does not)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if nproc <= cores:
        return None
    return (
        f"{nproc} processes on {cores} cores: the ranks share cores, so each rank's tokens/s "
        "and the advice's speed are below what a machine with a core per process gives (its "
        "memory per rank holds)"
    )


def main_process() -> bool:
    """Rank 0 under torchrun, or the only process: the one that writes and reports."""
    return os.environ.get("RANK", "0") == "0"


def world_from_env(strategy: str) -> World:
    """This process's world from torchrun's variables (none set: one process)."""
    if "WORLD_SIZE" not in os.environ:
        return World()
    missing = [v for v in TORCHRUN_VARIABLES if v not in os.environ]
    if missing:
        raise DistributedError(
            f"WORLD_SIZE is set but not {', '.join(missing)}: start several processes with "
            "`torchrun --nproc_per_node N -m tunelab.cli run ...`"
        )
    size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    return World(rank, size, local, strategy if size > 1 else None)


def check_batch(world: World, global_batch: int, microbatch: int, resumed: bool = False) -> None:
    """N processes × microbatch × accumulation must make the spec's global batch. A resumed
    run keeps its spec: only the number of processes can change, and the counts that fit are
    named."""
    if global_batch % (world.size * microbatch):
        fit = [
            n
            for n in range(1, global_batch // microbatch + 1)
            if not global_batch % (n * microbatch)
        ]
        fix = (
            f"a resumed run keeps its spec, so resume it on {', '.join(map(str, fit))} "
            "processes (--nproc_per_node)"
            if resumed
            else "change one of them, or --nproc_per_node"
        )
        raise DistributedError(
            f"training.global_batch ({global_batch}) must be a multiple of {world.size} "
            f"processes × training.microbatch ({microbatch}), so that every rank takes the "
            f"same share of each global batch; {fix}"
        )


def device_for(world: World, device: torch.device) -> torch.device:
    """Each rank's own GPU (`cuda:LOCAL_RANK`); on CPU every rank uses the CPU."""
    import torch

    if world.distributed and device.type == "cuda":
        count = torch.cuda.device_count()
        if world.local_rank >= count:
            raise DistributedError(
                f"local rank {world.local_rank} has no GPU of its own ({count} on this node): "
                f"start at most --nproc_per_node {count} processes per node"
            )
        return torch.device("cuda", world.local_rank)
    return device
