"""The lab's store (`.tunelab/`): paths, atomic writes, run records, the append-only event log.

Layout::

    .tunelab/
      events.jsonl                  append-only log of what every command did
      data/CURRENT                  id of the newest data version
      data/<version>/               manifest.json, report.json, quarantine.jsonl,
                                    train.jsonl, validation.jsonl, test.jsonl (sealed)
      runs/<id>/record.json         one folder per run, never deleted
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError

STORE_DIR = ".tunelab"
SPLITS = ("train", "validation", "test")
RUN_STATES = ("running", "completed", "interrupted", "failed", "invalid")


class StoreError(TunelabError):
    """The store lacks what a command needs; the message says which command makes it."""


class SealedError(StoreError):
    """Something other than `final` tried to read the sealed test split."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file, fsync, rename: a kill leaves the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it 0600; a record is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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

    def log_event(self, event: str, **fields: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": now(), "event": event, **fields}, ensure_ascii=False)
        with (self.root / "events.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

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
        """Reserve the next run id (`r003-lora`) and its folder; ids are never reused."""
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
        """The newest comparison that judged `run_id`, and the run's row in it."""
        for record in reversed(self.comparisons()):
            for row in record.get("runs", []):
                if row["id"] == run_id and "verdict" in row:
                    return record, row
        return None

    def run_dir(self, run_id: str) -> Path:
        path = self.runs_dir / run_id
        if not (path / "record.json").exists():
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
