"""Loaders keyed by `Source.type`, and the row checks every loader shares.

A loader only knows its file format: it yields raw records (a dict keyed by column name,
with the file and line it came from) or a `Rejection` when the bytes themselves are bad
(encoding, broken JSON). `check_record` then turns a raw record into an `Example` or a
`Rejection`, so the rules on fields and labels are written once for every format.
Nothing is dropped silently: each bad row becomes a quarantine entry with file and line.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.digest import sha256_path
from tunelab.core.errors import TunelabError
from tunelab.core.spec import DataSpec, Fields, Source
from tunelab.core.store import SPLITS


class DataError(TunelabError):
    """The data cannot be built as the spec says; the message names the spec field."""


@dataclass
class Example:
    """One accepted row. `split` is the user's split when the data comes already split."""

    id: str
    text: str
    label: str
    file: str
    line: int | None
    group: str | None = None
    split: str | None = None
    target: Any = None
    """The expected answer of a generative example (a JSON object or a string)."""
    source: str | None = None
    """The name of the source it was read from (`data.sources[i].name`)."""

    @property
    def origin(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def reject(self, kind: str, reason: str) -> Rejection:
        """Quarantine this row at a later stage (cleaning, id checks), keeping where it was."""
        return Rejection(self.file, self.line, kind, reason)

    def to_row(self) -> dict[str, str]:
        row = {"id": self.id, "text": self.text, "label": self.label}
        if self.group is not None:
            row["group"] = self.group
        if self.target is not None:
            row["target"] = self.target
        row["origin"] = self.origin
        if self.source is not None:
            row["source"] = self.source
        return row

    def sort_key(self) -> tuple:
        """Natural order of ids, so `f.jsonl:9` comes before `f.jsonl:10`."""
        return Example.sort_key_of(self.id)

    @staticmethod
    def sort_key_of(row_id: str) -> tuple:
        return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(row_id))


_DIGITS = re.compile(r"(\d+)")


@dataclass
class Rejection:
    """A quarantined row: where it was, what kind of problem, and the reason in words."""

    file: str
    line: int | None
    kind: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "kind": self.kind, "reason": self.reason}


@dataclass
class Record:
    """A raw row as the file holds it, before any field is checked."""

    file: str
    line: int | None
    values: dict[str, Any]


Loader = Callable[[Path, str, Fields], Iterator["Record | Rejection"]]


def _jsonl(path: Path, shown: str, fields: Fields) -> Iterator[Record | Rejection]:
    """Decode line by line so one bad line costs only itself."""
    for n, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield Rejection(shown, n, "bad_encoding", f"not valid UTF-8: {err.reason}")
            continue
        line = line.removeprefix("\ufeff") if n == 1 else line
        if not line.strip():
            continue
        try:
            values = json.loads(line)
        except json.JSONDecodeError as err:
            yield Rejection(shown, n, "broken_json", f"not valid JSON: {err.msg}")
            continue
        if not isinstance(values, dict):
            yield Rejection(shown, n, "not_an_object", "a JSON line must be an object")
            continue
        yield Record(shown, n, values)


def _csv(path: Path, shown: str, fields: Fields) -> Iterator[Record | Rejection]:
    """Bad bytes are kept as surrogates while parsing, then the record holding them is
    rejected: quoted fields may span lines, so lines cannot be decoded one by one."""
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as err:  # e.g. a quote inside a quoted field that is not doubled
            line, start = start, reader.line_num + 1
            if header is None:
                raise DataError(
                    f"{shown}:{line}: the CSV header cannot be parsed ({err})"
                ) from None
            yield Rejection(shown, line, "malformed_row", f"not valid CSV: {err}")
            continue
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if _has_surrogate(cells):
            if header is None:
                raise DataError(f"{shown}: the CSV header is not valid UTF-8")
            yield Rejection(shown, line, "bad_encoding", "not valid UTF-8")
        elif header is None:
            header = [c.strip() for c in cells]
        elif len(cells) > len(header):
            yield Rejection(
                shown, line, "malformed_row", f"{len(cells)} cells for {len(header)} columns"
            )
        else:
            yield Record(shown, line, dict(zip(header, cells, strict=False)))


def _has_surrogate(cells: list[str]) -> bool:
    return any("\udc80" <= ch <= "\udcff" for c in cells for ch in c)


def _folder(path: Path, shown: str, fields: Fields) -> Iterator[Record | Rejection]:
    """One sub-folder per label, one file per example, read in sorted order. Hidden files
    (`.DS_Store`, editor swap files) are not data and are skipped."""
    if not path.is_dir():
        raise DataError(f"{shown}: a folder source must be a folder of label sub-folders")
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path)
        if any(part.startswith(".") for part in rel.parts):
            continue
        file_shown = f"{shown}/{rel.as_posix()}"
        if len(rel.parts) < 2:
            yield Rejection(file_shown, None, "outside_label_folder", "not inside a label folder")
            continue
        try:
            text = file.read_bytes().decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as err:
            yield Rejection(file_shown, None, "bad_encoding", f"not valid UTF-8: {err.reason}")
            continue
        yield Record(file_shown, None, {fields.text: text, fields.label: rel.parts[0]})


