"""The store's numbered records (`c004.json`, `3-r004-lora.json`, run folders `r005-lora`):
reserved or written under their folder's lock, one past the highest number taken on disk or
named by the log, so an id is never used twice; and read back in the order of their numbers.
`Store` has these as its own (`core.store`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunelab.core import layout
from tunelab.core.files import locked
from tunelab.core.layout import STORE_DIR, number_of


class NumberedRecords:
    """What `Store` does with numbered records; it gives `root`, `save`, `load` and
    `numbered_events`."""

    def reserve(
        self, folder: str, prefix: str = "", suffix: str = "", width: int = 3, is_dir=False
    ) -> tuple[str, Path]:
        """Reserve the next numbered record of `folder` (`c004.json`, `3-r004-lora.json`, or
        a folder `r005-lora` with `is_dir`): under the folder's lock, one past the highest
        number taken, created exclusively. Ids are never reused, even by commands that
        reserve at the same moment."""
        where = self.root / folder
        with locked(where / layout.LOCK):
            n = max(self._taken(folder), default=0) + 1
            name = f"{prefix}{n:0{width}d}{suffix}"
            path = where / (name if is_dir else f"{name}.json")
            if is_dir:
                path.mkdir()
            else:
                path.open("x").close()
        return name, path

    def save_new(
        self, folder: str, build, event: str, suffix: str = "", width: int = 3, **fields: Any
    ) -> dict:
        """Write a new numbered record in one go: under the folder's lock, the next number's
        path is handed to `build(path) -> record`, and the record is saved there (`save`)
        before the lock is let go. No empty reservation is ever left, even by a kill."""
        where = self.root / folder
        with locked(where / layout.LOCK):
            path = where / f"{max(self._taken(folder), default=0) + 1:0{width}d}{suffix}.json"
            record = build(path)
            self.save(path, record, event, **fields)
        return record

    def _taken(self, folder: str) -> list[int]:
        """The numbers taken in `folder`: those on disk, and those the log names, so a record
        deleted since keeps its number (a deleted `r003-lora` had made the next run `r003`,
        while the log and a comparison still named the first)."""
        where = self.root / folder
        taken = [number_of(p) for p in where.iterdir() if not p.name.startswith(".")]
        head = f"{STORE_DIR}/{folder}/"
        for _, event in self.numbered_events():
            record = event.get("record")
            if isinstance(record, str) and record.startswith(head):
                taken.append(number_of(Path(record[len(head) :].split("/", 1)[0])))
        return taken

    def numbered(self, folder: str) -> list[Path]:
        """The written records of `folder`, in the order of their numbers (a reserved record
        not yet written is left out)."""
        where = self.root / folder
        if not where.is_dir():
            return []
        paths = [p for p in where.glob("*.json") if not p.name.startswith(".") and p.stat().st_size]
        return sorted(paths, key=lambda p: (number_of(p), p.name))

    def records(self, folder: str) -> list[dict]:
        """Every written record of `folder`, oldest first."""
        return [self.load(p) for p in self.numbered(folder)]

    def comparisons(self) -> list[dict]:
        return self.records(layout.COMPARISONS)

    def groups(self) -> list[dict]:
        """Every replicate group (`groups/gNNN.json`: a `--seeds N` run or a noise floor)."""
        return self.records(layout.GROUPS)

    def noise_records(self) -> list[dict]:
        """Every measured noise floor (`noise/nNNN.json`, `tunelab noise`)."""
        return self.records(layout.NOISE)

    def judgement(
        self, run_id: str, strongest: bool = False, comparisons: list[dict] | None = None
    ) -> tuple[dict, dict] | None:
        """The newest comparison that judged `run_id`, and the run's row in it: a seed of an
        arm is judged with its arm, in the row of the arm's first run (`arm`). With `strongest`,
        only a comparison against the strongest baseline (not one `--against` named: a weaker
        reference makes "improved" easy). `comparisons`: the lab's, read once by a caller that
        asks for every run (each can be megabytes in a lab of a hundred runs)."""
        for record in reversed(self.comparisons() if comparisons is None else comparisons):
            if strongest and record.get("reference_rule") == "--against":
                continue
            rows = {row["id"]: row for row in record.get("runs", [])}
            row = rows.get(run_id)
            if row is not None and "verdict" not in row:
                row = rows.get(row.get("arm"))
            if row is not None and "verdict" in row:
                return record, row
        return None
