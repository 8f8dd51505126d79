"""The lab's store (`.tunelab/`): paths, atomic writes, run records, the append-only event log.

Layout::

    .tunelab/
      events.jsonl                  append-only log of what every command did
      data/CURRENT                  id of the newest data version
      data/<version>/               manifest.json, report.json, quarantine.jsonl,
                                    train.jsonl, validation.jsonl, test.jsonl (sealed)
      runs/<id>/record.json         one folder per run, never deleted
      groups/gNNN.json              replicate groups (`--seeds N`, `tunelab noise`)
      noise/nNNN.json               measured noise floors (`tunelab noise`)

Every write is whole or absent, whatever moment a kill lands: files go through
`atomic_write_text` (a temporary file, fsync, rename, fsync of the folder), folders through
`atomic_dir`, and the event log through `append_line` (one fsynced append, a line cut short by a
full disk taken back). A name left behind by a kill starts with `.` and ends in `.tmp`; no
reader looks at it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tunelab.core.chain import last_line, linked, verify
from tunelab.core.errors import TunelabError
from tunelab.core.stopping import held

STORE_DIR = ".tunelab"
SPLITS = ("train", "validation", "test")
RUN_STATES = ("running", "completed", "interrupted", "failed", "invalid")


class StoreError(TunelabError):
    """The store lacks what a command needs; the message says which command makes it."""


class SealedError(StoreError):
    """Something other than `final` tried to read the sealed test split."""


class RunNameError(StoreError):
    """A run name that cannot be part of a folder name safely."""


RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
"""A run name: 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` or `-`, and
(checked beside it) without `..`. Run ids (`r003-lora`) follow the same rule."""


def check_run_name(name: str) -> str:
    """`name` if it can name a run's folder; otherwise RunNameError saying what is allowed."""
    if not RUN_NAME.fullmatch(name) or ".." in name:
        raise RunNameError(
            f"run name {name!r} is not allowed: a run name becomes part of its folder's name "
            "(.tunelab/runs/r003-NAME), so it is 1 to 64 letters, digits, '.', '_' or '-', "
            "does not start with '.' or '-' and has no '..'; e.g. --name lora-r16."
        )
    return name


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file, fsync, rename, fsync the folder: a kill leaves the old or
    the new file, never part of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it 0600; a record is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:  # name the file in the message
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    _fsync(path.parent)


def _fsync(path: Path) -> None:
    """Make a file's content, or a folder's entries (a rename, a new file), durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_dir(path: Path, replace: bool = False) -> Iterator[Path]:
    """A folder written whole or not at all.

    Yields a hidden temporary folder beside `path` to write into. When the block ends, its
    files are fsynced and it is renamed to `path`, which must be absent or empty; with
    `replace`, an existing `path` is swapped out and removed. An error or Ctrl-C removes the
    temporary folder and leaves `path` as it was; so does a kill, short of the hidden folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes it 0700
        yield tmp
        for file in (f for f in tmp.rglob("*") if f.is_file()):
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
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    _fsync(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def append_line(path: Path, line: str | Callable[[bytes | None], str]) -> None:
    """Append one line to a log, whole: a single write, fsynced with its folder, under an
    exclusive lock on the file, so that concurrent writers append one after another. `line`
    may be a function of the log's last line (`core.chain.linked`: the hash chain).

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
        finally:
            os.close(fd)
        _fsync(path.parent)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class Store:
    """The `.tunelab/` folder of one lab. Every path a command writes comes from here."""

    def __init__(self, lab: Path):
        self.lab = Path(lab).resolve()
        self.root = self.lab / STORE_DIR

    # --- events --------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.root / "events.jsonl"

    def log_event(self, event: str, **fields: Any) -> None:
        """Append one event to `events.jsonl`, whole, durable and linked to the line before it
        (`core.chain`; see `append_line`)."""
        append_line(self.log_path, linked({"time": now(), "event": event, **fields}))

    def require_intact_log(self, command: str) -> dict:
        """The chain's state; a StoreError naming every broken line when the log was changed,
        for the commands that judge from the lab (`compare`, `final`, `export`)."""
        state = verify(self.log_path)
        if state["problems"]:
            lines = "; ".join(f"line {p['line']} {p['problem']}" for p in state["problems"][:5])
            raise StoreError(
                f"{self.log_path}: the event log was changed after it was written ({lines}). "
                f"`tunelab {command}` does not judge from a lab whose past was edited. "
                "`tunelab fsck` lists every problem; restore the log from a backup, or mark the "
                'break with `tunelab fsck --repair --reason "why"` (recorded in the log).'
            )
        return state

    def events(self, strict: bool = False) -> list[dict]:
        """The event log. A damaged line (a write cut short by a kill) is skipped, unless
        `strict`: then it is an error that names the line, for readers such as the test-set
        access log that must not miss an entry."""
        path = self.root / "events.jsonl"
        if not path.exists():
            return []
        out = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                if strict:
                    raise StoreError(
                        f"{path}:{number}: the event log is damaged ({err.msg}); the record of "
                        "who opened the test split cannot be trusted with a line missing. "
                        "Restore the line (or the file from a backup) before going on."
                    ) from None
        return out

    # --- data versions -------------------------------------------------------------------

    def data_dir(self, version: str) -> Path:
        return self.root / "data" / version

    def set_current_data(self, version: str) -> None:
        atomic_write_text(self.root / "data" / "CURRENT", version + "\n")

    def current_data(self) -> str:
        path = self.root / "data" / "CURRENT"
        if not path.exists():
            raise StoreError(f"{self.lab}: no data version yet. Run `tunelab data` first.")
        return path.read_text().strip()

    def data_manifest(self, version: str) -> dict:
        path = self.data_dir(version) / "manifest.json"
        if not path.exists():
            raise StoreError(f"{path}: data version {version} is missing its manifest.")
        return read_json(path)

    def read_split(self, version: str, split: str) -> list[dict]:
        """Examples of a train or validation split. The test split is sealed (see `final`)."""
        if split == "test":
            raise SealedError(
                "the test split is sealed: only `tunelab final RUN` reads it, once, on purpose."
            )
        if split not in SPLITS:
            raise StoreError(f"unknown split {split!r}; known: {list(SPLITS)}")
        return read_jsonl(self.data_dir(version) / f"{split}.jsonl")

    # --- runs ----------------------------------------------------------------------------

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def new_run(self, name: str) -> tuple[str, Path]:
        """Reserve the next run id (`r003-lora`) and its folder; ids are never reused. The
        name is checked first (`check_run_name`)."""
        check_run_name(name)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        n = len([p for p in self.runs_dir.iterdir() if p.is_dir()]) + 1
        while True:
            run_id = f"r{n:03d}-{name}"
            try:
                (self.runs_dir / run_id).mkdir()
                return run_id, self.runs_dir / run_id
            except FileExistsError:
                n += 1

    # --- comparisons -----------------------------------------------------------------------

    @property
    def comparisons_dir(self) -> Path:
        return self.root / "comparisons"

    def reserve(self, folder: str, prefix: str) -> tuple[str, Path]:
        """Reserve the next record id in `folder` (`c004`, `p002`) by creating its file
        exclusively: ids are never reused, even by two processes at once."""
        where = self.root / folder
        where.mkdir(parents=True, exist_ok=True)
        n = len(list(where.glob(f"{prefix}*.json"))) + 1
        while True:
            path = where / f"{prefix}{n:03d}.json"
            try:
                path.open("x").close()
                return path.stem, path
            except FileExistsError:
                n += 1

    def new_comparison(self) -> tuple[str, Path]:
        """Reserve the next comparison id (`c004`) and its record's path."""
        return self.reserve("comparisons", "c")

    def comparisons(self) -> list[dict]:
        """Every comparison record, oldest first (a reserved id not yet written is skipped)."""
        if not self.comparisons_dir.exists():
            return []
        paths = sorted(self.comparisons_dir.glob("c*.json"))
        return [read_json(p) for p in paths if p.stat().st_size > 0]

    def judgement(self, run_id: str) -> tuple[dict, dict] | None:
        """The newest comparison that judged `run_id`, and the run's row in it: a seed of an
        arm is judged with its arm, in the row of the arm's first run (`arm`)."""
        for record in reversed(self.comparisons()):
            rows = {row["id"]: row for row in record.get("runs", [])}
            row = rows.get(run_id)
            if row is not None and "verdict" not in row:
                row = rows.get(row.get("arm"))
            if row is not None and "verdict" in row:
                return record, row
        return None

    # --- replicate groups and noise records ------------------------------------------------

    def records_in(self, folder: str, prefix: str) -> list[dict]:
        """Every record `folder/PREFIXnnn.json`, oldest first (a reserved id not yet written is
        skipped)."""
        where = self.root / folder
        if not where.exists():
            return []
        paths = sorted(where.glob(f"{prefix}*.json"), key=lambda p: int(p.stem[len(prefix) :]))
        return [read_json(p) for p in paths if p.stat().st_size > 0]

    def groups(self) -> list[dict]:
        """Every replicate group (`groups/gNNN.json`: a `--seeds N` run or a noise floor)."""
        return self.records_in("groups", "g")

    def noise_records(self) -> list[dict]:
        """Every measured noise floor (`noise/nNNN.json`, `tunelab noise`)."""
        return self.records_in("noise", "n")

    def run_dir(self, run_id: str) -> Path:
        """The folder of an existing run; an id that is not a run's (`..`, a path) is none."""
        path = self.runs_dir / run_id
        valid = RUN_NAME.fullmatch(run_id) and ".." not in run_id
        if not valid or not (path / "record.json").exists():
            known = ", ".join(r["id"] for r in self.runs()) or "none yet"
            raise StoreError(f"no run {run_id!r} in {self.lab}; known runs: {known}")
        return path

    def write_record(self, run_id: str, record: dict) -> None:
        record["updated"] = now()
        atomic_write_json(self.runs_dir / run_id / "record.json", record)

    def read_record(self, run_id: str) -> dict:
        return read_json(self.run_dir(run_id) / "record.json")

    def runs(self) -> list[dict]:
        """Every run record, oldest first: a scan of the run folders."""
        if not self.runs_dir.exists():
            return []
        out = []
        for path in sorted(self.runs_dir.iterdir()):
            record = path / "record.json"
            if record.exists():
                out.append(read_json(record))
        return out
