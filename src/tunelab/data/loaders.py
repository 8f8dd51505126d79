"""Loading the sources: each read by its format's reader, then the row checks every format shares.

A reader (`formats.py`) yields raw records or a `Rejection` when the bytes themselves are bad;
`check_record` turns a raw record into an `Example` or a `Rejection`, so the rules on fields
and labels are written once for every format. Nothing is dropped silently: each bad row
becomes a quarantine entry with file and line. Where a source may be read from is
`paths.py`'s rule; the checks of a source as a whole are `source_checks.py`'s.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.spec import DataSpec, Fields, Source
from tunelab.core.store import SPLITS
from tunelab.data.example import Example
from tunelab.data.formats import LOADERS, get_loader, is_dataset_dict
from tunelab.data.paths import Located, locate
from tunelab.data.raw import DataError, Record, Rejection
from tunelab.data.source_checks import check_shown_apart, check_source, quarantine_numbers

__all__ = [
    "LOADERS",
    "DataError",
    "Example",
    "Keys",
    "Loaded",
    "Record",
    "Rejection",
    "check_record",
    "get_loader",
    "load_sources",
]


LONE_SURROGATE = "a lone surrogate (an escape such as \\ud800 is no character)"


def check_record(
    rec: Record,
    fields: Fields,
    labels: list[str] | None,
    split: str | None,
    generative: bool = False,
    text_only: bool = False,
    object_target: bool = False,
) -> Example | Rejection:
    """The checks every row passes, whatever its format. A generative row needs a target
    (a JSON object or a non-empty string) unless `text_only` (the text is what is learned);
    its label column is an optional category. `object_target` (task extraction): a target
    written as a string is read as the JSON object it holds (`jsonout.json_object`), or the
    row is quarantined saying why it holds none."""

    def reject(kind: str, reason: str) -> Rejection:
        return Rejection(rec.file, rec.line, kind, reason)

    answer = [] if text_only else [fields.target if generative else fields.label]
    absent = check_present(rec, fields, [fields.text, *answer], split)
    if absent is not None:
        return absent
    text = rec.values[fields.text]
    if not isinstance(text, str):
        return reject("bad_text_type", f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        return reject("empty_text", "text is empty")
    target = rec.values.get(fields.target) if generative else None
    if (
        generative
        and not text_only
        and not (isinstance(target, dict) or (isinstance(target, str) and target))
    ):
        kind = "an empty string" if target == "" else type(target).__name__
        return reject(
            "bad_target", f"target must be a JSON object or a non-empty string, got {kind}"
        )
    if object_target and isinstance(target, str):
        from tunelab.tasks.jsonout import json_object

        target, why = json_object(target)
        if target is None:
            return reject(
                "bad_target",
                f"the target must be a JSON object for task extraction ({why}), exactly as "
                "the model's answer is scored",
            )
    keys = check_keys(rec, fields, labels, split, generative)
    if isinstance(keys, Rejection):
        return keys
    if not _encodable(text, target):
        return reject("bad_encoding", LONE_SURROGATE)
    return Example(
        keys.id,
        text,
        keys.label,
        rec.file,
        rec.line,
        group=keys.group,
        split=keys.split,
        target=target,
    )


@dataclass(frozen=True)
class Keys:
    """What `check_keys` finds in a row besides its content: label, split, id and group."""

    label: str
    split: str | None
    id: str
    group: str | None


def check_present(
    rec: Record, fields: Fields, content: list[str], split: str | None
) -> Rejection | None:
    """The row has every field it needs (the `content` ones, the id and group columns, and
    the split column when the source brings no split), none of them null."""
    needed = content + [f for f in (fields.id, fields.group) if f is not None]
    if split is None and fields.split is not None:
        needed.append(fields.split)
    absent = [f for f in needed if f not in rec.values]
    if absent:
        return Rejection(
            rec.file,
            rec.line,
            "missing_field",
            f"missing field(s): {_named(absent, fields)} ({_has(rec.values)})",
        )
    null = [f for f in needed if rec.values[f] is None]
    if null:
        return Rejection(
            rec.file, rec.line, "null_field", f"null value in field(s): {_named(null, fields)}"
        )
    return None


def _named(columns: list[str], fields: Fields) -> str:
    """Each column with the spec field that names it: `id (data.fields.id)`."""
    roles = {c: [k for k in type(fields).model_fields if getattr(fields, k) == c] for c in columns}
    return ", ".join(
        f"{c} ({', '.join(f'data.fields.{k}' for k in roles[c])})" if roles[c] else c
        for c in columns
    )


def check_keys(
    rec: Record, fields: Fields, labels: list[str] | None, split: str | None, generative: bool
) -> Keys | Rejection:
    """The label (required unless `generative`, and one of `labels` when given), the split
    column's value, and the id and group columns: the checks of every row after its content
    (the last one, that no string holds a lone surrogate, is made of the content after this).
    `check_present` has run: the fields needed are there."""

    def reject(kind: str, reason: str) -> Rejection:
        return Rejection(rec.file, rec.line, kind, reason)

    label = (
        _as_str(rec.values.get(fields.label, ""))
        if generative
        else _as_str(rec.values[fields.label])
    )
    if label is None:
        value = rec.values[fields.label]
        if isinstance(value, float) and math.isnan(value):  # pandas' empty cell
            return reject("empty_label", "label is empty (NaN: an empty cell)")
        kind = type(value).__name__
        several = " (several labels a row: task.type multilabel reads lists)" * isinstance(
            value, list
        )
        return reject(
            "bad_label_type", f"label must be a string or an integer, got {kind}{several}"
        )
    label = sys.intern(label.strip())  # a million rows share a few label strings
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
    if not _encodable(label, example_id, group):
        return reject("bad_encoding", LONE_SURROGATE)
    return Keys(label, split, example_id, group)


def _has(values: dict[str, Any]) -> str:
    """The fields a row does have, for a reason that says why the wanted ones are missing."""
    if not values:
        return "the row has no fields"
    names = ", ".join(repr(k) for k in list(values)[:8])
    return f"the row has {names}" + (", ..." if len(values) > 8 else "")


def _encodable(*values: Any) -> bool:
    """False when a string holds a lone surrogate (a JSON `\\ud800` escape): such a row
    could never be written back as UTF-8."""
    for value in values:
        if value is None or (isinstance(value, str) and value.isascii()):
            continue
        try:  # a string as it is; anything else (a target object) as the JSON it is stored as
            (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).encode()
        except UnicodeEncodeError:
            return False
    return True


def _as_str(value: Any) -> str | None:
    """Strings stay, integers become strings, and so does a float that is a whole number (`1.0`:
    pandas keeps an integer column with one empty cell as floats, and writes them so to Parquet
    and JSON); anything else (bool, another float, list) is refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None


