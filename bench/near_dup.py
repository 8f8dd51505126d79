"""Near-duplicate detection on synthetic short documents: speed and recall.

    .venv/bin/python bench/near_dup.py [--docs 100000] [--planted 0.01] [--compare 5000]

Documents are 30-60 words drawn from a 30,000-word vocabulary with Zipf weights
(rank^-1.05); about 1% of them are planted near-copies of another document (one or two
words replaced, deleted or inserted). Rows are split 80/10/10 at random, so planted pairs
land inside train and across splits. The script times the near detector alone (and its
steps), then the whole `deduplicate` call (exact + near + policy), and prints recall on
the planted pairs whose true Jaccard similarity reaches the threshold, plus any reported
pair that was not planted. `--compare N` also times other ways to compute the MinHashes
on N documents (datasketch's `MinHash.bulk` with several hash functions).
Everything is seeded: the same command gives the same documents and pairs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from datasketch import MinHash, MinHashLSH

from tunelab.core.spec import DedupSpec
from tunelab.data import near
from tunelab.data.dedup import deduplicate, near_clusters, normalise
from tunelab.data.loaders import Example

SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "sh", "qu", "str"]


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 5))
        words.add("".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), n)))
    return sorted(words)


def make_documents(
    n: int, planted_share: float, seed: int
) -> tuple[list[str], list[tuple[int, int]]]:
    """n documents, the last `planted_share * n` of them near-copies of earlier ones; and
    the planted pairs (source index, copy index)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng, 30_000)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    n_planted = int(n * planted_share)
    n_base = n - n_planted
    lengths = rng.integers(30, 61, n_base)
    drawn = rng.choice(len(vocab), size=int(lengths.sum()), p=weights).tolist()
    docs: list[list[str]] = []
    at = 0
    for length in lengths.tolist():
        docs.append([vocab[i] for i in drawn[at : at + length]])
        at += length
    sources = rng.choice(n_base, size=n_planted, replace=False).tolist()
    pairs = []
    for source in sources:
        copy = list(docs[source])
        while copy == docs[source]:  # an edit that changes nothing would plant an exact copy
            copy = edited(copy, rng, vocab, weights)
        pairs.append((source, len(docs)))
        docs.append(copy)
    texts = [" ".join(words).capitalize() + "." for words in docs]
    return texts, pairs


def edited(
    words: list[str], rng: np.random.Generator, vocab: list[str], weights: np.ndarray
) -> list[str]:
    """One or two words replaced, deleted or inserted."""
    copy = list(words)
    for _ in range(int(rng.integers(1, 3))):
        where = int(rng.integers(0, len(copy)))
        edit = int(rng.integers(0, 3))
        new_word = vocab[int(rng.choice(len(vocab), p=weights))]
        if edit == 0:
            copy[where] = new_word
        elif edit == 1:
            del copy[where]
        else:
            copy.insert(where, new_word)
    return copy


def true_jaccard(a: str, b: str, size: int) -> float:
    sa = set(near.shingles(near.tokens(normalise(a)), size))
    sb = set(near.shingles(near.tokens(normalise(b)), size))
    return len(sa & sb) / len(sa | sb)


def split_rows(texts: list[str], seed: int) -> dict[str, list[Example]]:
    order = np.random.default_rng(seed + 1).permutation(len(texts)).tolist()
    n_train, n_val = int(0.8 * len(texts)), int(0.1 * len(texts))
    split_of = {}
    for rank, i in enumerate(order):
        split_of[i] = (
            "train" if rank < n_train else "validation" if rank < n_train + n_val else "test"
        )
    splits: dict[str, list[Example]] = {"train": [], "validation": [], "test": []}
    for i, text in enumerate(texts):
        splits[split_of[i]].append(Example(f"doc:{i}", text, "a", "bench", i))
    return splits


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def line(name: str, n: int, wall: float, cpu: float) -> None:
    print(f"  {name:<38} {wall:7.2f} s wall {cpu:7.2f} s cpu {n / wall:10,.0f} docs/s")


