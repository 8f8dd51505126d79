"""A bundle's `SHA256SUMS`: written over its files, read back without reading outside it.

A bundle is handed over and opened elsewhere, so its `SHA256SUMS` is input from a stranger. A
listed name that is absolute, that has a `..` part, or that resolves outside the bundle (through
a link on the way) is refused by name, with its line, before any listed file is opened: `verify`
must not hash `/etc/passwd` because a line asks it to. A file or folder of the bundle that is a
symbolic link is not a plain file of the bundle (a link to an identical copy elsewhere would
otherwise verify): `verify` reports it as changed and `load_bundle` refuses the bundle.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.files import atomic_write_text

SUMS = "SHA256SUMS"
_DIGEST = re.compile(r"[0-9a-f]{64}")


class BundleError(TunelabError):
    """A bundle whose listing points outside it, or that holds links: refused before reading."""


def write_sums(bundle: Path) -> dict[str, str]:
    """`SHA256SUMS` in sha256sum's format over every other file of the bundle."""
    sums = {
        f.relative_to(bundle).as_posix(): sha256_file(f)
        for f in sorted(bundle.rglob("*"))
        if f.is_file() and f.name != SUMS
    }
    atomic_write_text(bundle / SUMS, "".join(f"{h}  {name}\n" for name, h in sums.items()))
    return sums


def listed(bundle: Path) -> dict[str, str]:
    """`SHA256SUMS` as name -> sha256; a BundleError naming the line of any entry that is not
    a plain path inside the bundle."""
    sums = Path(bundle) / SUMS
    if not sums.is_file() or sums.is_symlink():
        raise BundleError(f"{sums} is missing (or a link): the bundle cannot be checked")
    root = Path(bundle).resolve()
    out = {}
    for number, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        path = PurePosixPath(name)
        if not sep or not _DIGEST.fullmatch(digest) or not name:
            why = "is not `SHA256  NAME` (sha256sum's format)"
        elif path.is_absolute() or ".." in path.parts:
            why = f"names {name!r}, a path outside the bundle"
        elif not (root / path).resolve().is_relative_to(root):
            why = f"names {name!r}, which leads outside the bundle through a link"
        else:
            out[name] = digest
            continue
        raise BundleError(
            f"{sums}:{number}: {why}. A bundle lists only its own files; this one was altered "
            "after export, or not made by tunelab. Export the run again."
        )
    return out


def links(bundle: Path) -> list[str]:
    """Every file or folder inside the bundle that is a symbolic link (not followed)."""
    found = []
    for top, folders, files in os.walk(bundle, followlinks=False):
        for name in folders + files:
            path = Path(top) / name
            if path.is_symlink():
                found.append(path.relative_to(bundle).as_posix())
    return sorted(found)


def require_plain(bundle: Path) -> dict[str, str]:
    """The listing, after refusing a bundle with an unsafe listing or a link (`load_bundle`)."""
    sums = listed(bundle)
    found = links(bundle)
    if found:
        raise BundleError(
            f"{bundle}: {', '.join(found)} {'is a link' if len(found) == 1 else 'are links'}, "
            "not plain files of the bundle; a bundle carries its own bytes. Export the run "
            "again, or copy the bundle without links (cp -rL)."
        )
    return sums


def compare(bundle: Path, sums: dict[str, str]) -> dict[str, list[str]]:
    """Each listed file against its sha256: `changed` (through a link counts as changed),
    `missing`, and `unlisted` (files and links the listing does not name)."""
    linked = links(bundle)

    def through_link(name: str) -> bool:
        return any(name == n or name.startswith(f"{n}/") for n in linked)

    changed, missing = [], []
    for name, digest in sums.items():
        path = bundle / name
        if through_link(name):
            changed.append(name)
        elif not path.is_file():
            missing.append(name)
        elif sha256_file(path) != digest:
            changed.append(name)
    present = set(linked)
    for top, _, files in os.walk(bundle, followlinks=False):
        present |= {(Path(top) / f).relative_to(bundle).as_posix() for f in files}
    unlisted = sorted(n for n in present - set(sums) - {SUMS} if not through_link(n) or n in linked)
    return {"changed": sorted(changed), "missing": sorted(missing), "unlisted": unlisted}