@dataclass
class Loaded:
    examples: list[Example]
    rejections: list[Rejection]
    sources: list[dict[str, Any]]
    """Each source as the manifest records it: name, type, path (as in ids), user split,
    content sha256, rows read, the resolved path and a folder's files."""
    rows_read: int
    presplit: bool


RowCheck = Callable[[Record, "str | None"], "Example | Rejection"]
"""(a raw record, the split its source or format gives it) -> an example or a rejection."""


def load_sources(
    data: DataSpec,
    labels: list[str] | None,
    lab: Path,
    generative: bool = False,
    text_only: bool = False,
    check: RowCheck | None = None,
    hold: Callable[[str], Any] = str,
    object_target: bool = False,
) -> Loaded:
    """Read every source; ids must be unique across them (later copies are quarantined).
    Every path is checked (`paths.locate`) before any file is read. `text_only` (task
    pretrain): a row needs its text alone, no target. `check` turns each record into an
    example (default: `check_record`; an image lab's reads the image, `image_rows`). `hold`:
    what an example keeps of its text (`spill.TextSpill.hold`: the text, or its place).
    `object_target`: `check_record`'s (task extraction)."""
    located = [locate(s, i, lab, data.allow_outside_lab) for i, s in enumerate(data.sources)]
    whole = [
        s.type == "hf_dataset" and s.split is None and is_dataset_dict(where.path)
        for s, where in zip(data.sources, located, strict=True)
    ]  # a saved DatasetDict brings its own split
    presplit = data.fields.split is not None or any(s.split for s in data.sources) or any(whole)
    out = Loaded([], [], [], 0, presplit)
    seen: dict[str, str] = {}  # id -> where it was first read
    for i, source in enumerate(data.sources):
        check_source(source, i, data.fields, presplit and not whole[i])
    check_shown_apart(located)

    def check_text(rec: Record, split: str | None) -> Example | Rejection:
        return check_record(rec, data.fields, labels, split, generative, text_only, object_target)

    for i, (source, where) in enumerate(zip(data.sources, located, strict=True)):
        rows = _read_source(source, i, where, data.fields, check or check_text, seen, out, hold)
        out.sources.append(
            {
                "name": source.source_name,
                "type": source.type,
                "path": where.shown,
                "split": source.split,
                "sha256": where.sha256(),
                "rows": rows,
                **where.record(),
            }
        )
    return out


def _read_source(
    source: Source,
    i: int,
    where: Located,
    fields: Fields,
    check: RowCheck,
    seen: dict[str, str],
    out: Loaded,
    hold: Callable[[str], Any] = str,
) -> int:
    """Read one source into `out`; return the rows it had (kept or rejected)."""
    rows, words, numbers = 0, 0, []  # rows labelled with a word, rows labelled with a number
    name = source.source_name
    try:
        for item in get_loader(source.type).read(where.path, where.shown, fields, source.split):
            rows += 1
            raw = None
            if isinstance(item, Record):
                raw = item.values.get(fields.label)
                item = check(item, item.split or source.split)
            if isinstance(item, Example) and item.id in seen:
                first = seen[item.id]
                item = item.reject("duplicate_id", f"id {item.id!r} is already used ({first})")
            if isinstance(item, Rejection):
                item.source = name
                out.rejections.append(item)
            else:
                seen[item.id] = item.origin
                item.source = name
                item.body = _held(hold, item.body)
                out.examples.append(item)
                words += isinstance(raw, str) and not raw.strip().lstrip("-").isdigit()
                if isinstance(raw, int) and not isinstance(raw, bool):
                    numbers.append(item)
    except OSError as err:  # unreadable (permissions), or gone while being read
        raise DataError(
            f"data.sources[{i}].path: {where.shown} cannot be read ({err.strerror or err})"
        ) from None
    if numbers and words > len(numbers):  # a few numbers among words: slips
        quarantine_numbers(out, numbers)
    out.rows_read += rows
    return rows


def _held(hold: Callable[[str], Any], text: str) -> Any:
    """`hold(text)`, its scratch file's failure said as the store's, not the source's: a
    read-only store or a full disk read "data/documents.jsonl cannot be read"."""
    try:
        return hold(text)
    except OSError as err:
        where = err.filename or "its scratch file"
        raise DataError(
            f"the texts past data.texts_in_memory_mb go to a scratch file in the lab's store, "
            f"and {where} cannot be written ({err.strerror or err}): free space there, or make "
            "the store writable, or raise data.texts_in_memory_mb"
        ) from None
