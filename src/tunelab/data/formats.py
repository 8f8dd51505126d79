"""The file formats a source may have, one reader each, keyed by `Source.type`.

A reader only knows its format: it yields raw records (a dict keyed by column name, with the
file and line it came from) or a `Rejection` when the bytes themselves are bad (encoding,
broken JSON, a malformed CSV row). `loaders.check_record` then checks the fields, so the
rules on fields and labels are written once for every format. A file that cannot be read as
its format at all (no CSV header, not a Parquet file) is a `DataError` naming the file.

`line` is where a row is in its file: the line for JSONL and CSV (the first line of a
quoted multi-line CSV row), the row index + 1 for Parquet and a saved Hugging Face dataset,
and None for a folder source (one file per example: `folder` for texts, `image_folder` for
images). pyarrow and datasets are imported inside their readers, only when a lab has such a
source. The row types and the UTF-8 rules of text files are in `raw.py`, the CSV and TSV
readers in `csv_rows.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.spec import Fields
from tunelab.core.store import SPLITS
from tunelab.data.class_labels import class_names, parquet_class_names
from tunelab.data.csv_rows import read_csv, read_tsv
from tunelab.data.raw import DataError, Format, Record, Rejection, utf8_lines

BATCH = 1024
"""Rows converted to Python at a time by the columnar readers."""


def _jsonl(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """Decode line by line, as the file is read, so one bad line costs only itself. CRLF line
    ends are accepted (the \\r is stripped); a key given twice in one object is refused, not
    silently the last."""
    for n, raw in enumerate(utf8_lines(path, shown), start=1):
        try:
            line = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError as err:
            yield Rejection(shown, n, "bad_encoding", f"not valid UTF-8: {err.reason}")
            continue
        line = line.removeprefix("\ufeff") if n == 1 else line
        if not line.strip():
            continue
        try:
            values = json.loads(line, object_pairs_hook=_no_repeated_keys)
        except _RepeatedKey as err:
            yield Rejection(shown, n, "duplicate_key", f"the key {err} appears twice")
            continue
        except json.JSONDecodeError as err:
            yield Rejection(shown, n, "broken_json", f"not valid JSON: {err.msg}")
            continue
        if not isinstance(values, dict):
            yield Rejection(shown, n, "not_an_object", "a JSON line must be an object")
            continue
        yield Record(shown, n, values)


class _RepeatedKey(ValueError):
    pass


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(repr(key))
        out[key] = value
    return out


def _folder(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """One sub-folder per label, one text file per example, read in sorted order."""
    for item in _label_files(path, shown):
        if isinstance(item, Rejection):
            yield item
            continue
        file, file_shown, label = item
        try:
            text = file.read_bytes().decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as err:
            yield Rejection(file_shown, None, "bad_encoding", f"not valid UTF-8: {err.reason}")
            continue
        yield Record(file_shown, None, {fields.text: text, fields.label: label})


def _image_folder(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """One sub-folder per label, one image file per example, read in sorted order. The
    record names the file (as shown: relative to the lab) in the image column; the image is
    read, decoded and checked with the rows of every image source (`image_rows`)."""
    for item in _label_files(path, shown):
        if isinstance(item, Rejection):
            yield item
            continue
        file, file_shown, label = item  # the image is read where it is, shown as its row is
        yield Record(file_shown, None, {fields.image: str(file), fields.label: label})


def _label_files(path: Path, shown: str) -> Iterator[tuple[Path, str, str] | Rejection]:
    """(file, file as shown, label) for each file of a folder of label sub-folders
    (`folder_files`: hidden files are not data); a symbolic link to nothing is quarantined."""
    for file in folder_files(path):
        rel = file.relative_to(path)
        file_shown = f"{shown}/{rel.as_posix()}"
        if len(rel.parts) < 2:
            yield Rejection(file_shown, None, "outside_label_folder", "not inside a label folder")
        elif not file.exists():
            yield Rejection(
                file_shown,
                None,
                "missing_file",
                f"a symbolic link to a missing file ({os.readlink(file)}): put the file back, "
                "or delete the link",
            )
        else:
            yield file, file_shown, rel.parts[0]


def folder_files(path: Path) -> list[Path]:
    """What a folder source holds, sorted: every regular file under it (symbolic links to
    folders are not entered) and every symbolic link that leads nowhere (quarantined, not
    passed over), but hidden ones (`.DS_Store`, `._photo.jpg`, a `.thumbnails/` folder:
    not data). What a folder source's hash covers (`paths.Located.sha256`) and what its reader
    may open: a Finder that rewrites `.DS_Store` changes no data version."""
    return sorted(
        p
        for p in path.rglob("*")
        if (p.is_file() or (p.is_symlink() and not p.exists()))
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def _parquet(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """A Parquet file, read in batches; a row's `line` is its index + 1. A file `datasets`
    wrote (`to_parquet`, the Hub's) keeps its features in the schema's metadata: a `ClassLabel`
    label column gives its names, not its integers, as `hf_dataset` does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
        names = parquet_class_names(table.schema_arrow.metadata, fields.label)
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"{shown}: not a readable Parquet file ({err})") from None
    line = 0
    try:
        for batch in table.iter_batches(batch_size=BATCH):
            for values in batch.to_pylist():
                line += 1
                yield _named(Record(shown, line, values), fields.label, names)
    except (pa.ArrowException, OSError) as err:  # a damaged row group further in
        raise DataError(f"{shown}: unreadable after row {line} ({err})") from None


