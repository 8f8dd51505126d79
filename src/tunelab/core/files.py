"""Durable files: every write whole or absent, whatever moment a kill lands.

Files go through `atomic_write_text` (a temporary file, fsync, rename, fsync of the folder),
folders through `atomic_dir`, and logs through `append_line` (one fsynced append under an
exclusive lock, a line cut short by a full disk taken back). A name left behind by a kill
starts with `.` and ends in `.tmp`; no reader looks at it. The store (`core.store`) writes
through these; it alone knows the names.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from tunelab.core.chain import last_line
from tunelab.core.errors import TunelabError
from tunelab.core.stopping import held


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()
JSONL_BATCH = 4096
"""Lines `write_jsonl` encodes and writes at a time."""


def atomic_write_text(path: Path, text: str) -> None:
    """`atomic_write_bytes` of `text` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file, fsync, rename, fsync the folder: a kill leaves the old or
    the new file, never part of one."""
    with atomic_file(path) as fh:
        fh.write(data)


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through, in as many writes as needed: it becomes `path`
    (fsynced, renamed, the folder fsynced) when the block ends, and is removed if it fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it 0600; a record is an ordinary file
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:  # name the file in the message
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    _fsync(path.parent)


def staged_json(path: Path, obj: Any) -> Path:
    """`obj` as JSON in a temporary file beside `path`, fsynced, for the caller to put in
    place (`commit`) once what vouches for it is durable (`Store.save`: the log's line); the
    caller removes it if that never comes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            fh.write((json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    return Path(tmp)


def commit(staged: Path, path: Path) -> None:
    """A staged file renamed into place, the rename made durable: it needs no new space."""
    os.replace(staged, path)
    _fsync(path.parent)


def _fsync(path: Path) -> None:
    """Make a file's content, or a folder's entries (a rename, a new file), durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_dir(parent: Path, prefix: str) -> Path:
    """A new hidden folder in `parent` (`PREFIX*.tmp`) with the mode the umask gives a folder:
    mkdtemp makes it 0700, which kept a group-shared lab's data versions from the group."""
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_UMASK)
    return tmp


@contextmanager
def atomic_dir(path: Path, replace: bool = False) -> Iterator[Path]:
    """A folder written whole or not at all.

    Yields a hidden temporary folder beside `path` to write into. When the block ends, its
    files are fsynced and it is renamed to `path`, which must be absent or empty; with
    `replace`, an existing `path` is swapped out and removed. An error or Ctrl-C removes the
    temporary folder and leaves `path` as it was; so does a kill, short of the hidden folder.
    Its files take the mode the umask gives a new file, whatever wrote them."""
    tmp = temporary_dir(path.parent, f".{path.name}.")
    try:
        yield tmp
        for file in (f for f in tmp.rglob("*") if f.is_file()):
            # as the umask says: safetensors writes its files owner-only (0600), so a bundle's
            # weights were the one file a server running as another user could not read
            os.chmod(file, 0o666 & ~_UMASK)
            _fsync(file)
        _swap_in(tmp, path, replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, path: Path, replace: bool) -> None:
    """Rename `tmp` to `path`; with `replace`, the folder already there is moved aside first
    (and put back if the rename fails), then removed."""
    old = None
    if replace and path.exists():
        old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
        os.replace(path, old)  # onto an empty folder
    try:
        os.rename(tmp, path)
    except BaseException as err:
        if old is not None:
            os.replace(old, path)
        if isinstance(err, OSError) and err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise TunelabError(  # another command wrote `path` meanwhile (two exports at once)
                f"{path} was written by another command while this one wrote it; nothing of "
                "this one's was kept: look at that folder, or give another destination"
            ) from None
        raise
    _fsync(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def append_line(
    path: Path,
    line: str | Callable[[bytes | None], str],
    then: Callable[[], None] | None = None,
) -> None:
    """Append one line to a log, whole: a single write, fsynced with its folder, under an
    exclusive lock on the file, so that concurrent writers append one after another. `line`
    may be a function of the log's last line (`core.chain.linked`: the hash chain); `then`,
    what to do once the line is durable, still under the lock (what the line announces, in
    the order the log gives).

    Ctrl-C or SIGTERM waits until the line is written. A write cut short (a full disk, a
    file-size limit) is taken back, so the next line does not land on a half one; and a line
    left without its newline (by a kill of an older version) gets one before the next."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with held():
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed
            size = os.fstat(fd).st_size
            text = line(last_line(fd, size)) if callable(line) else line
            data = (text + "\n").encode("utf-8")
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as err:
                os.ftruncate(fd, size)
                raise OSError(err.errno, err.strerror, str(path)) from err
            _fsync(path.parent)
            if then is not None:
                then()
        finally:
            os.close(fd)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """One JSON object a line, written atomically a batch of lines at a time (a split of a
    million rows is never one string in memory)."""
    rows = iter(rows)
    with atomic_file(path) as fh:
        while batch := list(itertools.islice(rows, JSONL_BATCH)):
            fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in batch).encode())


class DamagedFile(TunelabError):
    """A JSON file tunelab wrote that no longer reads: cut short or edited by hand."""

    def __init__(self, path: Path, err: ValueError, line: int | None = None):
        self.path = path
        where = f"{path}:{line}" if line else str(path)
        why = f"{err.msg} at line {err.lineno} column {err.colno}" if hasattr(err, "msg") else err
        self.why = f"not readable JSON ({why})"
        super().__init__(
            f"{where}: {self.why}: a file tunelab wrote was cut short or edited. Restore it "
            "from a backup; `tunelab fsck` lists whatever else changed"
        )


def read_jsonl(path: Path) -> list[dict]:
    """One JSON value a line; a line that does not read is a DamagedFile naming it."""
    return read_jsonl_hashed(path)[0]


def read_jsonl_hashed(path: Path) -> tuple[list[dict], str]:
    """`read_jsonl` and the file's sha256, in one pass over its bytes."""
    digest, out = hashlib.sha256(), []
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            digest.update(line)
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as err:
                    raise DamagedFile(path, err, number) from None
    return out, digest.hexdigest()


def read_json(path: Path) -> Any:
    """A JSON file tunelab wrote; one that does not read is a DamagedFile naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:  # JSONDecodeError, or bytes that are not UTF-8
        raise DamagedFile(path, err) from None


@contextmanager
def locked(path: Path, shared: bool = False) -> Iterator[None]:
    """Hold a lock on `path` (created if missing): exclusive, or `shared` among readers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:  # another's files, or a read-only file system (an archived lab)
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        if not (shared and path.exists()):
            raise
        fd = os.open(path, os.O_RDONLY)  # a reader of a read-only lab (`fsck`) still locks
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