def compare_hashing(texts: list[str], spec: DedupSpec) -> None:
    """Other ways to the same kind of MinHash, on the first len(texts) documents."""
    shingled = [near.shingles(near.tokens(normalise(t)), spec.shingle) for t in texts]
    as_bytes = [[" ".join(s).encode() for s in doc] for doc in shingled]
    blake = lambda b: int.from_bytes(hashlib.blake2b(b, digest_size=4).digest(), "little")  # noqa: E731
    kw = {"num_perm": spec.num_perm, "seed": near.SEED}
    ways: dict[str, Callable[[], Any]] = {
        "MinHash.bulk, sha1_hash32 (default)": lambda: MinHash.bulk(as_bytes, **kw),
        "MinHash.bulk, blake2b 32-bit": lambda: MinHash.bulk(as_bytes, hashfunc=blake, **kw),
        "MinHash.bulk, shingle_hash": lambda: MinHash.bulk(
            shingled, hashfunc=near.shingle_hash, **kw
        ),
        "near.signatures (numpy, all at once)": lambda: near.signatures(
            [normalise(t) for t in texts], spec.shingle, spec.num_perm
        ),
    }
    print(f"MinHash signatures of {len(texts):,} documents (shingling done beforehand for bulk):")
    for name, fn in ways.items():
        _, wall, cpu = timed(fn)
        line(name, len(texts), wall, cpu)
    reference = MinHash.bulk(shingled, hashfunc=near.shingle_hash, **kw)
    fast = near.signatures([normalise(t) for t in texts], spec.shingle, spec.num_perm)
    same = all(np.array_equal(m.hashvalues, row) for m, row in zip(reference, fast, strict=True))
    print(f"  numpy signatures equal datasketch's MinHash hash values: {same}")

    print(f"LSH candidate pairs among {len(texts):,} documents:")

    def with_minhash_lsh() -> set[tuple[int, int]]:
        lsh = MinHashLSH(threshold=spec.threshold, num_perm=spec.num_perm, weights=near.LSH_WEIGHTS)
        minhashes = [near.minhash(row) for row in fast]
        for i, m in enumerate(minhashes):
            lsh.insert(i, m, check_duplication=False)
        return {(i, j) for i, m in enumerate(minhashes) for j in lsh.query(m) if i < j}

    by_index, wall, cpu = timed(with_minhash_lsh)
    line("MinHashLSH insert + query", len(texts), wall, cpu)
    by_sort, wall, cpu = timed(lambda: near.candidate_pairs(fast, spec.threshold))
    line("near.candidate_pairs (numpy band sort)", len(texts), wall, cpu)
    same = by_index == set(map(tuple, by_sort.tolist()))
    print(f"  same {len(by_index):,} candidate pairs as MinHashLSH: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--planted", type=float, default=0.01, help="share of planted near-copies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", type=int, default=0, help="also compare hashing on N docs")
    args = parser.parse_args()
    spec = DedupSpec()
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"load average {os.getloadavg()[0]:.1f}; threshold {spec.threshold}, "
        f"shingle {spec.shingle}, num_perm {spec.num_perm}"
    )
    texts, planted = make_documents(args.docs, args.planted, args.seed)
    splits = split_rows(texts, args.seed)
    n = len(texts)
    words = sum(len(t.split()) for t in texts) / n
    print(f"{n:,} documents, {words:.1f} words on average, {len(planted):,} planted near-copies")

    print("near detector, step by step:")
    normalised, wall, cpu = timed(lambda: [normalise(t) for t in texts])
    line("normalise", n, wall, cpu)
    sigs, wall, cpu = timed(lambda: near.signatures(normalised, spec.shingle, spec.num_perm))
    line("signatures (tokens, shingles, MinHash)", n, wall, cpu)
    _, wall, cpu = timed(lambda: near.similar_pairs(sigs, spec.threshold))
    line("LSH candidates + similarity check", n, wall, cpu)
    print("whole calls:")
    clusters, wall, cpu = timed(lambda: near_clusters(splits, spec))
    line("near_clusters (the detector alone)", n, wall, cpu)
    result, wall, cpu = timed(lambda: deduplicate(splits, spec))
    line("deduplicate (exact + near + policy)", n, wall, cpu)

    found = {frozenset(int(ex.id.split(":")[1]) for _, ex in c.members) for c in clusters}
    truth = [(a, b, true_jaccard(texts[a], texts[b], spec.shingle)) for a, b in planted]
    print("recall on planted pairs, by true Jaccard similarity of their shingle sets:")
    for lo, hi in (
        (spec.threshold, 1.01),
        (0.9, 1.01),
        (spec.threshold, 0.9),
        (0.0, spec.threshold),
    ):
        band = [frozenset((a, b)) in found for a, b, j in truth if lo <= j < hi]
        if band:
            label = f"[{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'}"
            print(f"  {label:<14} {sum(band):5,} / {len(band):5,} = {sum(band) / len(band):.3f}")
    missed = [(a, b) for a, b, j in truth if j >= spec.threshold and frozenset((a, b)) not in found]
    low_estimate = sum(np.mean(sigs[a] == sigs[b]) < spec.threshold for a, b in missed)
    print(
        f"  of the {len(missed)} missed at or above the threshold, {low_estimate} have a MinHash "
        f"estimate below it; {len(missed) - low_estimate} were not LSH candidates"
    )
    extra = found - {frozenset((a, b)) for a, b in planted}
    extra_j = sorted(true_jaccard(texts[a], texts[b], spec.shingle) for a, b in map(tuple, extra))
    low = sum(j < spec.threshold - 0.1 for j in extra_j)
    print(
        f"reported pairs not planted: {len(extra):,} "
        f"({low} of them below {spec.threshold - 0.1:.1f})"
    )
    print(
        f"duplicate pairs by kind: {{{', '.join(f'{k}: {v}' for k, v in result.counts().items())}}}"
    )
    print(f"train rows removed: {len(result.removed):,}")
    if args.compare:
        # a subset holding both sides of some planted pairs, so the LSH finds candidates
        pairs_in = [i for pair in planted[: args.compare // 20] for i in pair]
        rest = [i for i in range(n) if i not in set(pairs_in)][: args.compare - len(pairs_in)]
        compare_hashing([texts[i] for i in sorted(pairs_in + rest)], spec)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
