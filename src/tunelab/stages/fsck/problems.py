"""How `fsck` names a problem (the check, the path relative to the lab, what is wrong, what to
do), and the reads its checks share."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.files import DamagedFile
from tunelab.core.store import Store, read_json


def json_of(path: Path) -> dict:
    """A record or manifest as far as it reads: one that does not is named once, by
    `_unreadable`, and the other checks pass over it."""
    try:
        value = read_json(path)
    except DamagedFile:
        return {}
    return value if isinstance(value, dict) else {}


def problem_at(store: Store, check: str, path: Path, problem: str, fix: str) -> dict:
    """One problem as the result lists it."""
    return {"check": check, "path": rel(store, path), "problem": problem, "fix": fix}


def rel(store: Store, path: Path) -> str:
    """`path` as fsck shows it: relative to the lab."""
    return str(path.relative_to(store.lab))


def hashed(store: Store, check: str, path: Path, digest: str, changed: str, fix: str) -> list:
    """A file that must still have `digest`: no problem, or one that says missing or changed."""
    if not path.is_file():
        return [problem_at(store, check, path, "missing", fix)]
    if sha256_file(path) != digest:
        return [problem_at(store, check, path, changed, fix)]
    return []
