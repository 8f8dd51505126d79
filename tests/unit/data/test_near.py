"""Near duplicates: MinHash LSH over word shingles, beside exact detection, same policy."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from datasketch import MinHash, MinHashLSH

from tunelab.core.spec import DedupSpec, validate_spec
from tunelab.core.store import Store
from tunelab.data import batches, build_data, near
from tunelab.data.dedup import DETECTORS, deduplicate, normalise
from tunelab.data.loaders import Example

VOCAB = [
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti", "va", "ze")
    for b in ("ban", "cor", "dil", "fen", "gor", "hal", "jin", "kel", "lum", "mor")
]


def text(seed: int, words: int = 40) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCAB) for _ in range(words)).capitalize() + "."


def changed(original: str, at: int, word: str = "zzz") -> str:
    """The text with the word at position `at` replaced."""
    words = original.split()
    words[at] = word
    return " ".join(words)


def jaccard(a: str, b: str, size: int = 3) -> float:
    sa = set(near.shingles(near.tokens(normalise(a)), size))
    sb = set(near.shingles(near.tokens(normalise(b)), size))
    return len(sa & sb) / len(sa | sb)


def ex(id_: str, text_: str, label: str = "a") -> Example:
    return Example(id_, text_, label, "f", None)


def splits_of(**parts: list[Example]) -> dict[str, list[Example]]:
    return {s: parts.get(s, []) for s in ("train", "validation", "test")}


def kept_ids(result) -> dict[str, list[str]]:
    return {s: [e.id for e in rows] for s, rows in result.splits.items()}


def planted() -> dict[str, list[Example]]:
    """Three ~40-word texts, each with a near copy: one inside train, one in validation,
    one in test; and unrelated rows in every split."""
    a, b, c = text(1), text(2), text(3)
    return splits_of(
        train=[
            ex("f:10", a),
            ex("f:9", changed(a, 20)),  # first in id order (9 < 10): f:10 is the later copy
            ex("f:11", b),
            ex("f:12", c),
            ex("f:13", text(4)),
            ex("f:14", text(5)),
        ],
        validation=[ex("v:1", changed(b, 5)), ex("v:2", text(6))],
        test=[ex("s:1", changed(c, 30, "qqq")), ex("s:2", text(7))],
    )


def test_tokens_and_shingles() -> None:
    assert near.tokens("hello, world! it's") == ["hello", "world", "it", "s"]
    assert near.tokens("!!!") == ["!!!"] and near.tokens("") == [""]
    assert near.shingles(["a", "b", "c", "d"], 3) == [("a", "b", "c"), ("b", "c", "d")]
    assert near.shingles(["a", "b"], 3) == [("a", "b")]  # shorter: the whole text
    assert near.shingles(["a", "b", "c"], 3) == [("a", "b", "c")]


def test_normalise_collapses_every_unicode_space() -> None:
    spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    assert len(spaces) > 20
    assert normalise("".join(spaces) + "a" + "".join(spaces) + "B" + "".join(spaces)) == "a b"


def test_signatures_are_datasketch_minhashes() -> None:
    texts = [normalise(t) for t in (text(1), "Hello, world!", "one", "", "?!", "a b c d")]
    for size, num_perm in ((1, 16), (3, 128), (5, 64)):
        sigs = near.signatures(texts, size, num_perm)
        assert sigs.shape == (len(texts), num_perm)
        for row, t in zip(sigs, texts, strict=True):
            m = MinHash(num_perm=num_perm, seed=near.SEED, hashfunc=near.shingle_hash)
            m.update_batch(near.shingles(near.tokens(t), size))
            assert np.array_equal(m.hashvalues, row)
    sigs = near.signatures(texts[:2], 3, 128)
    estimate = near.minhash(sigs[0]).jaccard(near.minhash(sigs[1]))
    assert estimate == np.count_nonzero(sigs[0] == sigs[1]) / 128


def test_batches_and_worker_processes_give_the_same_signatures(monkeypatch) -> None:
    """A million rows are hashed in batches, shared among processes, and normalised as they
    go: every row's signature is the one computed in one piece."""
    raw = [text(i, words=5 + i % 30).upper() + "  \u00a0x" for i in range(50)]
    raw += [changed(raw[i], 2) for i in range(0, 50, 5)]  # near copies
    whole = near.signatures([normalise(t) for t in raw], 3, 64)
    pairs = near.similar_pairs(whole, 0.5)
    monkeypatch.setattr(batches, "BATCH_TEXTS", 7)
    monkeypatch.setattr(batches, "PARALLEL_FROM", 1)
    in_batches = near.signatures(raw, 3, 64, prepare=normalise, workers=1)
    in_processes = near.signatures(raw, 3, 64, prepare=normalise, workers=2)
    assert np.array_equal(in_batches, whole)
    assert np.array_equal(in_processes, whole)
    # only the band keys kept, the candidates' signatures computed again: the same pairs
    assert pairs and near.near_pairs(raw, 3, 64, 0.5, normalise, workers=2) == pairs
    assert batches.worker_peak_kib() > 0


