"""sha256 digests: of bytes, of a JSON-able value, of a file, of a folder, of a file set.

Every hash tunelab records (data versions and their files, the sealed test split, a base
model's identity, a GGUF cache key, a spec's wiring) is one of these, so two records of the
same thing always agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, compact, UTF-8) of `value`."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return sha256_bytes(text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_files(files: Iterable[Path]) -> tuple[str, dict[str, str]]:
    """One sha256 over several files in the order given (each file's name, then its bytes),
    and each file's own sha256, in a single read of every file."""
    digest = hashlib.sha256()
    each = {}
    for file in files:
        own = hashlib.sha256()
        digest.update(file.name.encode())
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
                own.update(chunk)
        each[file.name] = own.hexdigest()
    return digest.hexdigest(), each


def sha256_path(path: Path) -> str:
    """A file's sha256; a folder's is over its sorted (relative path, file sha256) list."""
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_file(file)}\n".encode())
    return digest.hexdigest()
