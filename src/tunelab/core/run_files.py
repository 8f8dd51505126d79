"""A completed run's files as its record vouches for them: its predictions, its weights and the
scored documents of its forgetting sets, each with the sha256 the record holds (None where the
run was written before store format 2 hashed them). `fsck` checks every run this way; `export`
and `final` check the run they hand over or open the seal for, and refuse one whose files
changed (each weights file flipped by a byte had gone into a verified bundle). And the loss
history a run appends as it trains (`written_history`), which a stopped run's record lacks."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.layout import HISTORY, PREDICTIONS


def vouched(folder: Path, record: dict) -> dict[Path, str | None]:
    """Each file of the completed run in `folder`, with the sha256 its record holds."""
    weights = record.get("weights") or {}
    hashes = weights.get("sha256") or {}
    wanted = {folder / PREDICTIONS: record.get("predictions_sha256")}
    wanted |= {folder / weights["dir"] / f: hashes.get(f) for f in weights.get("files", [])}
    # the scored documents of its forgetting sets (a guardrail `on` a text)
    wanted |= {folder / g["file"]: g["sha256"] for g in (record.get("guard") or {}).values()}
    return wanted


def what_changed(path: Path, digest: str | None) -> str | None:
    """What is wrong with one vouched file: `missing`, changed, or None."""
    if not path.is_file():
        return "missing" if digest else "missing from a completed run"
    if digest and sha256_file(path) != digest:
        return f"changed since the run wrote it (sha256 {digest[:12]} expected)"
    return None


def trained_to_end(record: dict, folder: Path) -> bool:
    """The run in `folder` trained to its end and saved its weights, then stopped before its
    evaluation was recorded: resuming evaluates those weights."""
    weights = record.get("weights") or {}
    if not record.get("training") or not weights.get("files"):  # none recorded: a stop came
        return False  # between writing the files and recording them, so none are vouched for
    return all((folder / weights["dir"] / f).is_file() for f in weights["files"])


def changed_weights(folder: Path, record: dict) -> list[tuple[Path, str]]:
    """The saved weights files of the run in `folder` that are not as its record hashed them,
    with what is wrong: what `resume` would evaluate of a run stopped after saving them."""
    weights = record.get("weights") or {}
    where = folder / weights.get("dir", "weights")
    return [
        (where / name, problem)
        for name, digest in (weights.get("sha256") or {}).items()
        if (problem := what_changed(where / name, digest))
    ]


def require_intact_run(folder: Path, record: dict, command: str) -> None:
    """Refuse a run whose vouched files are missing or changed, naming each."""
    found = [
        f"{path.relative_to(folder)} {problem}"
        for path, digest in vouched(folder, record).items()
        if (problem := what_changed(path, digest))
    ]
    if found:
        raise TunelabError(
            f"{folder}: run {record['id']}'s files are not as it wrote them "
            f"({'; '.join(found[:5])}). `tunelab {command}` does not hand over or judge from "
            "them: restore them from a backup, or train the run again; `tunelab fsck` lists "
            "every problem in the lab."
        )


def written_history(folder: Path) -> list[dict]:
    """The loss history the run in `folder` appended a line a step (`history.jsonl`), as far as
    it was written: a line cut by a kill while it was written ends it."""
    import json

    path = folder / HISTORY
    out = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(entry, dict) and "step" in entry:
            out.append(entry)
    return out