def test_candidates_are_the_minhash_lsh_buckets() -> None:
    base = [text(i) for i in range(150)]
    texts = [normalise(t) for t in base + [changed(t, 7) for t in base[:30]]]
    sigs = near.signatures(texts, 3, 128)
    lsh = MinHashLSH(threshold=0.8, num_perm=128, weights=near.LSH_WEIGHTS)
    minhashes = [near.minhash(row) for row in sigs]
    for i, m in enumerate(minhashes):
        lsh.insert(i, m)
    expected = {(i, j) for i, m in enumerate(minhashes) for j in lsh.query(m) if i < j}
    assert {tuple(p) for p in near.candidate_pairs(sigs, 0.8).tolist()} == expected
    assert len(expected) >= 25  # most of the 30 copies (LSH may miss a few)


def test_a_pair_at_exactly_the_threshold_is_a_near_duplicate() -> None:
    """data.dedup.threshold is reached, not passed: 96 of 128 hash values equal is 0.75."""
    sigs = np.arange(3 * 128, dtype=np.uint64).reshape(3, 128)
    sigs[1, :96] = sigs[0, :96]  # 0.75 of row 0
    sigs[2, :95] = sigs[0, :95]  # just under
    pairs = near.checked_pairs(np.array([[0, 1], [0, 2]]), sigs, 0.75)
    assert pairs == [(0, 1, 0.75)]


def test_planted_near_copies_are_found_across_splits_and_inside_train() -> None:
    splits = planted()
    result = deduplicate(splits, DedupSpec())
    assert result.counts() == {
        "near:train-train": 1,
        "near:train-validation": 1,
        "near:train-test": 1,
    }
    pairs = {p["kind"]: p for p in result.pairs}
    assert pairs["train-train"]["a"] == {"id": "f:9", "split": "train"}
    assert pairs["train-train"]["b"] == {"id": "f:10", "split": "train"}
    assert pairs["train-validation"]["b"] == {"id": "v:1", "split": "validation"}
    assert pairs["train-test"]["b"] == {"id": "s:1", "split": "test"}
    for pair in result.pairs:
        assert pair["method"] == "near"
        assert 0.8 <= pair["similarity"] < 1 and pair["similarity"] == round(pair["similarity"], 3)
    a, b = (e.text for e in splits["train"][:2])
    assert abs(pairs["train-train"]["similarity"] - jaccard(a, b)) < 0.1
    # drop_from_train: the train side of a leak, and the later copy inside train
    assert sorted(result.removed) == ["f:10", "f:11", "f:12"]
    assert kept_ids(result) == {
        "train": ["f:9", "f:13", "f:14"],
        "validation": ["v:1", "v:2"],
        "test": ["s:1", "s:2"],
    }


def test_unrelated_texts_are_not_flagged() -> None:
    rows = [ex(f"f:{i}", text(100 + i)) for i in range(300)]
    shared_start = [ex(f"g:{i}", text(1, 20) + " " + text(200 + i, 20)) for i in range(5)]
    result = deduplicate(splits_of(train=rows, validation=shared_start), DedupSpec())
    assert result.pairs == [] and result.removed == []


def test_punctuation_and_case_only_differences_are_near_with_similarity_one() -> None:
    splits = splits_of(
        train=[ex("t1", "The movie was great!")], test=[ex("s1", "the movie, was great.")]
    )
    [pair] = deduplicate(splits, DedupSpec()).pairs
    assert pair["kind"] == "train-test" and pair["method"] == "near"
    assert pair["similarity"] == 1.0 and pair["snippet"] == "The movie was great!"


