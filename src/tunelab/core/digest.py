"""sha256 digests: of bytes, of a JSON-able value, of a file, of a file set.

Every hash tunelab records (data versions and their files, the sealed test split, a base
model's identity, a GGUF cache key, a spec's wiring) is one of these, so two records of the
same thing always agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
WHOLE_LIST = 64
"""Lists up to this long are written by one `json.dumps` call when hashed (`sha256_json`)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, compact, UTF-8) of `value`, hashed as it is
    written: a data version's million rows never become one string of all of them."""
    digest = hashlib.sha256()
    for chunk in utf8_chunks(_canonical(value)):
        digest.update(chunk)
    return digest.hexdigest()


def canonical_json(value: Any) -> str:
    """The canonical JSON text `sha256_json` hashes: sorted keys, compact, not ASCII-escaped."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def utf8_chunks(pieces: Iterable[str]) -> Iterator[bytes]:
    """Pieces of text joined and encoded about `CHUNK` characters at a time."""
    pending: list[str] = []
    size = 0
    for piece in pieces:
        pending.append(piece)
        size += len(piece)
        if size >= CHUNK:
            yield "".join(pending).encode("utf-8")
            pending, size = [], 0
    yield "".join(pending).encode("utf-8")


def _canonical(value: Any) -> Iterator[str]:
    """The pieces of `canonical_json(value)`: long lists and string-keyed dicts piece by piece (the
    same bytes: `json` writes a dict's items in sorted key order), anything else whole."""
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        yield "{"
        for i, (key, item) in enumerate(sorted(value.items())):
            yield ("," if i else "") + canonical_json(key) + ":"
            yield from _canonical(item)
        yield "}"
    elif isinstance(value, (list, tuple)) and len(value) > WHOLE_LIST:
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _canonical(item)
        yield "]"
    else:
        yield canonical_json(value)


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
