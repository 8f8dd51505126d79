"""Near-duplicate pairs found by HF's datatrove: the same MinHash LSH, in stages on disk.

`datatrove_pairs` keeps the contract of `near.similar_pairs(near.signatures(...))`: distinct
normalised texts in, pairs (i, j, similarity) out, i < j, in order, similarity the estimated
Jaccard similarity of the texts' word-shingle sets, every pair at or above the threshold.
It runs datatrove's MinHash deduplication under `workdir`, each stage reading the files the
one before wrote:

1. `documents/`: the texts as documents (id = index) in `workers` Parquet files (the empty
   text is left out: datatrove's readers skip a document without text, and it is never
   similar to another distinct text anyway).
2. `MinhashDedupSignature` -> `signatures/bucket_BBB/RANK.minhash.sig`: one task per file
   computes each document's MinHashes and writes them band by band, sorted.
3. `MinhashDedupBuckets` -> `buckets/BBBBB_00.dups`: one task per band merges the sorted
   files and writes each two documents whose values in that band are all equal.

Datatrove's last two stages (`MinhashDedupCluster`, `MinhashDedupFilter`) only say which
documents to drop; the duplicate report needs the pairs, so they are read from the `.dups`
files. A band bucket of k documents is written there as k - 1 pairs in a chain; as in
`near.candidate_pairs`, its documents are all paired with each other (above
`near.FULL_BUCKET` of them, each with the first only), and a candidate is kept when its
similarity, estimated from datatrove's own signature files (the share of equal MinHash
values, as `MinHash.jaccard` computes it), reaches the threshold.

The settings mirror the local engine (`MinhashConfig`):
- Bands and rows: `num_buckets` x `hashes_per_bucket` = `near.lsh_params(threshold,
  num_perm)`, so a pair of similarity s is a candidate with the same probability
  1 - (1 - s^rows)^bands in both engines (16 x 8 at threshold 0.8 and 128 permutations).
  datatrove computes bands x rows values, num_perm or a few fewer (21 x 6 = 126 at 0.7,
  26 x 3 = 78 at 0.5), so its estimate's standard error is sqrt(s(1-s)/(bands x rows)).
- Shingles: `n_grams = shingle` over `near.tokens` (`_Words`, given to datatrove as its word
  tokenizer), with datatrove's own text normalisation off (the texts come normalised), so
  both engines shingle the same words: datatrove's default English tokenizer (NLTK, which
  downloads its model) and normalisation (digits to 0, accents and punctuation removed)
  would pair different texts. A text of fewer words than `shingle` is one shingle, as in
  `near.shingles` (datatrove alone would give it none, and never pair it).
- Hashes: datatrove's own (SHA-1 of the shingle, 64 bits, then its random affine
  permutations modulo 2^61 - 1, seeded with `near.SEED`), not the local engine's CRC-32
  and datasketch permutations. Both estimate the same Jaccard similarity without bias, so
  the engines differ only by MinHash noise: a pair near the threshold may be kept by one
  and not the other. SHA-1 rather than datatrove's default xxhash: no further package.

Beyond one machine, the same steps run under datatrove's `SlurmPipelineExecutor` (each stage a
job array, chained with `depends=`) or `RayPipelineExecutor`, with the folders on storage
every node reaches (any fsspec path: s3://, hf://); tunelab itself runs datatrove's
`LocalPipelineExecutor`, `workers` processes on this machine, and reads the files back. Its
logs go to `logs/` under `workdir`, not to the terminal.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.data import near
from tunelab.data.batches import tell

WRITE_ROWS = 10_000
"""Documents written to datatrove's input a batch at a time (bounds the texts held)."""
FOLDERS = ("documents", "signatures", "buckets", "logs")
"""What a run writes under `workdir`; each is replaced by the next run."""
INSTALL = "pip install 'tunelab[datatrove]'"


@dataclass(frozen=True)
class _Words:
    """datatrove's word tokenizer for tunelab's shingles: `near.tokens`, padded with empty
    words to `size` so that a shorter text is one shingle (datatrove's n-grams of fewer
    words than n are none). A padded shingle ends in a space, so it is no other text's."""

    size: int

    def word_tokenize(self, text: str) -> list[str]:
        words = near.tokens(text)
        return words + [""] * (self.size - len(words))


