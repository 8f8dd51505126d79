"""Duplicates inside train and across train/validation/test, and the policy applied.

A duplicate shared by train and an evaluation split inflates every score measured on it,
so the leakage report lists the pairs and the policy (by default the train copy goes).

Detection and policy are separate steps. A detector turns the split rows into clusters of
rows it considers the same text; pairing, counting and the policy then apply to every
detector's clusters unchanged. The exact detector clusters rows by a hash of the
normalised text. The near detector (MinHash LSH over word shingles, see `near`) returns
one two-row cluster per near-duplicate pair, with the pair's estimated Jaccard
similarity. It pairs only rows whose normalised texts differ, so an exact duplicate is
never reported a second time as a near one (and with `exact: false`, identical copies
are reported by neither). Under `drop_from_train`, a train row goes when it is a near
copy of a validation or test row, or of an earlier train row (in id order). In a large
group of mutually similar texts (templated rows), each is paired with the group's first
text only, not with every other (see `near.candidate_pairs`), so the counts stay linear.

Images (task image_classification) go through the same pairing, counting and policy. Their
exact detector clusters rows by decoded pixels (`content_key`: the same bytes, or the same
picture re-encoded losslessly), and their near detector (`near_image_clusters`) pairs
different pictures whose difference hashes are at most `image_hamming` bits apart (a resized
or re-compressed copy), with similarity 1 - distance / 64.
"""

from __future__ import annotations

import bisect
import os
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.spec import DedupSpec
from tunelab.core.store import SPLITS
from tunelab.data import near, near_images
from tunelab.data.content import (
    DIGEST_BYTES,
    content_key,
    near_text,
    normalise,
    system_decides,
)
from tunelab.data.loaders import Example
from tunelab.data.spill import Texts
from tunelab.data.split import Splits, in_id_order

__all__ = ["Cluster", "Dedup", "content_key", "deduplicate", "normalise", "pairs_of"]

Member = tuple[str, Example]
"""A row and the split it sits in."""


@dataclass
class Cluster:
    """Rows one detector considers the same text, in split order then id order."""

    method: str
    members: list[Member]
    similarity: float = 1.0
    """Estimated Jaccard similarity of the members' shingle sets (1.0 for exact copies)."""


Detector = Callable[[Splits, DedupSpec], list[Cluster]]
"""Split rows and the dedup settings -> clusters (the settings may be left out)."""
_SPACES = re.compile(r"\s+")
SNIPPET_CHARS = 80


class _Rows(Sequence[Member]):
    """Every row, in split order then id order (the order clusters list their members), as
    (split, example) when asked for: one list of the examples and where each split ends, not
    a tuple per row (a million rows' tuples were about 60 MB at the data step's peak)."""

    def __init__(self, splits: Splits):
        self.examples: list[Example] = []
        self._ends: list[int] = []  # where each split of SPLITS ends in `examples`
        for split in SPLITS:
            self.examples += in_id_order(splits.get(split, []))
            self._ends.append(len(self.examples))

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> Member:  # a row at a time: no caller slices
        if not 0 <= i < len(self.examples):
            raise IndexError(i)
        return SPLITS[bisect.bisect_right(self._ends, i)], self.examples[i]


