"""The lab's export records, as `export` writes them and `fsck` reads them: which bundles they
name. A bundle is renamed into place whole before its record is saved, so a kill between the
two leaves a bundle no record names; both commands say so."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.files import DamagedFile, read_json
from tunelab.core.layout import EXPORTS

BUNDLE_FILE = "tunelab.json"
"""What a bundle says of itself: its run, when it was made, its base..."""


def recorded_export(store, bundle: Path) -> bool:
    """Whether an export record of the lab is of the bundle in folder `bundle`: the same run,
    made at the same moment (paths are not compared: a lab moves, `--out` may be relative)."""
    try:
        info = read_json(Path(bundle) / BUNDLE_FILE)
    except (DamagedFile, OSError):
        return False
    if not isinstance(info, dict):
        return False
    made = (info.get("run"), info.get("created"))
    return any((r.get("run"), r.get("created")) == made for r in store.records(EXPORTS))