def test_exact_duplicates_are_not_reported_again_as_near() -> None:
    a = text(1)
    splits = splits_of(
        train=[ex("t1", a), ex("t2", a.upper()), ex("t3", text(2))],
        validation=[ex("v1", changed(a, 12))],
    )
    result = deduplicate(splits, DedupSpec())
    assert result.counts() == {"train-train": 1, "near:train-validation": 2}
    assert {(p["method"], p["a"]["id"], p["b"]["id"]) for p in result.pairs} == {
        ("exact", "t1", "t2"),
        ("near", "t1", "v1"),
        ("near", "t2", "v1"),
    }
    assert sorted(result.removed) == ["t1", "t2"]
    # identical texts are the exact detector's: with it off, neither detector pairs them
    off = deduplicate(splits, DedupSpec(exact=False))
    assert off.counts() == {"near:train-validation": 2}


def test_near_off_finds_none() -> None:
    result = deduplicate(planted(), DedupSpec(near=False))
    assert result.pairs == [] and result.removed == []


def test_report_policy_removes_nothing() -> None:
    result = deduplicate(planted(), DedupSpec(policy="report"))
    assert len(result.pairs) == 3 and result.removed == []


def test_threshold_and_shingle_size_come_from_the_spec() -> None:
    a = text(1)
    b = changed(changed(a, 10), 25)  # two words apart: about 0.73 with 3-word shingles
    assert 0.65 < jaccard(a, b) < 0.8
    splits = splits_of(train=[ex("t1", a)], validation=[ex("v1", b)])
    assert deduplicate(splits, DedupSpec()).pairs == []
    assert len(deduplicate(splits, DedupSpec(threshold=0.6)).pairs) == 1
    assert len(deduplicate(splits, DedupSpec(shingle=1)).pairs) == 1  # 1-word shingles: ~0.95
    near_only = DETECTORS["near"](splits, DedupSpec(threshold=0.6, num_perm=32))
    assert len(near_only) == 1 and near_only[0].method == "near"


def test_results_do_not_depend_on_runs_or_row_order() -> None:
    first = deduplicate(planted(), DedupSpec())
    shuffled = planted()
    for rows in shuffled.values():
        random.Random(0).shuffle(rows)
    second = deduplicate(shuffled, DedupSpec())
    assert first.pairs == second.pairs and sorted(first.removed) == sorted(second.removed)
    assert (
        near.signatures([text(1)], 3, 128).tobytes() == near.signatures([text(1)], 3, 128).tobytes()
    )


def test_pipeline_reports_near_pairs_and_accounts_for_every_row(tmp_path: Path) -> None:
    a, b = text(1), text(2)
    files = {
        "train": [{"text": t, "label": "x"} for t in (a, changed(a, 15), b, text(3))]
        + [{"text": text(4), "label": "y"}],  # a classifier needs two labels
        "val": [{"text": changed(b, 3), "label": "x"}, {"text": text(5), "label": "y"}],
        "test": [{"text": text(6), "label": "x"}],
    }
    sources = []
    for name, rows in files.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        split = "validation" if name == "val" else name
        sources.append({"type": "jsonl", "path": f"{name}.jsonl", "split": split})
    spec = validate_spec({"data": {"sources": sources}, "model": {"path": "x"}})
    report = build_data(spec, tmp_path, Store(tmp_path))
    dups = report["duplicates"]
    assert dups["counts"] == {"near:train-train": 1, "near:train-validation": 1}
    assert {p["method"] for p in dups["pairs"]} == {"near"}
    assert report["duplicates_removed"] == dups["removed"] == 2
    every = [json.loads(line) for line in (tmp_path / dups["pairs_file"]).read_text().splitlines()]
    assert every == dups["pairs"] and dups["pairs_total"] == 2
    assert all(p["action"].startswith("removed from train: ") for p in every)
    assert (
        report["rows_read"]
        == 8
        == (report["kept"] + report["quarantined"] + report["duplicates_removed"])
    )
    off = validate_spec(
        {"data": {"sources": sources, "dedup": {"near": False}}, "model": {"path": "x"}}
    )
    report_off = build_data(off, tmp_path, Store(tmp_path))
    assert report_off["duplicates"]["counts"] == {} and report_off["version"] != report["version"]
