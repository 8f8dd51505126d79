"""Test rows that `final` has scored, kept out of a new version's train and validation splits by
a warning: a new split seed or new ratios move rows across splits, and a run trained on a
version that holds rows an earlier test split scored has seen them.

Each version keeps the content digests of its test rows (`TEST_KEYS`: 16 bytes a row, the
digests duplicates and conflicts group by, never a row's text), so the data step can match
them without reading a sealed split. For a version written before the keys were kept, the step
computes them from its test split, read through its seal (`core.seal.open_sealed`: no row is
shown, no model sees one): skipped, that check had let 9 of the 12 rows an old `final` scored
into a new version's train split with only a "not checked" said. A split whose seal no longer
holds cannot be matched: the step says so."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.seal import SealBrokenError, open_sealed
from tunelab.core.store import Store
from tunelab.data.content import DIGEST_BYTES, row_digest
from tunelab.data.split import Splits

TEST_KEYS = "test_keys.bin"
"""The sorted content digests of a version's test rows, in the version's folder."""


def write_test_keys(folder: Path, splits: Splits) -> Path:
    """The test rows' content digests, sorted, as one file in `folder`."""
    path = folder / TEST_KEYS
    path.write_bytes(b"".join(sorted(ex.content_digest for ex in splits.get("test", []))))
    return path


def opened_test_warnings(store: Store, splits: Splits, version: str) -> list[str]:
    """A warning for each earlier version whose test split `final` opened and whose test rows
    are now in this version's train or validation split (or that cannot be matched)."""
    opened: dict[str, str] = {}  # version -> when its test split was first opened
    for event in store.events():
        if event.get("event") == "final" and event.get("data_version") not in (None, version):
            opened.setdefault(event["data_version"], str(event.get("time", "")))
    out = []
    for earlier, when in opened.items():
        try:
            keys = _test_keys(store, earlier)
        except SealBrokenError as why:
            out.append(
                f"data version {earlier[:8]}'s test split was opened by `final` ({when}), and "
                f"its rows cannot be matched ({why}): whether any of them are now in train or "
                "validation is not checked"
            )
            continue
        moved = {
            split: sum(ex.content_digest in keys for ex in splits.get(split, []))
            for split in ("train", "validation")
        }
        if any(moved.values()):
            where = " and ".join(f"{n} in {split}" for split, n in moved.items() if n)
            out.append(
                f"{sum(moved.values())} of the {len(keys)} test rows `final` scored on data "
                f"version {earlier[:8]} ({when}) are in this version's splits: {where}. A run "
                "trained here has seen rows that test already scored, and this version's test "
                "split is another one: its final does not stand beside the earlier one"
            )
    return out


def _test_keys(store: Store, version: str) -> set[bytes]:
    """The content digests of `version`'s test rows: its `TEST_KEYS`, or, for a version
    written before they were kept, computed from its sealed split."""
    path = store.data_dir(version) / TEST_KEYS
    if path.is_file():
        raw = path.read_bytes()
        return {raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)}
    rows, _ = open_sealed(store, version)
    return {row_digest(row) for row in rows}
