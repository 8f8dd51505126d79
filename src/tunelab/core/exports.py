"""The lab's export records, as `export` writes them and `fsck` reads them: which bundles they
name. A bundle is renamed into place whole before its record is saved, so a kill between the
two leaves a bundle no record names; both commands say so."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.files import DamagedFile, read_json
from tunelab.core.layout import EXPORTS
from tunelab.core.sums import SUMS, BundleError, listed

BUNDLE_FILE = "tunelab.json"
"""What a bundle says of itself: its run, when it was made, its base..."""
SCRATCH_BASE = "base"
"""The folder of a scratch model's bundle that holds its base: `config.json` and
`tokenizer/`."""


def recorded_export(store, bundle: Path) -> dict | None:
    """The lab's export record of the bundle in folder `bundle`: the same run, made at the same
    moment (paths are not compared: a lab moves, `--out` may be relative); None if none."""
    try:
        info = read_json(Path(bundle) / BUNDLE_FILE)
    except (DamagedFile, OSError):
        return None
    if not isinstance(info, dict):
        return None
    made = (info.get("run"), info.get("created"))
    records = store.records(EXPORTS)
    return next((r for r in records if (r.get("run"), r.get("created")) == made), None)


def relisted(record: dict, bundle: Path) -> str | None:
    """How the bundle's SHA256SUMS differs from the one its export recorded (`sums_sha256`):
    a file changed or removed together with its line there passes every check against the
    bundle's own listing, and only the lab's record tells. None when it is the same, or when
    the record kept no hash (an older tunelab's)."""
    kept, sums = record.get("sums_sha256"), Path(bundle) / SUMS
    if not kept or not sums.is_file() or (now := sha256_file(sums)) == kept:
        return None
    before = set(record.get("files") or ())
    try:
        names = set(listed(bundle))
    except BundleError:  # a listing that leads outside the bundle: `files` names it
        names = before
    moved = [
        f"{what} {', '.join(sorted(which))}"
        for what, which in (("not listed now:", before - names), ("listed since:", names - before))
        if which and before
    ]
    return (
        f"SHA256SUMS is not the one the export wrote (sha256 {kept[:16]}… recorded in "
        f"{record.get('file', 'its export record')}, {now[:16]}… now"
        + "".join(f"; {m}" for m in moved)
        + "): files were changed together with their listing after the export"
    )
