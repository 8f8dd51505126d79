"""The store's records that its event log does not vouch for.

`Store.save` writes every record of store format 2 with an event that holds its sha256, so a
record no event holds was put there by hand, or its event went with a log cut short, deleted or
replaced. `fsck` names them, and `compare`, `final` and `export` refuse to judge from them
(`Store.require_intact_log`), as they refuse a record edited after its event.
"""

from __future__ import annotations

from pathlib import Path

from tunelab.core.files import DamagedFile, read_json
from tunelab.core.layout import begun_in_format_2, read_format

RECORD_GLOBS = (
    "runs/*/record.json",
    *(f"{folder}/*.json" for folder in ("comparisons", "groups", "noise", "plans", "finals")),
    *(f"{folder}/*.json" for folder in ("exports", "checks", "sizing")),
)
"""Where the store's records are, below its root."""


def record_files(root: Path) -> list[Path]:
    """Every written record below the store's `root` (a reserved, empty one left out)."""
    return sorted(p for pattern in RECORD_GLOBS for p in root.glob(pattern) if p.stat().st_size)


def unlogged(root: Path, lab: Path, hashed: set[str]) -> list[Path]:
    """The records of store format 2 whose path (relative to `lab`) is not in `hashed`, the
    records the log's events hold a sha256 of (`Store.audit`). In a lab begun in format 2
    that is every record: one without `store_format` there is no older record, but one put
    there by hand. One that does not read is left to `fsck`, which names it."""
    every = begun_in_format_2(read_format(root))
    out = []
    for path in record_files(root):
        if str(path.relative_to(lab)) in hashed:
            continue
        try:
            record = read_json(path)
        except DamagedFile:
            continue
        if isinstance(record, dict) and (every or record.get("store_format", 1) >= 2):
            out.append(path)
    return out
