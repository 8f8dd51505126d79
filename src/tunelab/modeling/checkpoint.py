"""Training checkpoints: everything a resumed run needs to continue exactly where it stopped.

A checkpoint folder holds the trainable tensors (safetensors), the optimizer state and the RNG
state (`torch.save`, read back with `weights_only=True`: tensors and plain containers only, no
arbitrary pickle), and `state.json` (step, tokens, seconds, scheduler; the loss history is the
run's own `history.jsonl`, `training.loop.HistoryFile`). The data position
needs no saving: the example order is a pure function of the seed, so the resumed loop skips
the batches already taken. A new checkpoint is written beside the old one and swapped in by
rename, so a kill at any moment leaves a complete checkpoint or the previous one; like the
store's records, every file of it is fsynced before the rename and the folder after it
(`durable`), so a power loss cannot leave a renamed checkpoint with empty tensor files. Where
the checkpoint is and who wrote it are read without torch (`checkpoint_files`).

Under several processes (`torchrun`), a checkpoint is written with `torch.distributed.checkpoint`
(DCP) by every rank: one folder, each rank's shard of the trained tensors and of the optimizer
state in its own file, each rank's generators in `rng-RANK.pt`, and rank 0's `.metadata` and
`state.json`; `state.json` says so (`written_by`), and it alone sends a checkpoint to DCP's
loader, which unpickles `.metadata` (a file dropped into a one-process checkpoint is refused
as unlisted, `checkpoint_files.checkpoint_problems`). DCP reshards on load, so such a
checkpoint resumes on any number of processes and either strategy, one process included (a
rank the writing world lacked takes rank 0's generators); a one-process checkpoint resumes
under DDP (every rank reads it) or FSDP (every rank takes its shard of it). On a GPU a process
keeps its own device's generator only.
"""

from __future__ import annotations

import io
import json
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file, save_file

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.files import _fsync
from tunelab.core.store import atomic_write_json
from tunelab.modeling.checkpoint_files import STATE, sharded

if TYPE_CHECKING:
    from tunelab.training.distributed import World


def save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    state: dict,
    world: World | None = None,
    best: dict[str, torch.Tensor] | None = None,
) -> None:
    """Write the checkpoint beside the old one and swap it in (every rank calls it under
    several processes; one process writes it alone). `best`: the weights `training.keep: best`
    holds aside (`Validation.saved`, named as the model it trains names them), saved with the
    rest so that a resumed run can still keep them."""
    tmp = path.with_name(path.name + ".new")
    state = state | {"scheduler": _scheduler(scheduler)}
    if world is not None and world.distributed:
        _save_sharded(tmp, model, optimizer, world, best)
        if world.main:  # every rank's shards and generators are written: the barrier said so
            written = {"world_size": world.size, "strategy": world.strategy}
            _write_state(tmp, state | {"written_by": written})
            durable(tmp)
            _swap(tmp, path)
        _barrier()  # no rank goes on (or reads it) before the swap
        return
    model = getattr(model, "module", model)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trainable = {
        n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad
    }
    save_file(trainable, str(tmp / "trainable.safetensors"))
    if best is not None:
        save_file({n: t.detach().cpu().contiguous() for n, t in best.items()}, str(tmp / BEST))
    rng = _rng(model)
    # into memory first: a full disk is then an OSError naming the file (torch.save writing to
    # a path reports it as a bare RuntimeError)
    buffer = io.BytesIO()
    torch.save({"optimizer": optimizer.state_dict(), "rng": rng}, buffer)
    (tmp / "optimizer.pt").write_bytes(buffer.getvalue())
    _write_state(tmp, state)
    durable(tmp)
    _swap(tmp, path)


def _write_state(tmp: Path, state: dict) -> None:
    """`state.json`, last, with the sha256 of every other file of the checkpoint: `resume` and
    `fsck` read them back (`checkpoint_files.checkpoint_problems`), so a file damaged or cut
    since is refused by name, not resumed from."""
    files = {
        f.relative_to(tmp).as_posix(): sha256_file(f)
        for f in sorted(tmp.rglob("*"))
        if f.is_file() and f.name != STATE
    }
    atomic_write_json(tmp / STATE, state | {"files": files})


