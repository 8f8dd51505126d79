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
        _refuse_unreadable(fh.read(10), path, shown)
        fh.seek(0)
        yield from fh


def utf8_bytes(path: Path, shown: str) -> bytes:
    """A text file's bytes; UTF-16 (told by its byte order mark) or a compressed file is refused
    as a whole, since every line of it would be quarantined for the same reason."""
    data = path.read_bytes()
    _refuse_unreadable(data[:10], path, shown)
    return data


COMPRESSED = {
    b"\x1f\x8b": ("gzip", "gunzip -k"),
    b"BZh": ("bzip2", "bunzip2 -k"),
    b"\xfd7zXZ\x00": ("xz", "unxz -k"),
    b"\x28\xb5\x2f\xfd": ("zstd", "unzstd"),
    b"PK\x03\x04": ("zip", "unzip"),
}
"""A compressed file's first bytes -> its format and the command that unpacks it."""


def _refuse_unreadable(start: bytes, path: Path, shown: str) -> None:
    """A text source that is UTF-16, or compressed (every line of it would be quarantined as
    bad UTF-8, with advice to convert an encoding), is refused as a whole."""
    for magic, (kind, unpack) in COMPRESSED.items():
        if start.startswith(magic) and (kind != "bzip2" or start[4:10] == b"1AY&SY"):
            raise DataError(
                f"{shown}: the file is {kind}-compressed, and tunelab reads text sources as they "
                f"are: unpack it (`{unpack} {shlex.quote(path.name)}`) and point the source at "
                "the text file"
            )
    if start[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DataError(
            f"{shown}: the file is UTF-16 text (it starts with a UTF-16 byte order mark), not "
            f"UTF-8; convert it with `iconv -f UTF-16 -t UTF-8 {shlex.quote(path.name)} > new-file`"
        )
