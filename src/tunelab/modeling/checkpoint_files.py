"""Where a run's checkpoint is, which processes wrote it, and whether its files are as they were
written: read from its folder alone, without torch, so `tunelab resume` refuses a run it cannot
continue before any model code loads (and `fsck` checks it). Writing and loading a checkpoint
is `modeling.checkpoint`'s."""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.run_files import trained_to_end

CHECKPOINT_DIR = "checkpoint"
STATE = "state.json"
"""The loop's state, written last: its presence marks a whole checkpoint."""


def written_by(path: Path) -> dict:
    """The processes that wrote the checkpoint at `path` (one process unless it says)."""
    state = json.loads((path / STATE).read_text())
    return state.get("written_by") or {"world_size": 1, "strategy": None}


def can_resume(record: dict, run_dir: Path) -> bool:
    """Whether `tunelab resume` has something to go on from in `run_dir`: a whole checkpoint,
    or the weights saved as training ended (then it evaluates them)."""
    return trained_to_end(record, run_dir) or find_checkpoint(run_dir / CHECKPOINT_DIR) is not None


def find_checkpoint(path: Path) -> Path | None:
    """The complete checkpoint at `path`, or the previous one if a swap was cut short."""
    for candidate in (path, path.with_name(path.name + ".old")):
        if (candidate / STATE).exists():
            return candidate
    return None


ADDED = "not written with the checkpoint (a file added since)"
"""`checkpoint_problems`' words for a file the checkpoint does not list (fsck's fix: delete it)."""


def sharded(path: Path) -> bool:
    """Whether several processes wrote the checkpoint at `path` with DCP: as its `state.json`
    says, never as its files suggest (DCP unpickles its `.metadata`, so a file dropped into a
    one-process checkpoint must not be what sends it there)."""
    return "written_by" in json.loads((path / STATE).read_text())


def checkpoint_problems(path: Path) -> list[str]:
    """What makes the checkpoint at `path` not as its run wrote it: `state.json` unreadable, a
    file missing or changed against the sha256 it records, or a file it does not list (added
    since: DCP's `.metadata` is a pickle, and a checkpoint is read only as it was written). A
    checkpoint written before these were recorded has none to check."""
    from tunelab.core.digest import sha256_file

    try:
        state = json.loads((path / STATE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return [f"{path / STATE}: unreadable ({err})"]
    problems = []
    listed = state.get("files") or {}
    for name, expected in listed.items():
        file = path / name
        if not file.is_file():
            problems.append(f"{file}: missing")
        elif (actual := sha256_file(file)) != expected:
            problems.append(f"{file}: sha256 {actual[:12]}…, written as {expected[:12]}…")
    if listed:
        for file in sorted(f for f in path.rglob("*") if not f.is_dir()):
            name = file.relative_to(path).as_posix()
            if name != STATE and name not in listed:
                problems.append(f"{file}: {ADDED}")
    return problems


def lacks_state(path: Path) -> bool:
    """A checkpoint folder with files in it but no `state.json`: damaged, not absent."""
    return path.is_dir() and any(path.iterdir()) and not (path / STATE).exists()
