"""What a killed export leaves in the lab's `bundles/`, and how the next export clears it.

A bundle is written into a hidden temporary folder beside it (`.RUN.XXXX.tmp`, made by
`atomic_dir`) and renamed into place when whole; a kill (SIGKILL, a power loss) before the
rename leaves that folder behind. The next export removes such leftovers, and only them:
hidden folders of that pattern directly in `bundles/`, and beside a bundle given with `--out`
elsewhere those of its own name.

A temporary folder of an export still running in another process is not a leftover. Each
export holds an exclusive lock (`flock`) on its temporary folder while it writes; the lock
dies with the process, so a folder nobody holds is one a killed export left. The folder is
created and locked under a shared lock on `bundles/`, and leftovers are looked for under an
exclusive one, so a folder is never seen between its creation and its lock.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tunelab.core.store import atomic_dir

LEFTOVER = re.compile(r"\.[^/]+\.[^/.]+\.tmp")
"""The name `atomic_dir` gives a bundle's temporary folder: `.` + bundle name + `.` + a random
part + `.tmp`."""


def _open(folder: Path) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)


@contextmanager
def _locked(folder: Path, how: int) -> Iterator[int]:
    fd = _open(folder)
    try:
        fcntl.flock(fd, how)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def remove_leftovers(bundles: Path, name: str | None = None) -> list[str]:
    """Remove the temporary folders that killed exports left in `bundles` (see the module
    docstring); return their names. One that a running export holds is left alone. `name`:
    only those of the bundle of that name (a folder of the user's, given with `--out`, where
    anything else is theirs)."""
    if not bundles.is_dir():
        return []
    pattern = LEFTOVER if name is None else re.compile(rf"\.{re.escape(name)}\.[^/.]+\.tmp")
    removed = []
    with _locked(bundles, fcntl.LOCK_EX):
        for path in sorted(bundles.iterdir()):
            if not pattern.fullmatch(path.name) or path.is_symlink() or not path.is_dir():
                continue
            fd = _open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # an export in another process is writing it
                os.close(fd)
                continue
            try:
                shutil.rmtree(path)
            finally:
                os.close(fd)
            removed.append(path.name)
    return removed


@contextmanager
def writing(bundle: Path) -> Iterator[Path]:
    """`atomic_dir(bundle)`, its temporary folder locked from its creation until after its
    rename, so that no other export takes it for a leftover. The folder is created and locked
    under a shared lock on the folder that holds the bundle."""
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        held: list[int] = []
        stack.callback(lambda: [os.close(fd) for fd in held])  # last: after the rename
        with _locked(bundle.parent, fcntl.LOCK_SH):
            tmp = stack.enter_context(atomic_dir(bundle))
            held.append(_open(tmp))
            fcntl.flock(held[0], fcntl.LOCK_EX)
        yield tmp