def _copies(rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """Which distinct content each row has: `text[r]` numbers the distinct contents in the
    order of their first row, and `first[t]` is the first row of content t. Rows are grouped
    by their 16-byte digests in numpy, not by a dict of a list per row."""
    if not rows:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    digests = b"".join(ex.content_digest for ex in rows.examples)
    digests = np.frombuffer(digests, dtype=f"S{DIGEST_BYTES}")
    _, first, inverse = np.unique(digests, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the distinct contents in order of first row
    number = np.empty_like(order)
    number[order] = np.arange(len(order))
    return number[inverse.reshape(-1)], first[order]


def _rows_of(text: np.ndarray, wanted: np.ndarray) -> dict[int, list[int]]:
    """The rows (in order) of each distinct content in `wanted`."""
    out: dict[int, list[int]] = defaultdict(list)
    for r in np.flatnonzero(np.isin(text, wanted)).tolist():
        out[int(text[r])].append(r)
    return out


def exact_clusters(splits: Splits, spec: DedupSpec | None = None) -> list[Cluster]:
    """One cluster per content (normalised text, or picture) that more than one row has, in
    the order of its first row."""
    rows = _Rows(splits)
    text, _ = _copies(rows)
    repeated = np.flatnonzero(np.bincount(text, minlength=1) > 1)
    copies = _rows_of(text, repeated)
    return [Cluster("exact", [rows[r] for r in copies[t]]) for t in repeated.tolist()]


def near_clusters(splits: Splits, spec: DedupSpec | None = None) -> list[Cluster]:
    """One cluster per pair of rows whose normalised texts differ but whose estimated
    Jaccard similarity reaches `spec.threshold`, in the order of their rows."""
    spec = spec or DedupSpec()

    def pairs(texts: Sequence[str]) -> list[tuple[int, int, float]]:
        return near.near_pairs(texts, spec.shingle, spec.num_perm, spec.threshold, normalise)

    return _text_clusters(splits, pairs)


def near_datatrove_clusters(
    splits: Splits, spec: DedupSpec | None = None, scratch: Path | None = None
) -> list[Cluster]:
    """`near_clusters` with the pairs found by datatrove's MinHash pipeline (`data.engine:
    datatrove`), its stages' files in a temporary folder removed afterwards: a hidden `.tmp`
    one in `scratch` (the lab's store, where `fsck` names what a killed step left), else the
    system's temporary folder."""
    from tunelab.data.near_datatrove import datatrove_pairs

    spec = spec or DedupSpec()
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    where = {"dir": scratch, "prefix": ".datatrove-", "suffix": ".tmp"} if scratch else {}

    def pairs(texts: Sequence[str]) -> list[tuple[int, int, float]]:
        normalised = _Normalised(texts)  # as read: every text at once is a corpus in memory
        with tempfile.TemporaryDirectory(**(where or {"prefix": "tunelab-datatrove-"})) as work:
            return datatrove_pairs(
                normalised, spec.shingle, spec.num_perm, spec.threshold, Path(work), _cores()
            )

    return _text_clusters(splits, pairs)


@dataclass(frozen=True)
class _Normalised(Sequence):
    """The texts, each normalised as it is read (`normalise`), none kept."""

    texts: Sequence[str]

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i):
        return normalise(self.texts[i])

    def __iter__(self):
        return (normalise(t) for t in self.texts)


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _text_clusters(
    splits: Splits, find_pairs: Callable[[Sequence[str]], list[tuple[int, int, float]]]
) -> list[Cluster]:
    """The near clusters of the rows from the pairs `find_pairs` finds among their distinct
    texts (one text per normalised text, in row order): every copy of one text of a pair
    with every copy of the other; not two conversations whose system turns ask for their two
    answers (`content.system_decides`)."""
    rows = _Rows(splits)
    text, first = _copies(rows)
    distinct = [rows.examples[r] for r in first.tolist()]
    pairs = find_pairs(Texts(distinct, near_text))  # as asked
    pairs = [(a, b, s) for a, b, s in pairs if not system_decides(distinct[a], distinct[b])]
    copies = _rows_of(text, np.array([t for a, b, _ in pairs for t in (a, b)], dtype=np.int64))
    clusters = []
    for a, b, similarity in pairs:
        for i in copies[a]:
            for j in copies[b]:
                first_row, second = sorted((i, j))
                clusters.append((first_row, second, round(similarity, 3)))
    return [Cluster("near", [rows[i], rows[j]], s) for i, j, s in sorted(clusters)]


def near_image_clusters(splits: Splits, spec: DedupSpec | None = None) -> list[Cluster]:
    """One cluster per pair of rows whose pictures differ but whose difference hashes are at
    most `spec.image_hamming` bits apart, in the order of their rows."""
    spec = spec or DedupSpec()
    rows = _Rows(splits)
    by_picture: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(rows.examples):
        by_picture[content_key(ex)].append(i)
    firsts = [members[0] for members in by_picture.values()]  # one row per distinct picture
    hashes = near_images.as_ints([rows.examples[i].image.dhash for i in firsts])
    pictures = list(by_picture.values())
    clusters = []
    for a, b, distance in near_images.close_pairs(hashes, spec.image_hamming):
        for i in pictures[a]:
            for j in pictures[b]:
                first, second = sorted((i, j))
                clusters.append((first, second, round(1 - distance / near_images.BITS, 3)))
    return [Cluster("near", [rows[i], rows[j]], s) for i, j, s in sorted(clusters)]


DETECTORS: dict[str, Detector] = {
    "exact": exact_clusters,
    "near": near_clusters,
    "near_datatrove": near_datatrove_clusters,
    "near_image": near_image_clusters,
}


def detectors_for(spec: DedupSpec, images: bool = False, engine: str = "local") -> list[str]:
    """The detectors the spec turns on, in a fixed order (images: their own near one; text
    near-duplicates found by `engine`, `data.engine`)."""
    near_name = "near_image" if images else ("near_datatrove" if engine == "datatrove" else "near")
    return [name for name, on in (("exact", spec.exact), (near_name, spec.near)) if on]


def pairs_of(cluster: Cluster) -> list[dict[str, Any]]:
    """Pairs that describe a cluster without listing all n² of them: within each split,
    every later copy against the first; across splits, the first copies of each two splits.

    The snippet comes from a train or validation row: the sealed test split's text is
    never shown, so a pair of two test rows has no snippet.
    """
    firsts: dict[str, Example] = {}
    pairs = []
    for split, ex in cluster.members:
        if split in firsts:
            pairs.append(_pair(cluster, (split, firsts[split]), (split, ex)))
        else:
            firsts[split] = ex
    present = [s for s in SPLITS if s in firsts]
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            pairs.append(_pair(cluster, (a, firsts[a]), (b, firsts[b])))
    return pairs


def _pair(cluster: Cluster, a: Member, b: Member) -> dict[str, Any]:
    method, similarity = cluster.method, cluster.similarity
    shown = next((_shown(ex) for s, ex in (a, b) if s != "test"), None)
    snippet = None if shown is None else _snippet(shown)
    sides = {"a": {"id": a[1].id, "split": a[0]}, "b": {"id": b[1].id, "split": b[0]}}
    if a[1].source != b[1].source:  # a copy across sources: which source each side is from
        sides["a"]["source"], sides["b"]["source"] = a[1].source, b[1].source
    return {
        "kind": f"{a[0]}-{b[0]}",
        "method": method,
        "similarity": similarity,
        **sides,
        "snippet": snippet,
    }


def _shown(ex: Example) -> str:
    """What a pair shows of a row: its text, or an image's file."""
    return ex.text if ex.image is None else ex.image.file


def _snippet(text: str) -> str:
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1] + "…"


