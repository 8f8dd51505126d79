"""Near-duplicate images: pairs of 64-bit difference hashes within a Hamming distance.

Hashes in, index pairs out; rows, splits and policy live in `dedup` (as `near` is for texts).
The search is exact and avoids comparing every pair: split the 64 bits into `max_distance + 1`
bands; two hashes that differ in at most `max_distance` bits agree entirely on at least one
band (pigeonhole), so the candidates are the pairs that share a band's value, and each is then
checked by its full distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

BITS = 64
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def as_ints(hex_hashes: Sequence[str]) -> np.ndarray:
    """Hex difference hashes as unsigned 64-bit integers."""
    return np.array([int(h, 16) for h in hex_hashes], dtype=np.uint64)


def distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamming distances between two equally long arrays of 64-bit hashes."""
    xor = np.ascontiguousarray(np.bitwise_xor(a, b), dtype=np.uint64)
    return _POPCOUNT[xor.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.int64)


def _band_pairs(keys: np.ndarray) -> np.ndarray:
    """Pairs (i, j), i < j, of positions whose keys are equal."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    found = [np.empty((0, 2), dtype=np.int64)]
    step = 1
    while step < len(keys):
        at = np.flatnonzero(ordered[:-step] == ordered[step:])
        if not len(at):  # no run of equal keys is longer than `step`
            break
        found.append(np.sort(np.stack([order[at], order[at + step]], axis=1), axis=1))
        step += 1
    return np.concatenate(found)


def close_pairs(hashes: np.ndarray, max_distance: int) -> list[tuple[int, int, int]]:
    """Pairs (i, j, distance), i < j, in order, of hashes at most `max_distance` bits apart."""
    if len(hashes) < 2:
        return []
    bands = min(max_distance + 1, BITS)
    edges = np.linspace(0, BITS, bands + 1).round().astype(int).tolist()
    found = []
    for low, high in pairwise(edges):
        mask = np.uint64((1 << (high - low)) - 1)
        found.append(_band_pairs((hashes >> np.uint64(low)) & mask))
    ij = np.unique(np.concatenate(found), axis=0)
    if not len(ij):
        return []
    apart = distances(hashes[ij[:, 0]], hashes[ij[:, 1]])
    keep = apart <= max_distance
    return [(int(i), int(j), int(d)) for (i, j), d in zip(ij[keep], apart[keep], strict=True)]
