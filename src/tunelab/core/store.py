"""The lab's store (`.tunelab/`): its names and format (`core.layout`), durable writes
(`core.files`), records saved with their hash in the event log, runs and numbered records.

A record is saved with `Store.save` (or `write_record` for a run): the file is written and the
event that says so, carrying the file's sha256, is appended under the log's lock, so a reader
that holds the lock sees both or neither. `Store.audit` then tells a record edited afterwards,
by name; `require_intact_log` refuses to judge from a lab whose log or records were changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tunelab.core import layout
from tunelab.core.chain import linked, verify
from tunelab.core.digest import sha256_file
from tunelab.core.errors import StoreError
from tunelab.core.files import (  # noqa: F401  (the store's writers, imported from here too)
    append_line,
    atomic_dir,
    atomic_write_json,
    atomic_write_text,
    commit,
    locked,
    read_json,
    read_jsonl,
    read_jsonl_hashed,
    staged_json,
    write_jsonl,
)
from tunelab.core.layout import STORE_DIR, STORE_FORMAT, number_of
from tunelab.core.numbered import NumberedRecords
from tunelab.core.run_names import RUN_ID, check_run_name

SPLITS = ("train", "validation", "test")
KNOWN_SHOWN = 8
"""The runs an unknown run's error names (the newest)."""
RUN_STATES = ("running", "completed", "interrupted", "failed", "invalid")


RUN_KEYS = ("id", "kind", "status", "spec", "data_version")
"""What every run record holds, of any store format."""


class SealedError(StoreError):
    """Something other than `final` tried to read the sealed test split."""


