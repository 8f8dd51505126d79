"""The sealed test split, read only after its seal is checked.

`tunelab data` records the sha256 of each version's `test.jsonl` in its manifest
(`test_sha256`). `Store.read_split` refuses "test"; `open_sealed` is the one reader. It reads
the file's bytes once, checks them against the seal and parses those same bytes, so what is
used is what was sealed. Two callers: `tunelab final` (evaluates on it, once, on purpose) and
`data.eval_from` (copies an earlier version's test rows into a new version unchanged; no
model sees them).
"""

from __future__ import annotations

import json

from tunelab.core.digest import sha256_bytes
from tunelab.core.store import Store, StoreError

__all__ = ["SealBrokenError", "open_sealed"]


class SealBrokenError(StoreError):
    """The test split no longer matches the hash recorded when the data version was made."""


def open_sealed(store: Store, version: str) -> tuple[list[dict], str]:
    """The rows of the sealed test split and its hash, after checking the seal.

    The bytes are read once, hashed and parsed, so the file cannot change between the check
    and the use.
    """
    expected = store.data_manifest(version).get("test_sha256")
    path = store.data_dir(version) / "test.jsonl"
    if not expected:
        raise SealBrokenError(
            f"data version {version} has no test_sha256 in its manifest: the test split was "
            "never sealed; rebuild the data with `tunelab data`."
        )
    if not path.exists():
        raise SealBrokenError(f"{path}: the sealed test split of version {version} is missing.")
    data = path.read_bytes()
    actual = sha256_bytes(data)
    if actual != expected:
        raise SealBrokenError(
            f"{path}: the sealed test split changed since `tunelab data` made version "
            f"{version}: the manifest records sha256 {expected}, the file now has {actual}. "
            "Refusing to read it; restore the file or make a new data version."
        )
    text = data.decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()], actual
