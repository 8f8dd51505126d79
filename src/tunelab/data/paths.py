"""Where a data source may be read from: inside the lab folder, unless the spec says more.

A source path is relative to the lab folder unless absolute. It is resolved (symbolic links
followed) and must land inside the lab: `../x`, a link that points out, or an absolute path
elsewhere is refused unless `data.allow_outside_lab: true`. Nothing is ever read from the
lab's store (`.tunelab/`, which holds the sealed test split). A folder source's files are
checked one by one, so a link inside the folder cannot reach out either, and so is each file
a row names (an image path column: `locate_file`). What is read is recorded in the data
manifest: the resolved path and, for a folder, the files under it.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.core.digest import sha256_file
from tunelab.core.spec import Source
from tunelab.core.spec_paths import spec_path
from tunelab.core.store import STORE_DIR
from tunelab.data.formats import folder_files, get_loader
from tunelab.data.raw import DataError

ALLOW = "set data.allow_outside_lab: true to read it where it is"


class PlaceError(DataError):
    """A path that exists but may not be read: outside the lab, or inside its store."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind
        """outside_lab or in_store"""


@dataclass
class Located:
    """A source's path, checked: resolved, as shown in example ids, and a folder's files.

    Ids must not depend on where the data happens to be installed: a source inside the lab is
    shown relative to the lab; one outside it (`data.allow_outside_lab`) as the spec gives it
    when that is relative, and by its name (`data.sources[i].name`, else the file or folder's
    own name) when the spec gives an absolute path. The path read is kept in the manifest
    (`resolved`)."""

    path: Path
    shown: str
    files: list[Path] = field(default_factory=list)

    def sha256(self) -> str:
        """The content the source was read from: a file's sha256; a folder's over its sorted
        (relative path, file sha256) list of the files its reader reads (`folder_files`: no
        hidden files; a symbolic link that leads nowhere by where it points)."""
        if not self.path.is_dir():
            return sha256_file(self.path)
        digest = hashlib.sha256()
        for file in self.files:
            rel = file.relative_to(self.path).as_posix()
            content = sha256_file(file) if file.exists() else f"link:{os.readlink(file)}"
            digest.update(f"{rel}\0{content}\n".encode())
        return digest.hexdigest()

    def record(self) -> dict[str, Any]:
        """What the manifest keeps of the paths read."""
        out: dict[str, Any] = {"resolved": str(self.path)}
        if self.path.is_dir():
            out["files"] = [f.relative_to(self.path).as_posix() for f in self.files]
            links = {
                f.relative_to(self.path).as_posix(): str(f.resolve())
                for f in self.files
                if f.resolve() != f
            }
            if links:
                out["links"] = links
        return out


def locate(source: Source, i: int, lab: Path, allow_outside: bool) -> Located:
    """Resolve `data.sources[i].path` and check it may be read; errors name the spec field."""
    where = f"data.sources[{i}].path"
    given = Path(source.path).expanduser()
    path = spec_path(lab, given)
    real = _resolve(path, where, source.path)
    lab_real = Path(lab).resolve()
    _check_place(real, lab_real, allow_outside, where, repr(source.path))
    _check_kind(real, source.type, where, source.path)
    try:
        shown = real.relative_to(lab_real).as_posix()
    except ValueError:  # outside, allowed: relative as the spec gives it, else by its name
        shown = str(given) if not given.is_absolute() else (source.name or given.name)
    files = folder_files(real) if real.is_dir() else []
    for file in files:  # a link to nothing reads nothing: quarantined, wherever it pointed
        rel = file.relative_to(real).as_posix()
        if file.exists():
            _check_place(file.resolve(), lab_real, allow_outside, where, f"{shown}/{rel}")
    return Located(real, shown, files)


def locate_file(given: str, lab: Path, allow_outside: bool, where: str) -> Path:
    """A file that a row names (an image column), relative to the lab folder unless absolute,
    resolved and checked by the rules of a source path. A `PlaceError` if it may not be read
    there, a `DataError` if it is missing or not a regular file; both name `where`."""
    path = Path(given) if Path(given).is_absolute() else Path(lab) / given
    real = _resolve(path, where, given)
    _check_place(real, Path(lab).resolve(), allow_outside, where, repr(given))
    if not real.is_file():
        raise DataError(f"{where}: {given!r} is not a regular file (looked at {real})")
    return real


def _resolve(path: Path, where: str, given: str) -> Path:
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        if path.is_symlink():
            raise DataError(
                f"{where}: {given!r} is a symbolic link to a missing file (looked at {path})"
            ) from None
        glob = any(c in str(given) for c in "*?[")
        raise DataError(
            f"{where}: {given!r} not found (looked at {path}); "
            + (
                "a path names one file or folder, not a pattern: give each file as a source "
                "of its own, or put them in one folder (type: folder)"
                if glob
                else "put the file there, or give its path (relative to the lab folder, or "
                "absolute)"
            )
        ) from None
    except RuntimeError:  # Python < 3.13 reports a link loop this way
        raise DataError(_loop(where, given)) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DataError(_loop(where, given)) from None
        raise DataError(f"{where}: {given!r} cannot be read ({err.strerror})") from None


def _loop(where: str, given: str) -> str:
    return f"{where}: {given!r} is a loop of symbolic links; point it at a real file or folder"


def _check_place(real: Path, lab: Path, allow_outside: bool, where: str, shown: str) -> None:
    if real.is_relative_to(lab / STORE_DIR):
        raise PlaceError(
            f"{where}: {shown} is inside the lab's store ({STORE_DIR}/), which is not data: "
            "it holds the versions already built and the sealed test split",
            "in_store",
        )
    if real.is_file() and real.stat().st_nlink > 1:  # a hard link has no path into the store
        for split in sorted((lab / STORE_DIR / "data").glob("*/*.jsonl")):
            if real.samefile(split):
                raise PlaceError(
                    f"{where}: {shown} is a hard link to {split.relative_to(lab)}, a file of "
                    f"the lab's store ({STORE_DIR}/), which is not data: it holds the versions "
                    "already built and the sealed test split",
                    "in_store",
                )
    if not allow_outside and not real.is_relative_to(lab):
        resolves = "is" if shown.strip("'") == str(real) else f"resolves to {real},"
        raise PlaceError(
            f"{where}: {shown} {resolves} outside the lab folder {lab}; copy the data into the "
            f"lab, or {ALLOW}",
            "outside_lab",
        )


def _check_kind(real: Path, source_type: str, where: str, given: str) -> None:
    takes = get_loader(source_type).takes
    if takes == "folder" and not real.is_dir():
        raise DataError(
            f"{where}: {given!r} is not a folder; a source of type {source_type} is a folder"
            + (" of label sub-folders" if source_type in ("folder", "image_folder") else "")
        )
    if takes == "file" and real.is_dir():
        raise DataError(
            f"{where}: {given!r} is a folder; a source of type {source_type} is one file (for a "
            "folder of label sub-folders use type: folder, or image_folder for images)"
        )
    if takes == "file" and not real.is_file():
        raise DataError(
            f"{where}: {given!r} is not a regular file (a device, a pipe or a socket); "
            f"a source of type {source_type} is one file"
        )
