"""The kinds of failure a user meets, told apart by class, never by guessing.

- `TunelabError` and its subclasses: the user's input cannot be used (a spec field, a data
  file, a run id, a refusal such as the one-change rule). The CLI prints its one line and exits
  2. It is a `ValueError`, so library callers that catch bad input as `ValueError` still do.
  A write that fails because the disk is full or a file-size limit was hit is one too
  (`disk_full` turns the `OSError` into a `DiskFullError`): the user frees space and reruns.
  So is running out of memory (`out_of_memory`: torch's `OutOfMemoryError` on a GPU, Python's
  `MemoryError`): the user takes a smaller microbatch, checkpointing or shorter examples.
- Anything else that escapes a stage is a bug or an environment failure: the CLI exits 1 with a
  one-line summary, and prints the traceback with `--debug` (or `TUNELAB_DEBUG=1`).

A stop on request (Ctrl-C, SIGTERM) is neither: exit 130. Training stops after a step with a
checkpoint (`TrainingInterrupted`); anywhere else the signal raises `KeyboardInterrupt` at once
(`tunelab.core.stopping`). Once the store is brought up to date, the stage raises `Interrupted`,
which says what the store now holds and how to go on.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path


class TunelabError(ValueError):
    """Input the user can fix; the message names the file, line or field and what to do."""


class StoreError(TunelabError):
    """The store lacks what a command needs; the message says which command makes it."""


class TrainingInterrupted(Exception):
    """Training stopped on request (Ctrl-C, SIGTERM) after a step, with a checkpoint saved."""

    def __init__(self, step: int, checkpoint: Path | None, cause: str | None = None):
        super().__init__(
            (f"{cause}; " if cause else "")
            + f"stopped after step {step}"
            + (f"; checkpoint {checkpoint}" if checkpoint else "")
        )
        self.step, self.checkpoint = step, checkpoint


class Interrupted(KeyboardInterrupt):
    """A stop on request after the store was brought up to date.

    `cause` is what stopped the command (`Ctrl-C`, `SIGTERM; stopped after step 5`), `outcome`
    what the store now holds and how to go on, true for this command; `run` is the run's id
    when one was open, and `resumable` whether `tunelab resume RUN` can continue it. It is a
    `KeyboardInterrupt`, so callers that stop on Ctrl-C still do."""

    def __init__(self, cause: str, outcome: str, run: str | None = None, resumable: bool = False):
        super().__init__(f"{cause}: {outcome}")
        self.cause, self.outcome, self.run, self.resumable = cause, outcome, run, resumable


def stop_cause(err: BaseException) -> str:
    """What stopped a command, in words: the signal's name (`tunelab.core.stopping` raises
    `KeyboardInterrupt("SIGTERM")`), or the training stop's own line."""
    if isinstance(err, Interrupted):
        return err.cause
    return str(err) or "Ctrl-C"


DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
"""No space left, a file over the size limit (`ulimit -f`, RLIMIT_FSIZE), a quota exceeded."""


class DiskFullError(TunelabError):
    """A write failed for want of space: the disk is full or a file-size limit was hit."""


def disk_full(err: BaseException) -> DiskFullError | None:
    """`err` as a DiskFullError when it (or an error it came from) is an `OSError` for want of
    space, or a library's error that quotes one (safetensors: "... (os error 27)"); None for
    any other error."""
    for seen in _chain(err):
        code = _space_errno(seen)
        if code is not None:
            written = _written(seen)
            where = f" while writing {written}" if written else ""
            return DiskFullError(
                f"the disk is full or a file-size limit was hit{where} "
                f"({errno.errorcode[code]}: {os.strerror(code)}). Nothing was "
                "corrupted: every store file is written to a temporary file and renamed into "
                "place, so each record holds its last whole version (an open run is recorded "
                "as failed, or shown as lost if even that could not be written). Free space or "
                "raise the limit, then run the command again; `tunelab fsck` lists what the "
                "stopped command left half-made (an empty numbered record, a run folder "
                "without its record), each with what to do."
            )
    return None


def _written(err: BaseException) -> str | None:
    """The file an OSError was writing: a copy's or a rename's destination (`filename2`: the
    source, `filename`, was only read; a full disk during an export named the run's own
    weights), else its one file."""
    return getattr(err, "filename2", None) or getattr(err, "filename", None)


class NoPermission(TunelabError):
    """A file of the lab this user may not read or write (a read-only lab, another's files)."""


def no_permission(err: BaseException) -> NoPermission | None:
    """`err` as a NoPermission when it (or an error it came from) is an `OSError` for want of
    permission or a read-only file system; None for any other error."""
    for seen in _chain(err):
        code = getattr(seen, "errno", None) if isinstance(seen, OSError) else None
        if code in (errno.EACCES, errno.EPERM, errno.EROFS):
            where = _written(seen) or "a file of the lab"
            return NoPermission(
                f"{where}: {os.strerror(code)}. This user may not read or write it: run as the "
                "lab's owner, make the lab writable, or copy the lab and work on the copy. Every "
                "store file is written whole or not at all, so nothing was left half-written."
            )
    return None


class NotAFolder(TunelabError):
    """A path the user gave runs through a file where a folder must be (`--out x.py/page`)."""


def not_a_folder(err: BaseException) -> NotAFolder | None:
    """`err` as a NotAFolder when it (or an error it came from) is an `OSError` of a folder
    made or entered where a file is (`mkdir` on a file's path, a file as a path's folder);
    None for any other error."""
    for seen in _chain(err):
        code = getattr(seen, "errno", None) if isinstance(seen, OSError) else None
        where = getattr(seen, "filename", None)
        blocked = code == errno.EEXIST and where and os.path.isfile(where)
        if code == errno.ENOTDIR or blocked:
            return NotAFolder(
                f"{where or 'a path given'}: {os.strerror(code)}: a file is where that path "
                "needs a folder. Give a path whose folders are folders (or move the file); "
                "nothing was written there."
            )
    return None


class OutOfMemory(TunelabError):
    """The device (or the host) ran out of memory for what the spec asks."""


def out_of_memory(err: BaseException) -> OutOfMemory | None:
    """`err` as an OutOfMemory when it (or an error it came from) is torch's
    `OutOfMemoryError` or Python's `MemoryError`; None for any other error. torch is looked
    up, never imported: a command that did not load it cannot have run out in it."""
    torch = sys.modules.get("torch")
    kinds = (MemoryError,) + ((torch.OutOfMemoryError,) if torch is not None else ())
    for seen in _chain(err):
        if isinstance(seen, kinds):
            said = str(seen).split(" See documentation")[0].strip().rstrip(".") or "no detail"
            return OutOfMemory(
                f"out of memory ({said}). If a run was open, it is recorded as failed. Ask for "
                "less: `tunelab size` finds the largest microbatch that fits; lower "
                "training.microbatch (training.global_batch is kept by accumulating "
                "microbatches), set training.activation_checkpointing: true, shorten "
                "model.max_length, or lower evaluation.batch_size if it ran out while "
                "evaluating."
            )
    return None


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err`, then the error it came from (`raise ... from`, or raised while handling), and so
    on: a library's wrapper does not hide a full disk or an out-of-memory error."""
    seen: BaseException | None = err
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _space_errno(err: BaseException) -> int | None:
    if isinstance(err, OSError):
        return err.errno if err.errno in DISK_FULL else None
    found = re.search(r"\(os error (\d+)\)", str(err))  # how Rust libraries quote errno
    return int(found[1]) if found and int(found[1]) in DISK_FULL else None


class SpecError(TunelabError):
    """A spec that cannot be used; the message names the file, line and field."""