def _scheduler(scheduler: torch.optim.lr_scheduler.LRScheduler) -> dict:
    return {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}


def _rng(model: torch.nn.Module) -> dict:
    """The CPU generator's state and, on a GPU, the generator of this process's own device (the
    model's): reading every device's (`get_rng_state_all`) would open a context on each GPU of
    the node from every rank, and restore rank 0's view of the others' generators."""
    rng = {"cpu": torch.get_rng_state()}
    device = _device_of(model)
    if device.type == "cuda":
        rng["cuda_device"] = torch.cuda.get_rng_state(device)
    return rng


def _set_rng(rng: dict, model: torch.nn.Module) -> None:
    """Restore `_rng`'s states into this process's generators. A checkpoint written before it
    held every device's state (`cuda`, a list): this device's entry is taken from it."""
    torch.set_rng_state(rng["cpu"])
    device = _device_of(model)
    if device.type != "cuda":
        return
    state = rng.get("cuda_device")
    listed = rng.get("cuda") or []
    if state is None and (device.index or 0) < len(listed):
        state = listed[device.index or 0]
    if state is not None:
        torch.cuda.set_rng_state(state, device)


def _device_of(model: torch.nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def durable(folder: Path) -> None:
    """fsync every file under `folder` (tensors, optimizer state, shards) and the folders
    that hold them, as the store does for a record before its rename."""
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        _fsync(file)
    for sub in sorted((d for d in folder.rglob("*") if d.is_dir()), reverse=True):
        _fsync(sub)
    _fsync(folder)


def _swap(tmp: Path, path: Path) -> None:
    """`tmp` becomes `path`; a kill at any moment leaves one of them whole. The renames are
    made durable by an fsync of the parent folder."""
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    _fsync(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> dict:
    """Restore model, optimizer, scheduler and RNG in place; return the saved loop state, with
    `best_weights` where the checkpoint holds `keep: best`'s weights (`best`: their step and
    loss) and this world can read them. Under several processes every rank calls it, with the
    model as its strategy wraps it."""
    if sharded(path):
        _load_sharded(path, model, optimizer)
    elif _is_sharded(model):
        _load_whole_into_shards(path, model, optimizer)
    else:
        _load_whole(path, getattr(model, "module", model), optimizer)
    state = json.loads((path / STATE).read_text())
    state.pop("files", None)  # checked before anything loads (`resume`'s refusals)
    sched = state.pop("scheduler") | {"lr_lambdas": [None] * len(optimizer.param_groups)}
    scheduler.load_state_dict(sched)
    if state.get("best"):
        state["best_weights"] = _load_best(path, model)
    return state


BEST = "best.safetensors"
"""`training.keep: best`'s weights in a one-process checkpoint (under DCP, its `best` entry)."""


def _load_best(path: Path, model: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """The kept best weights, named and placed as the model's trainable parameters (a shard
    each under FSDP); None where this world cannot take them as written (a one-process
    checkpoint resumed under FSDP: `Validation.restore` then says the best was not kept)."""
    if sharded(path):
        import torch.distributed.checkpoint as dcp

        like = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        single = not torch.distributed.is_initialized()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            dcp.load({"best": like}, checkpoint_id=str(path), no_dist=single)
        return like
    if _is_sharded(model) or not (path / BEST).is_file():
        return None
    params = dict(getattr(model, "module", model).named_parameters())
    prefix = "module." if hasattr(model, "module") else ""  # DDP names them through its wrapper
    return {prefix + n: t.to(params[n].device) for n, t in load_file(str(path / BEST)).items()}


def _read(path: Path) -> dict:
    """What `torch.save` wrote, read onto the CPU; `load_state_dict` then moves each tensor to
    its parameter's device. Read where it was saved, every rank of a run resumed under torchrun
    put the whole optimizer state on `cuda:0` (about 62 GiB of the other ranks' AdamW state
    there for a 1.1B full fine-tune on 8 GPUs), and a CUDA checkpoint could not resume on a
    CPU."""
    return torch.load(path, weights_only=True, map_location="cpu")


def _load_whole(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    tensors = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = sorted(set(n for n, p in params.items() if p.requires_grad) - set(tensors))
    if missing:
        raise TunelabError(f"{path}: checkpoint lacks trainable tensors {missing[:5]}")
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value)
    saved = _read(path / "optimizer.pt")
    _same_trainable_set(path, saved["optimizer"], optimizer)
    optimizer.load_state_dict(saved["optimizer"])
    _set_rng(saved["rng"], model)


def _same_trainable_set(path: Path, saved: dict, optimizer: torch.optim.Optimizer) -> None:
    """The checkpoint's optimizer stepped as many tensors as this one steps, or a clear refusal
    (torch would say only that a parameter group's size does not match)."""
    then = sum(len(g["params"]) for g in saved["param_groups"])
    now = sum(len(g["params"]) for g in optimizer.param_groups)
    if then != now:
        raise TunelabError(
            f"{path}: this checkpoint's optimizer stepped {then} tensors and this run trains "
            f"{now}: another trainable set (a changed method, or a tunelab that now freezes "
            "tensors no gradient can reach), so it cannot resume; start the run again"
        )


def _options(**kwargs):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(ignore_frozen_params=True, **kwargs)


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


def _is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _save_sharded(tmp: Path, model, optimizer, world: World, best: dict | None = None) -> None:
    """Every rank writes its shards with DCP and its generators; rank 0 then writes the loop
    state (`save_checkpoint`)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    if world.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    model_state, optim_state = get_state_dict(model, optimizer, options=_options())
    saved = {"model": model_state, "optimizer": optim_state}
    dcp.save(saved | ({"best": best} if best is not None else {}), checkpoint_id=str(tmp))
    buffer = io.BytesIO()  # into memory first, as above; each rank its own generators
    torch.save(_rng(model), buffer)
    (tmp / _rng_file(world.rank)).write_bytes(buffer.getvalue())
    _barrier()  # every rank's generators are written before rank 0 hashes the folder


def _rng_file(rank: int) -> str:
    return f"rng-{rank}.pt"


def _load_sharded(path: Path, model, optimizer) -> None:
    """DCP reads each rank's part of the saved tensors, whatever the world that wrote them."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer, options=_options())
    loaded = {"model": model_state, "optimizer": optim_state}
    single = not torch.distributed.is_initialized()  # one process reads what several wrote
    with warnings.catch_warnings():
        # dcp warns that it assumes this even when told so (`no_dist`): the notice says nothing
        # a user resuming on one machine has not asked for
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.load(loaded, checkpoint_id=str(path), no_dist=single)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=loaded["model"],
        optim_state_dict=loaded["optimizer"],
        options=_options(strict=False),  # the frozen base is not in it
    )
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    # this rank's generators; a rank the writing world did not have takes rank 0's, and a
    # checkpoint written before per-rank files has rank 0's alone (`rng.pt`)
    found = [path / _rng_file(rank), path / _rng_file(0), path / "rng.pt"]
    _set_rng(_read(next(f for f in found if f.exists())), model)


def _load_whole_into_shards(path: Path, model, optimizer) -> None:
    """A one-process checkpoint into FSDP: every rank reads it whole and keeps its shard. The
    optimizer state is keyed by parameter order there; here by name (the same order: both
    optimizers take the trainable parameters as the model lists them)."""
    from torch.distributed.checkpoint.state_dict import set_state_dict

    tensors = load_file(str(path / "trainable.safetensors"))
    saved = _read(path / "optimizer.pt")
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    whole = saved["optimizer"]
    optim_state = {
        "state": {names[i]: value for i, value in whole["state"].items()},
        "param_groups": [
            g | {"params": [names[i] for i in g["params"]]} for g in whole["param_groups"]
        ],
    }
    set_state_dict(
        model,
        optimizer,
        model_state_dict=tensors,
        optim_state_dict=optim_state,
        options=_options(full_state_dict=True, strict=False),
    )
    _set_rng(saved["rng"], model)