LOADERS: dict[str, Loader] = {"jsonl": _jsonl, "csv": _csv, "folder": _folder}


def get_loader(name: str) -> Loader:
    try:
        return LOADERS[name]
    except KeyError:
        raise TunelabError(f"unknown source type {name!r}; known: {sorted(LOADERS)}") from None


def check_record(
    rec: Record,
    fields: Fields,
    labels: list[str] | None,
    split: str | None,
    generative: bool = False,
) -> Example | Rejection:
    """The checks every row passes, whatever its format. A generative row needs a target
    (a JSON object or a non-empty string); its label column is an optional category."""

    def reject(kind: str, reason: str) -> Rejection:
        return Rejection(rec.file, rec.line, kind, reason)

    answer = fields.target if generative else fields.label
    needed = [fields.text, answer] + [f for f in (fields.id, fields.group) if f is not None]
    if split is None and fields.split is not None:
        needed.append(fields.split)
    missing = [f for f in needed if rec.values.get(f) is None]
    if missing:
        return reject("missing_field", f"missing field(s): {', '.join(missing)}")
    text = rec.values[fields.text]
    if not isinstance(text, str):
        return reject("bad_text_type", f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        return reject("empty_text", "text is empty")
    target = rec.values.get(fields.target) if generative else None
    if generative and not (isinstance(target, dict) or (isinstance(target, str) and target)):
        kind = type(target).__name__
        return reject(
            "bad_target", f"target must be a JSON object or a non-empty string, got {kind}"
        )
    label = (
        _as_str(rec.values.get(fields.label, ""))
        if generative
        else _as_str(rec.values[fields.label])
    )
    if label is None:
        kind = type(rec.values[fields.label]).__name__
        return reject("bad_label_type", f"label must be a string or an integer, got {kind}")
    label = label.strip()
    if not label and not generative:
        return reject("empty_label", "label is empty")
    if labels is not None and label not in labels:
        return reject("unknown_label", f"label {label!r} is not one of task.labels {labels}")
    if split is None and fields.split is not None:
        split = str(rec.values[fields.split]).strip()
        if split not in SPLITS:
            return reject("bad_split_value", f"split {split!r} is not one of {list(SPLITS)}")
    origin = rec.file if rec.line is None else f"{rec.file}:{rec.line}"
    ids = {f: _as_str(rec.values[f]) for f in (fields.id, fields.group) if f is not None}
    bad = [f for f, v in ids.items() if v is None or not v.strip()]
    if bad:
        return reject("bad_key", f"{', '.join(bad)} must be a non-empty string or integer")
    example_id = ids[fields.id] if fields.id else origin
    group = ids[fields.group] if fields.group else None
    return Example(
        example_id, text, label, rec.file, rec.line, group=group, split=split, target=target
    )


def _as_str(value: Any) -> str | None:
    """Strings stay, integers become strings; anything else (bool, float, list) is refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass
class Loaded:
    examples: list[Example]
    rejections: list[Rejection]
    sources: list[dict[str, Any]]
    """Each source with its type, path, user split and content sha256 (for the manifest)."""
    rows_read: int
    presplit: bool


def load_sources(
    data: DataSpec, labels: list[str] | None, lab: Path, generative: bool = False
) -> Loaded:
    """Read every source; ids must be unique across them (later copies are quarantined)."""
    presplit = data.fields.split is not None or any(s.split for s in data.sources)
    out = Loaded([], [], [], 0, presplit)
    seen: set[str] = set()
    for i, source in enumerate(data.sources):
        path, shown = _resolve(source, i, lab)
        _check_source(source, i, data.fields, presplit)
        loader = get_loader(source.type)
        for item in loader(path, shown, data.fields):
            out.rows_read += 1
            if isinstance(item, Record):
                item = check_record(item, data.fields, labels, source.split, generative)
            if isinstance(item, Example) and item.id in seen:
                item = item.reject("duplicate_id", f"id {item.id!r} is already used")
            if isinstance(item, Rejection):
                out.rejections.append(item)
            else:
                seen.add(item.id)
                item.source = source.source_name
                out.examples.append(item)
        out.sources.append(
            {"type": source.type, "path": shown, "split": source.split, "sha256": sha256_path(path)}
        )
    return out


def _resolve(source: Source, i: int, lab: Path) -> tuple[Path, str]:
    path = Path(source.path)
    path = path if path.is_absolute() else lab / path
    if not path.exists():
        raise DataError(f"data.sources[{i}].path: {source.path!r} not found (looked at {path})")
    try:
        shown = path.resolve().relative_to(lab.resolve()).as_posix()
    except ValueError:
        shown = str(path)
    return path, shown


def _check_source(source: Source, i: int, fields: Fields, presplit: bool) -> None:
    get_loader(source.type)
    if presplit and source.split is None and fields.split is None:
        raise DataError(
            f"data.sources[{i}].split: other sources are already split; give this one a "
            "split too (train, validation or test), or name a split column in data.fields.split"
        )
    if source.type == "folder" and (fields.group or (fields.split and source.split is None)):
        raise DataError(
            f"data.sources[{i}]: a folder source has no columns, so data.fields.group and "
            "data.fields.split cannot apply to it (set data.sources[i].split instead)"
        )
