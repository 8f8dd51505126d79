"""What makes two rows the same example: the normalised text, or an image's decoded pixels.

Exact duplicates and label conflicts group rows by it, and the near-duplicate detector pairs
distinct ones. Each row's key is hashed once (`Example.content_digest`), so a million rows
are grouped by 16-byte digests rather than by second copies of their texts.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

DIGEST_BYTES = 16
"""blake2b digest size: 128 bits, so two different keys sharing one is not a concern."""


def normalise(text: str) -> str:
    """NFKC, casefold, collapse whitespace, strip: differences no reader would call new.
    Whitespace is every character `str.isspace` accepts (the same as the regex `\\s`)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_key(ex: Any) -> str:
    """The normalised text of a row (an `Example`), or `pixels:<sha256>` for an image, whatever
    the file's encoding."""
    if ex.image is not None:
        return f"pixels:{ex.image.pixels_sha256}"
    return normalise(ex.text)


def digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8"), digest_size=DIGEST_BYTES).digest()


def text_digests(texts: Sequence[str]) -> np.ndarray:
    """`digest(normalise(text))` of each text, one row of `DIGEST_BYTES` bytes (uint8) each."""
    joined = b"".join(digest(normalise(t)) for t in texts)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(texts), DIGEST_BYTES)
