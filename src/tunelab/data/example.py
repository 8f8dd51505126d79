"""One accepted row (`Example`): its fields, what a version id hashes of it, its stored row,
its content digest and its natural id order. Readers make them (`loaders.py`); every later
data step (cleaning, split, dedup, version) passes them on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.data.batches import map_batches
from tunelab.data.content import DIGEST_BYTES, content_key, digest, key_text, text_digests
from tunelab.data.raw import Rejection
from tunelab.data.spill import Spilled, Texts, read_spilled

if TYPE_CHECKING:
    from tunelab.data.images import ImageInfo


@dataclass(slots=True)
class Example:
    """One accepted row. `split` is the user's split when the data comes already split.
    Slotted: a million rows hold their fields, not a dict each."""

    id: str
    body: str | Spilled
    """The text, or where it waits in the data step's scratch file past the memory budget
    (`data/spill.py`); read it as `text`."""
    label: str
    file: str
    line: int | None
    group: str | None = None
    split: str | None = None
    target: Any = None
    """The expected answer of a generative example (a JSON object or a string)."""
    source: str | None = None
    """The name of the source it was read from (`data.sources[i].name`)."""
    image: ImageInfo | None = None
    """The image of an image example (task image_classification), whose `text` is empty."""
    messages: list[dict] | None = None
    """A conversation's turns (`data/conversations.py`); its `text` is the turns flattened,
    for cleaning and lengths, its `target` the last assistant turn's answer, and its prompt
    (the turns before) what duplicates and conflicts compare (`content.key_text`)."""
    label_set: list[str] | None = None
    """A multilabel row's labels, sorted (`data/label_sets.py`); its `label` is then the set's
    key (the sorted JSON list), which the version id hashes."""

    _digest: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def text(self) -> str:
        body = self.body
        return body if isinstance(body, str) else read_spilled(body)

    @property
    def content_digest(self) -> bytes:
        """A digest of `content.content_key`, computed once: rows with the same one are the
        same example. (A copy made with `dataclasses.replace` computes its own.)"""
        if self._digest is None:
            self._digest = digest(content_key(self))
        return self._digest

    @property
    def origin(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def hashed(self) -> list[Any]:
        """What a version id hashes of this row: its id, text and answer, and an image's
        bytes (by their sha256)."""
        row = [self.id, self.text, self.label, self.group, self.target]
        if self.messages is not None:
            row.append(self.messages)
        return row if self.image is None else [*row, self.image.bytes_sha256]

    def reject(self, kind: str, reason: str) -> Rejection:
        """Quarantine this row at a later stage (cleaning, id checks), keeping where it was."""
        return Rejection(self.file, self.line, kind, reason, self.source)

    def to_row(self) -> dict[str, Any]:
        if self.image is not None:
            return self._image_row(self.image)
        row = {"id": self.id, "text": self.text, "label": self.label}
        if self.group is not None:
            row["group"] = self.group
        if self.target is not None:
            row["target"] = self.target
        if self.messages is not None:
            row["messages"] = self.messages
        if self.label_set is not None:
            row["labels"] = self.label_set
        row["origin"] = self.origin
        if self.source is not None:
            row["source"] = self.source
        return row

    def _image_row(self, image: ImageInfo) -> dict[str, Any]:
        """An image example's row: `image` is its file in the version folder (relative to
        it), `file` where it was read from; the other keys describe and hash the picture
        (`tunelab.data.images`). Code that reads image rows relies on these keys."""
        row: dict[str, Any] = {
            "id": self.id,
            "image": image.stored,
            "label": self.label,
            "width": image.width,
            "height": image.height,
            "mode": image.mode,
            "format": image.format,
            "bytes_sha256": image.bytes_sha256,
            "pixels_sha256": image.pixels_sha256,
            "dhash": image.dhash,
        }
        if self.group is not None:
            row["group"] = self.group
        row["file"] = image.file
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


def compute_digests(examples: Sequence[Example], workers: int | None = None) -> None:
    """Every text row's `content_digest` at once, on `workers` processes (default: every
    core, `batches.map_batches`): normalising and hashing a million texts one by one was the
    data step's largest cost in its own process."""
    todo = [ex for ex in examples if ex.image is None and ex._digest is None]
    keys = Texts(todo, key_text)
    rows = map_batches(text_digests, keys, (), DIGEST_BYTES, np.uint8, workers)
    for ex, row in zip(todo, rows, strict=True):
        ex._digest = row.tobytes()


_DIGITS = re.compile(r"(\d+)")
