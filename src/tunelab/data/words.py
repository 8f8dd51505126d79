"""The words of a text, and the CRC-32 of every word of many texts at once (what `near` hashes
its shingles from).

A word is a run of `\\w` (so punctuation does not count); a text without one is one word,
itself. `word_hashes` gives `zlib.crc32` of each word's UTF-8 bytes, computed with numpy over
the texts' bytes: the words found where word bytes begin and end, and their CRC-32 a byte
position at a time for every word at once (only a text without a word goes through `re` and
`zlib`). Measured on a million news-length rows: see bench/README.md ("The data step as the
corpus grows").
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

_WORDS = re.compile(r"\w+")
_WORD_BYTE = np.zeros(256, dtype=bool)
"""The ASCII bytes `\\w` matches in a str pattern: letters, digits and the underscore."""
for _byte in b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz":
    _WORD_BYTE[_byte] = True


def _crc_table() -> np.ndarray:
    """The byte table of CRC-32 (reflected polynomial 0xEDB88320), as zlib uses."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


_CRC = _crc_table()


def tokens(normalised: str) -> list[str]:
    """The words of a normalised text; a text without any word is one token, itself."""
    return _WORDS.findall(normalised) or [normalised]


def word_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The CRC-32 of every word (`tokens`) of every text, concatenated in order (uint64), and
    how many words each text has."""
    hashes, found = _numpy_hashes(texts)
    # a text without a word is one word, itself: those few go a word at a time
    alone = np.flatnonzero(found == 0)
    alone_hashes, alone_counts = _python_hashes([texts[i] for i in alone.tolist()])
    counts = found.copy()
    counts[alone] = alone_counts
    starts = np.cumsum(counts) - counts
    out = np.empty(int(counts.sum()), dtype=np.uint64)
    out[_positions(starts, found)] = hashes
    out[_positions(starts[alone], alone_counts)] = alone_hashes
    return out, counts


def _positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Where the words of some texts go: text k's j-th word at `starts[k] + j`."""
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + within


def _python_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`word_hashes` a word at a time."""
    every = [word for text in texts for word in tokens(text)]
    counts = np.array([len(tokens(text)) for text in texts], dtype=np.int64)
    return np.fromiter((zlib.crc32(w.encode("utf-8")) for w in every), np.uint64), counts


def _numpy_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`word_hashes` with numpy over the texts' UTF-8 bytes; a text without a word counts 0
    here. Whether a character is a word one is the ASCII table's answer, or `str.isalnum`'s
    for each distinct other character (what `\\w` matches); its UTF-8 bytes share it."""
    if not texts:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    joined = "\0".join(texts)  # "\0" is no word character: no word runs across two texts
    chars = np.array([len(t) + 1 for t in texts])
    char_starts = np.cumsum(chars) - chars
    if joined.isascii():
        data = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        word, starts = _WORD_BYTE[data], char_starts
    else:
        data = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
        points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        in_word = _WORD_BYTE[np.minimum(points, 127)]
        other = points >= 128
        distinct = np.unique(points[other])
        isalnum = np.array([chr(c).isalnum() for c in distinct.tolist()], dtype=bool)
        in_word[other] = isalnum[np.searchsorted(distinct, points[other])]
        width = np.ones(len(points), dtype=np.int64)  # each character's UTF-8 bytes
        width[other] = 2 + (points[other] >= 0x800) + (points[other] >= 0x10000)
        word = np.repeat(in_word, width)
        starts = np.concatenate(([0], np.cumsum(width)))[char_starts]  # in bytes
    # where a run of word bytes begins and ends: the changes of the flag, padded with False
    changes = np.flatnonzero(np.diff(word, prepend=False, append=False))
    first, end = changes[0::2], changes[1::2]
    owner = np.searchsorted(starts, first, side="right") - 1
    return _crc32(data, first, end - first), np.bincount(owner, minlength=len(texts))


def _crc32(data: np.ndarray, first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`zlib.crc32` of each slice `data[first[i] : first[i] + lengths[i]]`, all at once: the
    slices longest first, so at byte k the ones still going are a prefix."""
    longest = int(lengths.max(initial=0))
    # a stable sort of small integers is a radix sort in numpy
    key = (longest - lengths).astype(np.uint16 if longest < 1 << 16 else np.int64)
    order = np.argsort(key, kind="stable")
    first, lengths = first[order], lengths[order]
    crc = np.full(len(first), 0xFFFFFFFF, dtype=np.uint32)
    going = np.searchsorted(-lengths, -np.arange(longest), side="left")
    for k, n in enumerate(going.tolist()):
        c = crc[:n]
        crc[:n] = _CRC[(c ^ data[first[:n] + k]) & 0xFF] ^ (c >> np.uint32(8))
    out = np.empty(len(first), dtype=np.uint64)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out
