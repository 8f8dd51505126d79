"""Words and their CRC-32: numpy over ASCII bytes agrees with `re` and `zlib` word by word."""

from __future__ import annotations

import random
import zlib

import numpy as np

from tunelab.data.words import tokens, word_hashes


def one_at_a_time(texts: list[str]) -> tuple[list[int], list[int]]:
    words = [tokens(t) for t in texts]
    return [zlib.crc32(w.encode("utf-8")) for ws in words for w in ws], [len(w) for w in words]


def check(texts: list[str]) -> None:
    hashes, counts = word_hashes(texts)
    expected, expected_counts = one_at_a_time(texts)
    assert hashes.dtype == np.uint64 and counts.tolist() == expected_counts
    assert hashes.tolist() == expected


def test_awkward_texts_hash_as_word_by_word() -> None:
    check(
        [
            "hello, world! it's",
            "!!!",  # no word: the whole text is one
            "",
            "snake_case and CamelCase 42 x1 _",
            "naïve café über",  # not ASCII: the word-at-a-time way
            "a" * 5000 + " b",  # one very long word
            "   ",
            "tab\tnew\nline\x00nul",
            "ß straße ǅ",  # casefold-sensitive letters
        ]
    )
    check([])
    check(["?"])
    check(["é", ""])  # an empty text last, after a character of two bytes
    check(["", "€ x", ""])
    check(["only ascii words here"])


def test_random_texts_in_any_mix_hash_as_word_by_word() -> None:
    rng = random.Random(0)
    alphabet = "ab_Z9 .,;-\n\tç€中😀𝟘ǅ\u00a0"  # bytes 1 to 4; 𝟘 is a word character
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(500)]
    check(texts)
    check([t for t in texts if t.isascii()])