class NewerFormatError(StoreError):
    """The lab was written by a newer tunelab, in a store format this one cannot read."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store(NumberedRecords):
    """The `.tunelab/` folder of one lab. Every path a command writes comes from here.

    Opening a lab written in a newer store format is refused (NewerFormatError, naming both
    formats) before anything is read or written."""

    def __init__(self, lab: Path):
        self.lab = Path(lab).resolve()
        self.root = self.lab / STORE_DIR
        self._vouched: dict[Path, str] = {}  # manifests found as the log wrote them
        self.format = layout.read_format(self.root)
        if self.format["format"] > STORE_FORMAT:
            raise NewerFormatError(
                f"{self.root / layout.FORMAT}: this lab is in store format "
                f"{self.format['format']}, written by a newer tunelab "
                f"({self.format.get('tunelab', 'unknown version')}); this tunelab reads formats "
                f"up to {STORE_FORMAT}. Open it with that tunelab or a newer one; nothing was "
                "written."
            )

    def _claim(self) -> None:
        """Record the store format before the first event of this tunelab: a format-1 lab
        becomes format 2 from its next line on (`since_line`), its older lines read as they
        are."""
        if self.format["format"] == STORE_FORMAT:
            return
        from importlib.metadata import PackageNotFoundError, version

        from tunelab.core.audit import written_in_format_2

        with locked(self.root / layout.LOCK):  # one claim, whoever comes first
            self.format = layout.read_format(self.root)
            if self.format["format"] == STORE_FORMAT:
                return
            try:
                tunelab = version("tunelab")
            except PackageNotFoundError:
                tunelab = None
            lines = verify(self.log_path)["lines"]
            if lines and written_in_format_2(self):
                raise StoreError(  # format 2 wrote that log: this is no format-1 lab
                    f"{self.root / layout.FORMAT} is missing, but the event log was written in "
                    f"store format {STORE_FORMAT} (its events hash their records): restore the "
                    f'file from a backup, or write {{"format": {STORE_FORMAT}}} in it. Nothing '
                    "was written."
                )
            self.format = {"format": STORE_FORMAT, "tunelab": tunelab, "created": now()}
            if lines:
                self.format |= {"upgraded_from": 1, "since_line": lines + 1}
            atomic_write_json(self.root / layout.FORMAT, self.format)

    def path(self, *parts: str) -> Path:
        """A path inside the store, from `core.layout`'s names."""
        return self.root.joinpath(*parts)

    # --- events and records --------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.root / layout.EVENTS

    def log_event(self, event: str, then: Callable[[], None] | None = None, **fields: Any) -> None:
        """Append one event to `events.jsonl`, whole, durable and linked to the line before it
        (`core.chain`; see `append_line`); then, still under the log's lock, do `then`."""
        self._claim()
        append_line(self.log_path, linked({"time": now(), "event": event, **fields}), then)

    def save(self, path: Path, record: dict, event: str, **fields: Any) -> None:
        """Write `record` to `path` (checked against its declared shape, `core.records`) and
        log `event` with the file's sha256, both under the log's lock: a record edited
        afterwards no longer matches its last event (`audit`), and is not written again over
        the edit (`require_as_logged`), which the new event would vouch for. A save that
        fails gives back the number it was to fill (`reserve`'s empty file): a refused or
        full-disk `compare` had left an empty `c002.json` for fsck to name."""
        try:
            self._save(path, record, event, **fields)
        except BaseException:
            if path.is_file() and path.stat().st_size == 0:  # the reservation, still empty
                path.unlink(missing_ok=True)
            raise

    def _save(self, path: Path, record: dict, event: str, **fields: Any) -> None:
        from tunelab.core.audit import require_as_logged
        from tunelab.core.records import check_record

        record["store_format"] = STORE_FORMAT  # the shape it was written and checked in
        check_record(path.relative_to(self.root), record)
        self._claim()
        shown = str(path.relative_to(self.lab))
        staged: list[Path] = []

        # the record is written beside its path first and renamed into place only once its
        # line is durable: a full disk that stopped the line had left a new record no line
        # vouched for, which every later command took for an edit of the lab's past
        def line(previous: bytes | None) -> str:
            require_as_logged(self, path)  # under the log's lock: no edit slips in between
            staged.append(staged_json(path, record))
            entry = {"time": now(), "event": event, **fields, "record": shown}
            return linked(entry | {"record_sha256": sha256_file(staged[0])})(previous)

        try:
            append_line(self.log_path, line, lambda: commit(staged[0], path))
        finally:
            for tmp in staged:
                tmp.unlink(missing_ok=True)

    def load(self, path: Path) -> dict:
        """A record read back and checked against its declared shape (`core.records`); one
        written before the store had a format (no `store_format`) is read as it is."""
        from tunelab.core.records import check_record

        record = read_json(path)
        if not isinstance(record, dict):
            raise StoreError(
                f"{path}: holds a JSON {type(record).__name__}, not the record tunelab wrote "
                "there (an object): it was edited by hand. Restore it from a backup; `tunelab "
                "fsck` lists whatever else changed."
            )
        if record.get("store_format", 1) >= 2:
            check_record(path.relative_to(self.root), record)
        elif path.name == layout.RECORD and (lost := [k for k in RUN_KEYS if k not in record]):
            raise StoreError(  # a run record of any format has these: `{}` is an edit
                f"{path.relative_to(self.lab)}: not a run record (no {', '.join(lost)}): it was "
                "edited by hand. Restore it from a backup; `tunelab fsck` lists whatever else "
                "changed."
            )
        return record

    def audit(self) -> dict:
        """The log's chain and each record no longer as its event wrote it (`core.audit`)."""
        from tunelab.core.audit import audit

        return audit(self)

    def require_intact_log(self, command: str) -> dict:
        """The chain's state; a StoreError naming what was changed (`core.audit`), for the
        commands that judge from the lab (`compare`, `final`, `export`)."""
        from tunelab.core.audit import require_intact_log

        return require_intact_log(self, command)

    def numbered_events(self) -> Iterator[tuple[int, dict]]:
        """Each readable event with its line number in the log."""
        if self.log_path.exists():
            raw = [line for line in self.log_path.read_bytes().split(b"\n") if line.strip()]
            for number, line in enumerate(raw, 1):  # numbered as `core.chain.verify` does
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):  # a line of another shape is no event (fsck names it)
                    yield number, event

    def events(self, strict: bool = False) -> list[dict]:
        """The event log. A damaged line (a write cut short by a kill) is skipped, unless
        `strict`: then it is an error that names the line, for readers such as the test-set
        access log that must not miss an entry."""
        path = self.log_path
        if not path.exists():
            return []
        out = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise ValueError(f"a JSON {type(event).__name__}, not an event")
            except ValueError as err:
                if strict:
                    raise StoreError(
                        f"{path}:{number}: the event log is damaged ({getattr(err, 'msg', err)});"
                        " the record of who opened the test split cannot be trusted with a line "
                        "missing. Restore the line (or the file from a backup) before going on."
                    ) from None
                continue
            out.append(event)
        return out

    # --- data versions -------------------------------------------------------------------

    def data_dir(self, version: str) -> Path:
        return self.root / layout.DATA / version

    def set_current_data(self, version: str) -> None:
        atomic_write_text(self.root / layout.DATA / layout.CURRENT, version + "\n")

    def current_data(self) -> str:
        """The store's CURRENT data version: read by a command once (`Lab.data_version`)."""
        path = self.root / layout.DATA / layout.CURRENT
        if not path.exists():
            raise StoreError(f"{self.lab}: no data version yet. Run `tunelab data` first.")
        named = path.read_text().strip()
        if not layout.VERSION_ID.fullmatch(named):  # `../runs/r003`: a path, read as a folder
            raise StoreError(
                f"{path}: holds {named[:40]!r}, not a data version id: it was edited. Run "
                "`tunelab data` again (it writes the version it builds), or write the version "
                "of the log's last `data` event into it."
            )
        return named

    def data_manifests(self) -> list[Path]:
        """Every data version's manifest file, in order of its version id (the folders a
        manifest is missing from are no versions: a data step killed before it was written)."""
        return sorted(self.path(layout.DATA).glob(f"*/{layout.MANIFEST}"))

    def data_manifest(self, version: str) -> dict:
        """A data version's manifest, as its `data` event wrote it: the hashes of its splits
        are the log's, so a manifest edited with its splits is refused (`require_as_logged`;
        checked against the log once per file content)."""
        from tunelab.core.audit import require_as_logged

        path = self.data_dir(version) / layout.MANIFEST
        if not path.exists():
            raise StoreError(
                f"{path}: data version {version} is missing its manifest (its folder deleted or "
                "moved?). Restore it from a backup, or run `tunelab data` with the sources and "
                "spec that built it (they build the same version); `tunelab fsck` names what "
                "else is missing."
            )
        digest = sha256_file(path)
        if self._vouched.get(path) != digest:
            require_as_logged(self, path)
            self._vouched[path] = digest
        return read_json(path)

    def read_split(self, version: str, split: str) -> list[dict]:
        """Examples of a train or validation split. The test split is sealed (see `final`)."""
        if split == "test":
            raise SealedError(
                "the test split is sealed: only `tunelab final RUN` reads it, once, on purpose."
            )
        if split not in SPLITS:
            raise StoreError(f"unknown split {split!r}; known: {list(SPLITS)}")
        folder = self.data_dir(version)
        path = folder / f"{split}.jsonl"
        expected = (self.data_manifest(version).get("files") or {}).get(path.name)
        if not expected:  # `tunelab data` hashes every split: a manifest without is not its
            raise StoreError(
                f"{folder / layout.MANIFEST}: holds no sha256 of {path.name}, so the split "
                f"cannot be checked against data version {version}. Restore the manifest from "
                "a backup, or run `tunelab data` again with the sources and spec that built it: "
                f"it writes {folder} again, whole."
            )
        rows, digest = read_jsonl_hashed(path)
        if digest != expected:  # every run on it would claim data it never saw
            raise StoreError(
                f"{path}: changed since data version {version} was written (sha256 "
                f"{expected[:12]} expected), so it is not that version any more. Restore it from "
                "a backup, or run `tunelab data` again with the sources and spec that built it: "
                f"it writes {folder} again, whole."
            )
        return rows

    # --- runs ----------------------------------------------------------------------------

    @property
    def runs_dir(self) -> Path:
        return self.root / layout.RUNS

    def new_run(self, name: str) -> tuple[str, Path]:
        """Reserve the next run id (`r003-lora`) and its folder (`reserve`). The name is
        checked first (`check_run_name`)."""
        check_run_name(name)
        return self.reserve(layout.RUNS, "r", f"-{name}", is_dir=True)

    def run_dir(self, run_id: str) -> Path:
        """The folder of an existing run; an id that is not a run's (`..`, a path) is none."""
        path = self.runs_dir / run_id
        valid = RUN_ID.fullmatch(run_id) and ".." not in run_id
        if not valid or not (path / layout.RECORD).exists():
            ids = [r["id"] for r in self.runs()]
            known = ", ".join(ids[-KNOWN_SHOWN:]) or "none yet"  # the newest: 125 ids was a wall
            if len(ids) > KNOWN_SHOWN:
                known = f"{known} and {len(ids) - KNOWN_SHOWN} older (`tunelab runs` lists all)"
            raise StoreError(f"no run {run_id!r} in {self.lab}; known runs: {known}")
        return path

    def resolve_run(self, given: str) -> str:
        """The id of the run a user names: the id itself (`r002-full`) or its number alone
        (`r002`), which no two runs share. Any other name is refused as `run_dir` refuses it."""
        if self.runs_dir.exists() and not (self.runs_dir / given / layout.RECORD).exists():
            named = [
                p.name
                for p in self.runs_dir.iterdir()
                if p.name.split("-", 1)[0] == given and (p / layout.RECORD).exists()
            ]
            if len(named) == 1:
                return named[0]
            if named:  # runs copied in from a clone of the lab: no number is theirs alone
                raise StoreError(
                    f"{given} names {len(named)} runs in {self.lab} ({', '.join(sorted(named))}): "
                    "give the whole id (two runs share a number when run folders were copied "
                    "in from a clone of the lab; `tunelab fsck` names what came that way)"
                )
        self.run_dir(given)  # refuses a name that is no run's, listing the runs there are
        return given

    def write_record(
        self, run_id: str, record: dict, event: str = "run_record", **fields: Any
    ) -> None:
        """Save the run's record and log `event` for it (`save`)."""
        record["updated"] = now()
        self.save(self.runs_dir / run_id / layout.RECORD, record, event, run=run_id, **fields)

    def read_record(self, run_id: str) -> dict:
        return self.load(self.run_dir(run_id) / layout.RECORD)

    def runs(self) -> list[dict]:
        """Every run record, oldest first: a scan of the run folders."""
        if not self.runs_dir.exists():
            return []
        out = []
        folders = (p for p in self.runs_dir.iterdir() if p.is_dir() and p.name[0] != ".")
        for path in sorted(folders, key=lambda p: (number_of(p), p.name)):
            record = path / layout.RECORD
            if record.exists():
                out.append(self.load(record))
        return out
