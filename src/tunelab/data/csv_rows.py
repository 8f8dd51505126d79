"""CSV and TSV sources: the first row is the header, records are parsed strictly (a quote
inside a quoted field must be doubled), and a quoted field may span lines, so `line` is where
a record begins."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

from tunelab.core.spec import Fields
from tunelab.data.raw import DataError, Record, Rejection, utf8_bytes


def read_csv(
    path: Path, shown: str, fields: Fields, split: str | None, delimiter: str = ","
) -> Iterator[Record | Rejection]:
    """The first row is the header. Bad bytes are kept as surrogates while parsing, then the
    record holding them is rejected: quoted fields may span lines, so lines cannot be decoded
    one by one. A row with more cells than the header (an unquoted comma) is rejected."""
    text = utf8_bytes(path, shown).decode("utf-8", errors="surrogateescape")
    text = text.removeprefix("\ufeff")
    stream = io.StringIO(text, newline="")
    reader = csv.reader(stream, delimiter=delimiter, strict=True)
    header: list[str] | None = None
    start, taken = 1, 0  # taken: lines read past the reader, the rest of a broken record
    while True:
        at = stream.tell()
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as err:  # e.g. a quote inside a quoted field that is not doubled
            line, last = start, reader.line_num + taken
            if header is None:
                raise DataError(
                    f"{shown}:{line}: the CSV header cannot be parsed ({err})"
                ) from None
            if last > line and "unexpected end of data" in str(err):
                raise DataError(_unclosed_quote(shown, line, last)) from None
            if not _closes(text[at : stream.tell()].splitlines()[-1], delimiter):
                rest = _rest_of_field(stream, delimiter)  # its quoted field is still open
                taken, last = taken + rest, last + rest
            start = last + 1
            yield Rejection(shown, line, "malformed_row", _malformed(err, line, last, delimiter))
            continue
        line, start = start, reader.line_num + taken + 1
        if not any(c.strip() for c in cells):
            continue
        if _has_surrogate(cells):
            if header is None:
                raise DataError(
                    f"{shown}: the CSV header is not valid UTF-8; not UTF-8 text? (a binary "
                    "file, or another encoding: convert it with `iconv -t UTF-8`)"
                )
            yield Rejection(shown, line, "bad_encoding", "not valid UTF-8")
        elif header is None:
            header = _header(cells, shown)
        elif len(cells) > len(header):
            yield Rejection(
                shown, line, "malformed_row", f"{len(cells)} cells for {len(header)} columns"
            )
        else:
            yield Record(shown, line, dict(zip(header, cells, strict=False)))


FIELD_LINES = 100
"""How far a broken record's open quoted field is followed to the line that closes it."""


def _rest_of_field(stream: io.StringIO, delimiter: str) -> int:
    """How many lines after the one the parser stopped on belong to its broken record: while
    its quoted field is open, up to the first line that closes it (`_closes`), within
    `FIELD_LINES`. They go into the quarantined row, so no part of the record is read as a row
    of its own (the tail of `"text with a "stray" quote<newline>more",label` was read as the
    text `more"`). 0 when no line closes it: the stream is left where it was."""
    start = stream.tell()
    for lines in range(1, FIELD_LINES + 1):
        line = stream.readline()
        if not line:
            break
        if _closes(line, delimiter):
            return lines
    stream.seek(start)
    return 0


def _closes(line: str, delimiter: str) -> bool:
    """Whether `line` ends a quoted field: a quote before the delimiter or the line's end."""
    line = line.rstrip("\r\n")
    return line.endswith('"') or f'"{delimiter}' in line


def _unclosed_quote(shown: str, line: int, last: int) -> str:
    """A quote opened on `line` and never closed: every line after it would be one quarantined
    row, the valid rows among them in no split and no count, so the file is refused."""
    return (
        f"{shown}:{line}: a quote opened on this line is never closed, so the "
        f"{last - line + 1} lines from here to the end of the file would be read as one field; "
        'close the quoted field or double the quote (""), then run `tunelab data` again'
    )


def _malformed(err: csv.Error, line: int, last: int, delimiter: str = ",") -> str:
    """Why a CSV (or TSV) record is quarantined, with the fix; one whose quoted field ran over
    several lines before it broke names the lines its one row holds."""
    kind = "TSV (tab-separated, quoted as CSV)" if delimiter == "\t" else "CSV"
    if last == line:
        return (
            f"not valid {kind}: {err}: a field that starts with a quote is read as quoted to its "
            'closing quote, so quote the whole field and double each quote inside it ("")'
        )
    return (
        f"not valid {kind}: {err}; a quoted field ran from line {line} to {last}, so these "
        f"{last - line + 1} lines are this one row: close or double the quote on line {line}"
    )


def read_tsv(
    path: Path, shown: str, fields: Fields, split: str | None
) -> Iterator[Record | Rejection]:
    """Tab-separated values: a CSV file whose cells are separated by tabs (quoting as CSV)."""
    return read_csv(path, shown, fields, split, delimiter="\t")


def _header(cells: list[str], shown: str) -> list[str]:
    header = [c.strip() for c in cells]
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DataError(
            f"{shown}:1: the CSV header names column(s) {twice} more than once; which one "
            "is meant cannot be told. Rename the repeated columns."
        )
    return header


def _has_surrogate(cells: list[str]) -> bool:
    return any("\udc80" <= ch <= "\udcff" for c in cells for ch in c)
