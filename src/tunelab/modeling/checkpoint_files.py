"""Where a run's checkpoint is and which processes wrote it: read from its folder alone, without
torch, so `tunelab resume` refuses a run it cannot continue before any model code loads. Writing
and loading a checkpoint is `modeling.checkpoint`'s."""

from __future__ import annotations

import json
from pathlib import Path

CHECKPOINT_DIR = "checkpoint"


def written_by(path: Path) -> dict:
    """The processes that wrote the checkpoint at `path` (one process unless it says)."""
    state = json.loads((path / "state.json").read_text())
    return state.get("written_by") or {"world_size": 1, "strategy": None}


def find_checkpoint(path: Path) -> Path | None:
    """The complete checkpoint at `path`, or the previous one if a swap was cut short."""
    for candidate in (path, path.with_name(path.name + ".old")):
        if (candidate / "state.json").exists():
            return candidate
    return None