def datatrove_pairs(
    texts: Sequence[str],
    shingle: int,
    num_perm: int,
    threshold: float,
    workdir: Path,
    workers: int = 1,
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, similarity), i < j, in order, of distinct normalised texts whose
    similarity, estimated from datatrove's MinHash signatures, reaches the threshold.

    datatrove's signature and bucket stages run in `workers` processes with files under
    `workdir` (see the module's docstring); the similarity is the share of equal values in
    the texts' datatrove signatures (bands x rows of them, `near.lsh_params`).
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    require_datatrove()
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupSignature
    from datatrove.pipeline.readers import ParquetReader

    present = np.array([i for i, text in enumerate(texts) if text], dtype=np.int64)
    if len(present) < 2:
        return []
    bands, rows = near.lsh_params(threshold, num_perm)
    config = _config(shingle, bands, rows)
    folder = {name: Path(workdir) / name for name in FOLDERS}
    for path in folder.values():
        if path.exists():
            shutil.rmtree(path)
    tell(f"datatrove: writing {len(present):,} documents")
    starts = _write_documents(texts, present, folder["documents"], workers)
    executor = _quiet_executor()
    tell(f"datatrove: MinHash signatures in {workers} worker(s)")
    signature = MinhashDedupSignature(
        str(folder["signatures"]), config=config, language=_Words(shingle)
    )
    executor(
        [ParquetReader(str(folder["documents"])), signature],
        tasks=len(starts) - 1,
        workers=workers,
        logging_dir=str(folder["logs"] / "signatures"),
        skip_completed=False,
    ).run()
    tell(f"datatrove: {bands} band buckets")
    buckets = MinhashDedupBuckets(str(folder["signatures"]), str(folder["buckets"]), config=config)
    executor(
        [buckets],
        tasks=bands,
        workers=workers,
        logging_dir=str(folder["logs"] / "buckets"),
        skip_completed=False,
    ).run()
    candidates = _candidates(folder["buckets"], present, starts)
    tell(f"datatrove: checking {len(candidates):,} candidate pairs")
    docs = np.unique(candidates)  # only a candidate's text needs its signature read back
    sigs = _signatures(folder["signatures"], present, starts, docs, bands, rows)
    found = near.checked_pairs(np.searchsorted(docs, candidates), sigs, threshold)
    return [(int(docs[i]), int(docs[j]), s) for i, j, s in found]


def require_datatrove() -> None:
    """Import datatrove (an extra), or say how to install it."""
    try:
        import datatrove.pipeline.dedup  # noqa: F401
    except ImportError as err:
        raise TunelabError(
            f"data.engine: datatrove needs the datatrove package ({err}); install it with "
            f"`{INSTALL}`, or use data.engine: local"
        ) from err


def _config(shingle: int, bands: int, rows: int) -> Any:
    """datatrove's `MinhashConfig` mirroring the local engine (see the module's docstring)."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.text import TextNormConfig
    from datatrove.utils.word_tokenizers import WordTokenizer

    WordTokenizer.register(_Words)  # datatrove accepts a WordTokenizer in place of a language
    off = TextNormConfig(
        lowercase=False,
        norm_whitespace=False,
        remove_punctuation=False,
        norm_unicode_diacritics=False,
        norm_numbers=False,
    )
    return MinhashConfig(
        n_grams=shingle,
        num_buckets=bands,
        hashes_per_bucket=rows,
        seed=near.SEED,
        norm_config=off,
        hash_config=HashConfig(precision=64, hash_fc="sha1"),
    )


@functools.cache
def _quiet_executor() -> type:
    """`LocalPipelineExecutor` whose tasks log to their files under the logging folder only,
    not to stderr (datatrove's tasks add a loguru handler on stderr each)."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.utils.logging import setup_default_logger

    class QuietLocalExecutor(LocalPipelineExecutor):
        def run(self):  # in this process: the executor's own lines, and tasks when workers=1
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    setup_default_logger()  # its handler on the redirected stderr
                    return super().run()
            finally:
                setup_default_logger()  # loguru's stderr handler as datatrove left it on import

        def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
            with contextlib.redirect_stderr(io.StringIO()):  # in a worker process
                return super()._run_for_rank(rank, local_rank, node_rank)

    QuietLocalExecutor.__module__ = __name__
    QuietLocalExecutor.__qualname__ = QuietLocalExecutor.__name__
    return QuietLocalExecutor


def __getattr__(name: str) -> Any:
    """`QuietLocalExecutor`, built on first use (datatrove is imported only then). Worker
    processes receive the executor pickled by reference, and find its class here."""
    if name == "QuietLocalExecutor":
        return _quiet_executor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _write_documents(
    texts: Sequence[str], present: np.ndarray, folder: Path, workers: int
) -> np.ndarray:
    """The non-empty texts in up to `workers` Parquet files of consecutive rows, the file of
    task r holding rows starts[r] .. starts[r + 1] - 1 of `present`; returns `starts`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    files = min(workers, len(present))
    starts = np.linspace(0, len(present), files + 1).round().astype(np.int64)
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    for rank in range(files):
        with pq.ParquetWriter(folder / f"{rank:05d}.parquet", schema) as writer:
            for at in range(starts[rank], starts[rank + 1], WRITE_ROWS):
                rows = present[at : min(at + WRITE_ROWS, starts[rank + 1])].tolist()
                texts_of = [texts[i] for i in rows]  # a batch at a time: not a file's texts
                writer.write_table(
                    pa.table({"id": [str(i) for i in rows], "text": texts_of}, schema=schema)
                )
    return starts


def _signatures(
    folder: Path,
    present: np.ndarray,
    starts: np.ndarray,
    docs: np.ndarray,
    bands: int,
    rows: int,
) -> np.ndarray:
    """datatrove's MinHash values of the texts `docs` (sorted), one row each, read back from
    its sorted per-band files: (rows values, document's place in its file). Only those of a
    candidate pair: every text's took 1 KB each (a gigabyte at a million texts)."""
    record = np.dtype([("values", "<u8", (rows,)), ("doc", "<u4")])
    sigs = np.zeros((len(docs), bands * rows), dtype=np.uint64)
    for band, rank in itertools.product(range(bands), range(len(starts) - 1)):
        found = np.fromfile(folder / f"bucket_{band:03d}" / f"{rank:05d}.minhash.sig", record)
        if len(found) != starts[rank + 1] - starts[rank]:
            raise RuntimeError(
                f"datatrove wrote {len(found)} signatures for band {band}, file {rank}, "
                f"expected one per document ({starts[rank + 1] - starts[rank]})"
            )
        index = present[starts[rank] + found["doc"].astype(np.int64)]
        at = np.searchsorted(docs, index)
        hit = at < len(docs)
        hit[hit] = docs[at[hit]] == index[hit]
        sigs[at[hit], band * rows : (band + 1) * rows] = found["values"][hit]
    return sigs


def _candidates(folder: Path, present: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Pairs (i, j), i < j, sorted, sharing a band bucket, from datatrove's `.dups` files:
    each (file, place, file, place) record chains two documents of one bucket."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    found = [np.empty((0, 2), dtype=np.int64)]
    for path in sorted(folder.glob("*.dups")):
        records = np.fromfile(path, dtype="<u4").reshape(-1, 4).astype(np.int64)
        if not len(records):
            continue
        a = present[starts[records[:, 0]] + records[:, 1]]
        b = present[starts[records[:, 2]] + records[:, 3]]
        nodes, at = np.unique(np.concatenate([a, b]), return_inverse=True)
        edges = coo_matrix((np.ones(len(a)), (at[: len(a)], at[len(a) :])), (len(nodes),) * 2)
        _, bucket = connected_components(edges, directed=False)
        order = np.argsort(bucket, kind="stable")  # nodes ascending within each bucket
        for members in np.split(nodes[order], np.flatnonzero(np.diff(bucket[order])) + 1):
            found.append(_bucket_pairs(members))
    return np.unique(np.concatenate(found), axis=0)


def _bucket_pairs(members: np.ndarray) -> np.ndarray:
    """Every pair of a bucket's texts (ascending), or above `near.FULL_BUCKET` of them
    each with the first, as `near.candidate_pairs` pairs them."""
    if len(members) > near.FULL_BUCKET:
        return np.stack([np.full(len(members) - 1, members[0]), members[1:]], axis=1)
    return np.array(list(itertools.combinations(members.tolist(), 2)), dtype=np.int64)
