"""What a format's reader yields (`Record`, `Rejection`), the error for data that cannot be
built at all (`DataError`), and the bytes of a text file as its readers take them: UTF-8, a
UTF-16 file refused as a whole. `formats.py` keys the readers by `Source.type`."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tunelab.core.errors import TunelabError
from tunelab.core.spec import Fields


class DataError(TunelabError):
    """The data cannot be built as the spec says; the message names the spec field or file."""


@dataclass
class Rejection:
    """A quarantined row: where it was, what kind of problem, and the reason in words."""

    file: str
    line: int | None
    kind: str
    reason: str
    source: str | None = None
    """The name of the source it was read from (for the per-source accounting)."""

    @property
    def origin(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "kind": self.kind, "reason": self.reason}


@dataclass
class Record:
    """A raw row as the file holds it, before any field is checked."""

    file: str
    line: int | None
    values: dict[str, Any]
    split: str | None = None
    """The split the format itself gives the row (a DatasetDict's split), else None."""


Reader = Callable[[Path, str, Fields, "str | None"], Iterator["Record | Rejection"]]
"""(path, the path as shown in ids, the field mapping, the source's split) -> rows."""


@dataclass(frozen=True)
class Format:
    read: Reader
    takes: Literal["file", "folder"]
    """What `Source.path` must name for this format."""


def utf8_lines(path: Path, shown: str) -> Iterator[bytes]:
    """A text file's lines as bytes, read as they are needed (`utf8_bytes`' refusal first)."""
    with path.open("rb") as fh:
        _refuse_utf16(fh.read(2), path, shown)
        fh.seek(0)
        yield from fh


def utf8_bytes(path: Path, shown: str) -> bytes:
    """A text file's bytes; UTF-16 (told by its byte order mark) is refused as a whole, since
    every line of it would be quarantined for the same reason."""
    data = path.read_bytes()
    _refuse_utf16(data[:2], path, shown)
    return data


def _refuse_utf16(start: bytes, path: Path, shown: str) -> None:
    if start in (b"\xff\xfe", b"\xfe\xff"):
        raise DataError(
            f"{shown}: the file is UTF-16 text (it starts with a UTF-16 byte order mark), not "
            f"UTF-8; convert it with `iconv -f UTF-16 -t UTF-8 {shlex.quote(path.name)} > new-file`"
        )