def _named(record: Record, label: str, names: list[str] | None) -> Record | Rejection:
    """A `ClassLabel`'s integer as its name (each one, in a list of them); -1, its "no
    label", is rejected."""
    value = record.values.get(label)
    if names and isinstance(value, list):
        record.values[label] = [_name_of(v, names) for v in value]
        return record
    if not names or not isinstance(value, int) or isinstance(value, bool):
        return record
    if value == -1:
        return Rejection(
            record.file, record.line, "empty_label", "label -1: the ClassLabel's no label"
        )
    record.values[label] = _name_of(value, names)
    return record


def _name_of(value: Any, names: list[str]) -> Any:
    """An in-range integer as its class name; anything else as it is (the label checks say
    what is wrong with it)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    return value


def _hf_dataset(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """A folder written by `datasets.Dataset.save_to_disk` (or a `DatasetDict`'s), read with
    `datasets.load_from_disk`; a row's `line` is its index + 1 in its split.

    A DatasetDict's splits (named train, validation and test) become the user's split, each
    shown as `<path>/<split>`; with `split:` on the source only that split is read. A
    `ClassLabel` label column gives its names, not its integers.
    """
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as err:
        raise DataError(
            f"{shown}: not a folder saved with datasets' save_to_disk ({err})"
        ) from None
    if not isinstance(loaded, datasets.DatasetDict):
        yield from _dataset_rows(loaded, shown, fields, None)
        return
    unknown = [name for name in loaded if name not in SPLITS]
    wanted = [split] if split else [name for name in SPLITS if name in loaded]
    if split and split not in loaded:
        raise DataError(f"{shown}: the DatasetDict has no split {split!r}; it has {list(loaded)}")
    if unknown and not split:
        raise DataError(
            f"{shown}: the DatasetDict has split(s) {unknown}, but a lab's splits are "
            f"{list(SPLITS)}; rename them (`DatasetDict({{'validation': dd['dev'], ...}})`) and "
            "save again, or give the source `split:` to read only one of its splits"
        )
    for name in wanted:
        yield from _dataset_rows(loaded[name], f"{shown}/{name}", fields, name)


def _dataset_rows(
    dataset: Any, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """An `Image` column in `fields.image` is read undecoded, as its bytes and path: an image
    lab decodes and checks every image itself, and a text lab never needs it decoded."""
    import datasets

    if isinstance(dataset.features.get(fields.image), datasets.Image):
        dataset = dataset.cast_column(fields.image, datasets.Image(decode=False))
    names = class_names(dataset.features.get(fields.label))
    line = 0
    for batch in dataset.iter(batch_size=BATCH):
        for values in zip(*batch.values(), strict=True):
            line += 1
            row = dict(zip(batch, values, strict=True))
            yield _named(Record(shown, line, row, split), fields.label, names)


LOADERS: dict[str, Format] = {
    "jsonl": Format(_jsonl, "file"),
    "csv": Format(read_csv, "file"),
    "tsv": Format(read_tsv, "file"),
    "parquet": Format(_parquet, "file"),
    "folder": Format(_folder, "folder"),
    "image_folder": Format(_image_folder, "folder"),
    "hf_dataset": Format(_hf_dataset, "folder"),
}


def get_loader(name: str) -> Format:
    try:
        return LOADERS[name]
    except KeyError:
        raise TunelabError(f"unknown source type {name!r}; known: {sorted(LOADERS)}") from None


def is_dataset_dict(path: Path) -> bool:
    """A saved DatasetDict: its rows come already split."""
    return (path / "dataset_dict.json").is_file()
