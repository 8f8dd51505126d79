"""The rows' texts past a memory budget, in a scratch file instead of in memory.

A corpus's texts are most of what the data step holds (a million news-length rows: about 1.8
GB as Python strings, read first and written last). `TextSpill` keeps them in memory up to
`data.texts_in_memory_mb`; past it, every text read from then on, and the ones already held,
go to a scratch file in the store (`data/.texts-*.tmp`, removed at the end; a killed command
leaves it for `tunelab fsck` to name) and an example holds where its text lies (`Spilled`).
`Example.text` reads it back when a step needs it: a read per use, so spilling costs time
and is only done past the budget. The texts, and so every answer of the step, are the same.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from tunelab.data.example import Example

TEXTS_IN_MEMORY_MB = 1024
"""The default budget (`data.texts_in_memory_mb`): a million news-length rows (1.8 GB of text)
go past it, a hundred thousand (180 MB) do not."""
WRITE_BUFFER = 1 << 20
"""Bytes gathered before a write to the scratch file."""


Spilled = int
"""Where one text lies in the open `TextSpill`'s file: its offset and UTF-8 size in one
integer (`offset << SIZE_BITS | size`). About 36 bytes a row, where an object holding the
spill, the offset and the size took about 120: a million rows' places were a tenth of the
data step's peak. `Example.text` reads it back (`read_spilled`)."""
SIZE_BITS = 32
"""Bits of a `Spilled` for the text's size: one text up to 4 GiB."""
_OPEN: list[TextSpill] = []
"""The data step's open spill in this process (at most one: `text_spill`), whose file the
`Spilled` places point into."""


def read_spilled(place: Spilled) -> str:
    """The text at `place` in the open spill's file."""
    if not _OPEN:
        raise RuntimeError("a spilled text was read after its data step had ended")
    return _OPEN[0].read(place >> SIZE_BITS, place & ((1 << SIZE_BITS) - 1))


class TextSpill:
    """Texts held in memory up to `budget` bytes (UTF-8), then in the file at `path`.

    `hold(text)` gives what an example keeps of a new text (the text itself, or its `Spilled`
    place); once past the budget, `hold_all` moves the texts already held to the file too.
    Its places are read back while it is the open one (`text_spill`)."""

    def __init__(self, folder: Path, budget: int):
        self.folder, self.budget = folder, budget
        self.path: Path | None = None  # made when the first text goes past the budget
        self.held = 0  # characters of text kept in memory so far
        self.spilling = False
        self._fd: int | None = None
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._end = 0  # bytes written to the file, and buffered after them

    def hold(self, text: str) -> str | Spilled:
        if not self.spilling:
            self.held += len(text)  # characters: a lower bound on the UTF-8 bytes, at no cost
            if self.held <= self.budget:
                return text
            self.spilling = True
        return self.put(text)

    def hold_all(self, examples: Iterable[Example]) -> None:
        """Past the budget, move every text still held in memory to the file."""
        if not self.spilling:
            return
        for ex in examples:
            if isinstance(ex.body, str) and ex.body:
                ex.body = self.put(ex.body)

    def put(self, text: str) -> Spilled:
        data = text.encode("utf-8", "surrogatepass")
        if len(data) >> SIZE_BITS:
            raise ValueError(f"a text of {len(data):,} bytes is past a spill's 4 GiB a text")
        place = self._end << SIZE_BITS | len(data)
        self._buffer.append(data)
        self._buffered += len(data)
        self._end += len(data)
        if self._buffered >= WRITE_BUFFER:
            self._flush()
        return place

    def read(self, offset: int, size: int) -> str:
        if offset + size > self._end - self._buffered:
            self._flush()
        return os.pread(self._fd, size, offset).decode("utf-8", "surrogatepass")

    def _flush(self) -> None:
        if self._fd is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._fd, name = tempfile.mkstemp(dir=self.folder, prefix=".texts-", suffix=".tmp")
            self.path = Path(name)
        os.write(self._fd, b"".join(self._buffer))  # the file's end: no seek needed
        self._buffer, self._buffered = [], 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def summary(self) -> dict:
        """What the report says of it: whether the texts went to the file, and how much."""
        return {
            "budget_mb": round(self.budget / 2**20, 1),
            "spilled": self.spilling,
            "spilled_mb": round(self._end / 2**20, 1),
        }


@contextmanager
def text_spill(folder: Path, budget_mb: float) -> Iterator[TextSpill]:
    """A `TextSpill` whose file (created only once texts go past the budget) lives in
    `folder` and is removed at the end, whatever happens; the open one until then (a data
    step does not start another inside itself)."""
    if _OPEN:
        raise RuntimeError("a data step's text spill is already open in this process")
    spill = TextSpill(folder, int(budget_mb * 2**20))
    _OPEN.append(spill)
    try:
        yield spill
    finally:
        _OPEN.clear()
        spill.close()


class Texts(Sequence[str]):
    """The texts of a list of examples (or what `read` takes of each: `content.key_text`, ...),
    read as they are asked for (a spilled text is not read until then): what the batched steps
    (`batches.map_batches`) take a slice at a time."""

    def __init__(self, examples: Sequence[Example], read: Callable[[Example], str] | None = None):
        self.examples = examples
        self.read = read or _text

    def __len__(self) -> int:
        return len(self.examples)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.read(ex) for ex in self.examples[i]]
        return self.read(self.examples[i])


def _text(ex: Example) -> str:
    return ex.text
