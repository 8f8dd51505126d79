"""Near-duplicates: MinHash signatures of word shingles, candidate pairs from MinHash LSH.

Text in, index pairs out; rows, splits and policy live in `dedup`. A text's tokens are its
words (runs of `\\w`, so punctuation does not count); a shingle is `size` consecutive
tokens, and a text with fewer tokens than that is one shingle, the whole text (a text
with no word at all is one token, itself). Two texts are near-duplicates when the
Jaccard similarity of their shingle sets, estimated from their MinHashes, reaches the
threshold.

The signatures are datasketch's `MinHash` (scheme `affine32`, seed `SEED`) with
`shingle_hash` as its hash function, computed for all texts at once with numpy rather
than one `MinHash.update_batch` call per text. Candidate pairs are those sharing a bucket
of a `MinHashLSH` (its bands and rows, tuned to miss few true pairs: a missed leak costs
more than checking a candidate), found by sorting band hashes with numpy rather than by
inserting every text. The test suite checks both shortcuts against datasketch itself
(same hash values, same candidates). A candidate is kept only if its estimated
similarity reaches the threshold.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH

from tunelab.data.batches import map_batches
from tunelab.data.words import tokens as tokens  # what a word is: `words`
from tunelab.data.words import word_hashes

SEED = 1
"""Seed of the MinHash permutations: fixed, so the same texts always give the same pairs."""
SCHEME = "affine32"
LSH_WEIGHTS = (0.05, 0.95)
"""False-positive and false-negative weights datasketch uses to choose the LSH bands: a
missed pair is worse than a checked candidate. At threshold 0.8 and 128 permutations this
gives 16 bands of 8 rows: a pair at similarity 0.8 is a candidate with probability 0.95
(0.40 with datasketch's default weights), one at 0.5 with probability 0.06."""
FULL_BUCKET = 32
"""Largest LSH bucket whose texts are all paired with each other (see `candidate_pairs`)."""
CHECK_PAIRS = 1 << 16
"""Candidate pairs compared at a time (bounds memory when there are very many)."""

BLOCK_SHINGLES = 1 << 16
"""Shingles per block when applying the permutations (measured: about twice as fast as
one pass per permutation over all shingles)."""

_MASK64 = (1 << 64) - 1


def shingles(toks: Sequence[str], size: int) -> list[tuple[str, ...]]:
    """Every run of `size` consecutive tokens; fewer tokens than that make one shingle."""
    if len(toks) <= size:
        return [tuple(toks)]
    return [tuple(toks[i : i + size]) for i in range(len(toks) - size + 1)]


def _position_multiplier(j: int) -> int:
    """An odd 64-bit constant for position j in a shingle (splitmix64 of j + 1)."""
    z = ((j + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) | 1


def _token_hash(token: str) -> int:
    return zlib.crc32(token.encode("utf-8"))


def shingle_hash(shingle: Sequence[str]) -> int:
    """32-bit hash of a shingle: each token's CRC-32 times a constant for its position,
    summed modulo 2**64, top 32 bits. The reference `signatures` must agree with."""
    total = 0
    for j, token in enumerate(shingle):
        total = (total + _token_hash(token) * _position_multiplier(j)) & _MASK64
    return total >> 32


def _shingle_hashes(texts: Sequence[str], size: int) -> tuple[np.ndarray, np.ndarray]:
    """`shingle_hash` of every shingle of every text, concatenated, and where each text's
    shingles start (one more entry than texts)."""
    words, lengths = word_hashes(texts)  # the CRC-32 of each word, as `_token_hash`
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    # A shingle starting at token p takes tokens p .. p+size-1, cut at the end of its text.
    end_of_text = np.repeat(starts[1:], lengths)
    position = np.arange(len(words), dtype=np.int64)
    total = np.zeros(len(words), dtype=np.uint64)
    for j in range(size):
        inside = position[: len(words) - j] + j < end_of_text[: len(words) - j]
        term = words[j:] * np.uint64(_position_multiplier(j))
        total[: len(words) - j] += np.where(inside, term, np.uint64(0))
    per_text = np.maximum(lengths - size + 1, 1)
    offset_in_text = position - np.repeat(starts[:-1], lengths)
    first = offset_in_text < np.repeat(per_text, lengths)
    hashes = (total[first] >> np.uint64(32)).astype(np.uint32)
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(per_text, out=bounds[1:])
    return hashes, bounds


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, which datasketch's affine32 scheme applies first."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def signatures(
    texts: Sequence[str],
    size: int,
    num_perm: int,
    prepare: Callable[[str], str] | None = None,
    workers: int | None = None,
) -> np.ndarray:
    """MinHash hash values of normalised texts, one row per text (uint32).

    Row i equals `MinHash(num_perm, seed=SEED, hashfunc=shingle_hash)` updated with
    `shingles(tokens(prepare(texts[i])), size)` (`prepare`, a module-level function such as
    `content.normalise`, is applied first where given). Computed a batch at a time, on
    `workers` processes for many texts (`batches.map_batches`).
    """
    args = (size, num_perm, prepare)
    return map_batches(_batch_signatures, texts, args, num_perm, np.uint32, workers)


def near_pairs(
    texts: Sequence[str],
    size: int,
    num_perm: int,
    threshold: float,
    prepare: Callable[[str], str] | None = None,
    workers: int | None = None,
) -> list[tuple[int, int, float]]:
    """`similar_pairs(signatures(texts, ...), threshold)`, holding only the LSH band keys of
    every text (`band_keys`: 8 bytes a band, 128 a text at the default settings, against 512
    for its signature); the signatures of the texts in a candidate pair are computed again to
    check them."""
    args = (size, num_perm, prepare, threshold)
    bands = lsh_params(threshold, num_perm)[0]
    ij = candidates_of_keys(map_batches(_batch_keys, texts, args, bands, np.uint64, workers))
    if not len(ij):
        return []
    rows = np.unique(ij)
    sigs = signatures([texts[i] for i in rows.tolist()], size, num_perm, prepare, workers)
    return [
        (int(rows[a]), int(rows[b]), s)
        for a, b, s in checked_pairs(np.searchsorted(rows, ij), sigs, threshold)
    ]


def _batch_keys(
    texts: Sequence[str],
    size: int,
    num_perm: int,
    prepare: Callable[[str], str] | None,
    threshold: float,
) -> np.ndarray:
    return band_keys(_batch_signatures(texts, size, num_perm, prepare), threshold)


def _batch_signatures(
    texts: Sequence[str], size: int, num_perm: int, prepare: Callable[[str], str] | None
) -> np.ndarray:
    """`signatures` of one batch, in this process."""
    if prepare is not None:
        texts = [prepare(t) for t in texts]
    out = np.empty((len(texts), num_perm), dtype=np.uint32)
    if not texts:
        return out
    hashes, bounds = _shingle_hashes(texts, size)
    mixed = _fmix32(hashes)
    a, b = _permutations(num_perm)
    first = 0
    while first < len(texts):  # a block of texts at a time, so the loop stays in cache
        last = int(np.searchsorted(bounds, bounds[first] + BLOCK_SHINGLES, side="right")) - 1
        last = min(max(last, first + 1), len(texts))
        block = mixed[bounds[first] : bounds[last]]
        starts = bounds[first:last] - bounds[first]
        for j in range(num_perm):
            out[first:last, j] = np.minimum.reduceat(block * a[j] + b[j], starts)
        first = last
    return out


@functools.cache
def _permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's affine32 permutations for SEED (the a and b of a*h + b)."""
    return MinHash(num_perm=num_perm, seed=SEED, scheme=SCHEME).permutations


def minhash(signature: np.ndarray) -> LeanMinHash:
    """A row of `signatures` as datasketch's MinHash (for `jaccard`, or a `MinHashLSH`)."""
    return LeanMinHash(seed=SEED, hashvalues=signature, scheme=SCHEME)


@functools.cache
def lsh_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """Bands and rows per band that datasketch's `MinHashLSH` picks for the threshold."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=LSH_WEIGHTS)
    return lsh.b, lsh.r


def band_keys(sigs: np.ndarray, threshold: float) -> np.ndarray:
    """A 64-bit hash of each LSH band of each signature (one column a band, `lsh_params`):
    two texts share a `MinHashLSH` bucket when all values of a band are equal, so when that
    band's keys are (a hash collision only adds a candidate, which is then checked)."""
    bands, rows = lsh_params(threshold, sigs.shape[1])
    mix = np.array([_position_multiplier(j) for j in range(rows)], dtype=np.uint64)
    keys = np.empty((len(sigs), bands), dtype=np.uint64)
    for band in range(bands):
        values = sigs[:, band * rows : (band + 1) * rows].astype(np.uint64)
        keys[:, band] = (values * mix).sum(axis=1, dtype=np.uint64)
    return keys


def candidate_pairs(sigs: np.ndarray, threshold: float) -> np.ndarray:
    """Pairs (i, j), i < j, sorted, that share at least one LSH bucket.

    The buckets are `MinHashLSH`'s: the same bands (`lsh_params`, consecutive slices of
    the hash values), a pair is a candidate when all values of one band are equal. The
    bands are matched by sorting a 64-bit hash of each band (`band_keys`) instead of
    inserting every text into a `MinHashLSH` (many times slower: see bench/README.md).
    """
    return candidates_of_keys(band_keys(sigs, threshold))


def candidates_of_keys(keys: np.ndarray) -> np.ndarray:
    """`candidate_pairs` from the band keys of every text (one row a text).

    A bucket of more than `FULL_BUCKET` texts (templated text: thousands of rows that
    share most of their words) gives only the pairs of its first text with each other
    one, so the work stays linear in the rows rather than quadratic.
    """
    n = len(keys)
    found: list[np.ndarray] = [np.empty((0, 2), dtype=np.int64)]
    if n < 2:
        return found[0]
    for band in range(keys.shape[1]):
        order = np.argsort(keys[:, band], kind="stable")  # within a bucket: rows in order
        ordered = keys[order, band]
        new = np.concatenate(([True], ordered[1:] != ordered[:-1]))
        bucket = np.cumsum(new) - 1
        size = np.bincount(bucket)[bucket]
        first = np.flatnonzero(new)[bucket]
        full = size <= FULL_BUCKET
        for step in range(1, min(FULL_BUCKET, n)):
            at = np.flatnonzero(full[:-step] & (bucket[:-step] == bucket[step:]))
            found.append(np.stack([order[at], order[at + step]], axis=1))
        star = np.flatnonzero(~full & ~new)
        found.append(np.stack([order[first[star]], order[star]], axis=1))
    return np.unique(np.concatenate(found), axis=0)


def similar_pairs(sigs: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Pairs (i, j, similarity), i < j, in order, whose estimated Jaccard similarity (the
    share of equal hash values, as `MinHash.jaccard` computes it) reaches the threshold."""
    return checked_pairs(candidate_pairs(sigs, threshold), sigs, threshold)


def checked_pairs(
    ij: np.ndarray, sigs: np.ndarray, threshold: float
) -> list[tuple[int, int, float]]:
    """The candidate pairs (rows of `sigs`) whose estimated similarity (the share of equal
    hash values) reaches the threshold; `near_datatrove` checks its candidates with it too."""
    out = []
    for start in range(0, len(ij), CHECK_PAIRS):
        chunk = ij[start : start + CHECK_PAIRS]
        equal = np.count_nonzero(sigs[chunk[:, 0]] == sigs[chunk[:, 1]], axis=1)
        similarity = equal / sigs.shape[1]
        keep = similarity >= threshold
        kept = zip(chunk[keep].tolist(), similarity[keep].tolist(), strict=True)
        out += [(i, j, s) for (i, j), s in kept]
    return out
