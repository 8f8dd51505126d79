"""The pieces of several-process training that need no process group: who a rank is, what it
takes of a global batch, what it divides the loss by, and when a command joins and leaves the
group (its calls stood in for)."""

from __future__ import annotations

import pytest
import torch

from tunelab.training.distributed import (
    DistributedError,
    World,
    check_batch,
    main_process,
    world_from_env,
)
from tunelab.training.process_group import collect_before_exit, join, joined


def test_each_rank_takes_its_contiguous_share_and_together_they_take_all():
    batch = list(range(100, 108))
    shares = [World(rank, 4, rank, "ddp").share(batch) for rank in range(4)]
    assert shares == [[100, 101], [102, 103], [104, 105], [106, 107]]
    assert World().share(batch) == batch


def test_ddp_divides_the_loss_by_the_count_over_n_and_fsdp_by_the_whole_count():
    assert World(0, 4, 0, "ddp").divisor == 4  # DDP averages the ranks' gradients
    assert World(0, 4, 0, "fsdp").divisor == 1  # FSDP here sums them
    assert World().divisor == 1 and not World().sharded
    assert World(0, 4, 0, "fsdp").sharded and not World(0, 4, 0, "ddp").sharded


def test_one_process_needs_no_collectives():
    world = World()
    assert world.broadcast({"a": 1}) == {"a": 1}
    model = torch.nn.Linear(2, 2)
    assert world.wrap(model, torch.device("cpu"), "fp32") == (model, None)
    record = world.record(torch.device("cpu"), 2, 8)
    assert record["world_size"] == 1 and record["strategy"] is None
    assert record["sharding"] is None and record["fsdp"] is None


def test_the_world_comes_from_torchruns_variables(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert world_from_env("fsdp") == World() and main_process()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DistributedError, match="not RANK, LOCAL_RANK"):
        world_from_env("ddp")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert world_from_env("fsdp") == World(1, 2, 1, "fsdp") and not main_process()
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert world_from_env("fsdp").strategy is None  # one process ignores the strategy


def test_a_global_batch_must_split_evenly_over_processes_and_microbatches():
    check_batch(World(0, 2, 0, "ddp"), 8, 2)
    with pytest.raises(DistributedError, match=r"multiple of 2 processes × training.microbatch"):
        check_batch(World(0, 2, 0, "ddp"), 6, 2)
    # a resumed run takes no key=value: the process counts that fit are named
    with pytest.raises(DistributedError) as refused:
        check_batch(World(0, 3, 0, "ddp"), 8, 2, resumed=True)
    assert str(refused.value).endswith("so resume it on 1, 2, 4 processes (--nproc_per_node)")


def test_a_command_joins_the_process_group_once_for_all_its_runs(monkeypatch):
    """`run --seeds` left the group after each seed and joined it again: the other ranks
    joined the next seed's group while rank 0 still evaluated the last, met the old group's
    addresses in torchrun's store, and hung or were refused. One group serves every run of the
    command, left once, at its end; a later run starts with every rank waiting on a gloo group
    whose timeout outlasts rank 0's evaluation (the group's own, 10 minutes on NCCL, did not)."""
    import torch.distributed as dist

    from tunelab.training import process_group

    calls: list[str] = []
    state = {"up": False}

    def init(backend, **kwargs):
        calls.append(f"init {backend}")
        state["up"] = True

    def new_group(backend, timeout):
        calls.append(f"group {backend} {timeout.total_seconds() / 3600:g} h")
        return "between runs"

    def destroy():
        calls.append("destroy")
        state["up"] = False

    monkeypatch.setattr(dist, "is_initialized", lambda: state["up"])
    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(dist, "new_group", new_group)
    monkeypatch.setattr(dist, "barrier", lambda group=None: calls.append(f"barrier {group}"))
    monkeypatch.setattr(dist, "destroy_process_group", destroy)
    world, cpu = World(rank=1, size=2, local_rank=1, strategy="ddp"), torch.device("cpu")
    for _ in range(2):  # two seeds: each run joins (before its record), then trains in a block
        assert join(world, cpu) == "gloo"
        with joined(world, cpu) as inside:
            assert inside.backend == "gloo" and inside.rank == 1
    assert calls == [
        "init gloo",
        "group gloo 24 h",
        "barrier None",  # the first run's block ends
        "barrier between runs",  # the second run waits for every rank, rank 0 evaluating
        "barrier None",
    ]
    collect_before_exit()
    assert calls[-1] == "destroy" and not state["up"] and process_group._between_runs is None
    calls.clear()  # a block on its own (a `size` probe's process) leaves what it joined
    with joined(world, cpu):
        pass
    assert calls == ["init gloo", "group gloo 24 h", "barrier None", "destroy"]