def to_drop(cluster: Cluster) -> list[str]:
    """Ids of train rows the `drop_from_train` policy removes from this cluster: every
    train copy if the text is also in validation or test, else all but the first."""
    train = [ex.id for split, ex in cluster.members if split == "train"]
    in_eval = any(split != "train" for split, _ in cluster.members)
    return train if in_eval else train[1:]


@dataclass
class Dedup:
    splits: Splits
    """The splits after the policy."""
    pairs: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    """Ids of the train rows removed, in id order."""

    def counts(self) -> dict[str, int]:
        """Pairs by kind: exact ones under the kind (`train-validation`), the others under
        method and kind (`near:train-validation`)."""
        out: dict[str, int] = {}
        for pair in self.pairs:
            key = pair["kind"] if pair["method"] == "exact" else f"{pair['method']}:{pair['kind']}"
            out[key] = out.get(key, 0) + 1
        return out


def deduplicate(
    splits: Splits,
    spec: DedupSpec,
    images: bool = False,
    engine: str = "local",
    scratch: Path | None = None,
) -> Dedup:
    """Find duplicates with every detector the spec turns on, then apply its policy. `images`:
    the rows are images (task image_classification); `engine`: what finds near-duplicate
    texts (`data.engine`); `scratch`: where an engine that works on disk keeps its files."""
    detectors = detectors_for(spec, images, engine)
    found = {**DETECTORS, "near_datatrove": partial(near_datatrove_clusters, scratch=scratch)}
    clusters = [c for name in detectors for c in found[name](splits, spec)]
    pairs = [p for c in clusters for p in pairs_of(c)]
    drop: set[str] = set()
    if spec.policy == "drop_from_train":
        drop = {i for c in clusters for i in to_drop(c)}
    kept = {
        split: [ex for ex in rows if split != "train" or ex.id not in drop]
        for split, rows in splits.items()
    }
    removed = [ex.id for ex in splits.get("train", []) if ex.id in drop]
    for pair in pairs:
        pair["action"] = _action(pair, drop, spec.policy)
    return Dedup(kept, pairs, removed)


def _action(pair: dict[str, Any], drop: set[str], policy: str) -> str:
    """What the policy did about this pair, in words."""
    gone = [m["id"] for m in (pair["a"], pair["b"]) if m["split"] == "train" and m["id"] in drop]
    if gone:
        return "removed from train: " + ", ".join(gone)
    if policy == "report":
        return "reported only (policy report)"
    return "kept: no train copy to remove" if "train" not in pair["kind"] else "kept (first copy)"


def held_out_copies(pairs: list[dict[str, Any]], sizes: dict[str, int]) -> str | None:
    """A warning when exact copies stay within or between validation and test: the policy
    removes train's copies only, so the sealed test split counts such an example twice and
    validation, which chooses the run, shares it with the test. `sizes`: each split's rows,
    to say what share of a split repeats a row before it (each later copy in a split is one
    pair with its first, `pairs_of`)."""
    exact = [p for p in pairs if p["method"] == "exact"]
    kept = Counter(
        "-".join((p["a"]["split"], p["b"]["split"]))
        for p in exact
        if "train" not in (p["a"]["split"], p["b"]["split"])
    )
    if not kept:
        return None
    shown = ", ".join(f"{kind} {n:,}" for kind, n in sorted(kept.items()))
    shares = [
        f"{kept[f'{s}-{s}']:,} of {s}'s {sizes[s]:,} rows ({kept[f'{s}-{s}'] / sizes[s]:.1%})"
        for s in ("validation", "test")
        if kept.get(f"{s}-{s}") and sizes.get(s)
    ]
    repeats = f"; {' and '.join(shares)} repeat a row before them in their split" if shares else ""
    return (
        f"exact copies kept outside train ({shown} pairs{repeats}): dedup removes train's "
        "copies only, so the sealed test split counts such an example more than once, and "
        "validation, which chooses the run, shares some of the test's; the pairs are in the "
        "duplicates file. Remove the copies from the sources to count each once"
    )
