"""Training checkpoints: everything a resumed run needs to continue exactly where it stopped.

A checkpoint folder holds the trainable tensors (safetensors), the optimizer state and the RNG
state (`torch.save`, read back with `weights_only=True`: tensors and plain containers only, no
arbitrary pickle), and `state.json` (step, tokens, loss history, scheduler). The data position
needs no saving: the example order is a pure function of the seed, so the resumed loop skips
the batches already taken. A new checkpoint is written beside the old one and swapped in by
rename, so a kill at any moment leaves a complete checkpoint or the previous one.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tunelab.core.errors import TunelabError
from tunelab.core.store import atomic_write_json

CHECKPOINT_DIR = "checkpoint"


def save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    state: dict,
) -> None:
    tmp = path.with_name(path.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trainable = {
        n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad
    }
    save_file(trainable, str(tmp / "trainable.safetensors"))
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    # into memory first: a full disk is then an OSError naming the file (torch.save writing to
    # a path reports it as a bare RuntimeError)
    buffer = io.BytesIO()
    torch.save({"optimizer": optimizer.state_dict(), "rng": rng}, buffer)
    (tmp / "optimizer.pt").write_bytes(buffer.getvalue())
    sched = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    atomic_write_json(tmp / "state.json", state | {"scheduler": sched})
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def find_checkpoint(path: Path) -> Path | None:
    """The complete checkpoint at `path`, or the previous one if a swap was cut short."""
    for candidate in (path, path.with_name(path.name + ".old")):
        if (candidate / "state.json").exists():
            return candidate
    return None


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> dict:
    """Restore model, optimizer, scheduler and RNG in place; return the saved loop state."""
    tensors = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = sorted(set(n for n, p in params.items() if p.requires_grad) - set(tensors))
    if missing:
        raise TunelabError(f"{path}: checkpoint lacks trainable tensors {missing[:5]}")
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value)
    saved = torch.load(path / "optimizer.pt", weights_only=True)
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"]["cpu"])
    if "cuda" in saved["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
    state = json.loads((path / "state.json").read_text())
    sched = state.pop("scheduler") | {"lr_lambdas": [None] * len(optimizer.param_groups)}
    scheduler.load_state_dict(sched)
    return state
