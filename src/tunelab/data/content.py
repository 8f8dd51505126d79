"""What makes two rows the same example: the normalised text, or an image's decoded pixels.

Exact duplicates and label conflicts group rows by it, and the near-duplicate detector pairs
distinct ones. Each row's key is hashed once (`Example.content_digest`), so a million rows
are grouped by 16-byte digests rather than by second copies of their texts.

A conversation is keyed by its prompt, every turn before the answer (`key_text`), as any other
generative row is keyed by its input and not its target: the same prompt with two answers is a
label conflict, not two examples. The near-duplicate detector reads the prompt without its
system turns (`near_text`): one system prompt shared by a whole dataset made every pair of
short conversations look alike (a 27-word one left 2 of 140 distinct train rows). So a pair it
finds whose system turns differ and whose answers differ too is no duplicate
(`system_decides`): there the system prompt is what asks for the other answer.
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
    """The normalised `key_text` of a row (an `Example`), or `pixels:<sha256>` for an image,
    whatever the file's encoding."""
    if ex.image is not None:
        return f"pixels:{ex.image.pixels_sha256}"
    return normalise(key_text(ex))


def row_digest(row: dict) -> bytes:
    """`Example.content_digest` of a row as a version stores it (`Example.to_row`): the data
    step matches an earlier test split's rows by it where that version kept no digests."""
    if row.get("pixels_sha256"):
        return digest(f"pixels:{row['pixels_sha256']}")
    messages = row.get("messages")
    return digest(normalise(flatten(messages[:-1]) if messages else row.get("text", "")))


def key_text(ex: Any) -> str:
    """What says which rows are the same example: a conversation's prompt (its turns before the
    answer, the system's included, flattened as `Example.text` flattens them), else the text."""
    if ex.messages is None:
        return ex.text
    return flatten(ex.messages[:-1])


def near_text(ex: Any) -> str:
    """What the near-duplicate detector compares: a conversation's prompt without its system
    turns (shared by whole datasets, they outweigh short questions), else the text."""
    if ex.messages is None:
        return ex.text
    return flatten([t for t in ex.messages[:-1] if t["role"] != "system"])


def system_decides(a: Any, b: Any) -> bool:
    """Two conversations whose system turns differ and whose answers differ: the same question
    under two system prompts ("answer in French", "answer in one word") is two examples, not a
    near-duplicate pair (with one answer, it is a copy in another frame, and stays one)."""
    if a.messages is None or b.messages is None:
        return False

    def system(ex: Any) -> str:
        return normalise(flatten([t for t in ex.messages[:-1] if t["role"] == "system"]))

    answers_differ = normalise(a.messages[-1]["content"]) != normalise(b.messages[-1]["content"])
    return answers_differ and system(a) != system(b)


def flatten(turns: list[dict]) -> str:
    """A conversation's turns as one text (`Example.text`): `role: content`, a blank line
    between turns."""
    return "\n\n".join(f"{t['role']}: {t['content']}" for t in turns)


def digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8"), digest_size=DIGEST_BYTES).digest()


def text_digests(texts: Sequence[str]) -> np.ndarray:
    """`digest(normalise(text))` of each text, one row of `DIGEST_BYTES` bytes (uint8) each."""
    joined = b"".join(digest(normalise(t)) for t in texts)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(texts), DIGEST_BYTES)
