"""The sealed test split, read only after its seal is checked.

`tunelab data` records the sha256 of each version's `test.jsonl` in its manifest
(`test_sha256`). `Store.read_split` refuses "test"; `open_sealed` is the one reader. It reads
the file's bytes once, checks them against the seal and parses those same bytes, so what is
used is what was sealed. Three callers: `tunelab final` (evaluates on it, once, on purpose),
`data.eval_from` (copies an earlier version's test rows into a new version unchanged; no
model sees them) and `data.opened` (the content digests of an opened test split written
before versions kept them, to find its rows in a new version's train split; no row is
shown). `final`'s openings are logged; `final_accesses` reads them back, for `final` (which
asks a reason after the first) and the handover (which lists them).
"""

from __future__ import annotations

import json

from tunelab.core.digest import sha256_bytes
from tunelab.core.layout import FINALS
from tunelab.core.store import Store, StoreError

__all__ = ["SealBrokenError", "final_accesses", "open_sealed"]


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


def final_accesses(store: Store) -> list[dict]:
    """Every opening of the test split, oldest first (time, run, reason, repeated, file...).

    Read strictly: a damaged event line could hide an earlier opening, so it is an error that
    names the line; and every result in `finals/` must have its opening in the log."""
    accesses = [e for e in store.events(strict=True) if e.get("event") == "final"]
    logged = {e.get("file") for e in accesses}
    for path in store.numbered(FINALS):
        shown = str(path.relative_to(store.lab))
        if shown not in logged:
            raise SealBrokenError(
                f"{shown} records an opening of the test split that the event log "
                f"({store.log_path}) does not have: the access log is incomplete. "
                "Restore the log's `final` line before opening the split again."
            )
    return accesses
