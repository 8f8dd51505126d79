"""datatrove's MinHash pipeline against the local engine: the same pairs, up to MinHash noise.

The corpus is seeded: 120-word texts drawn from 2,000 made-up words (unrelated texts share no
3-word shingle), and near copies of some of them with 1 to 10 words replaced at random
places, so the planted pairs' Jaccard similarities spread from about 0.95 to 0.55 around the
threshold 0.8. Two engines estimating the same similarity from different random
permutations may disagree on a pair only near the threshold: the test allows a disagreement
within NOISE standard errors of a MinHash estimate, sqrt(s(1-s)/k) with k the values datatrove
compares (bands x rows = 128 here), and requires every pair above that band from both.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from tunelab.core.errors import TunelabError
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data import build_data, near, pipeline
from tunelab.data.near_datatrove import INSTALL, datatrove_pairs
from tunelab.views.data import data as data_view

SHINGLE, NUM_PERM, THRESHOLD = 3, 128, 0.8
NOISE = 3.0
"""Standard errors of a MinHash estimate within which the engines may disagree on a pair."""
WORDS = 120
VOCAB = [f"{a}{b}{c}" for a in "bdfgklmnprstvz" for b in "aeiou" for c in "bdfgklmnprstvz"][:2000]


def texts_and_planted(seed: int = 7) -> tuple[list[str], list[tuple[int, int]]]:
    """200 unrelated texts, 80 near copies (8 with each of 1..10 words replaced), and two
    short texts that differ only in punctuation (the same one shingle)."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(WORDS)) + "." for _ in range(200)]
    planted = []
    for k, source in enumerate(rng.sample(range(200), 80)):
        words = texts[source].split()
        for at in rng.sample(range(WORDS), k // 8 + 1):
            words[at] = f"new{rng.randrange(10**9)}"
        planted.append((source, len(texts)))
        texts.append(" ".join(words))
    planted.append((len(texts), len(texts) + 1))
    texts += ["hello world!", "hello world."]
    return texts, planted


def jaccard(a: str, b: str) -> float:
    sa = set(near.shingles(near.tokens(a), SHINGLE))
    sb = set(near.shingles(near.tokens(b), SHINGLE))
    return len(sa & sb) / len(sa | sb)


def standard_error(s: float) -> float:
    bands, rows = near.lsh_params(THRESHOLD, NUM_PERM)
    return math.sqrt(s * (1 - s) / (bands * rows))


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict:
    texts, planted = texts_and_planted()
    workdir = tmp_path_factory.mktemp("datatrove")
    return {
        "texts": texts,
        "planted": planted,
        "local": near.similar_pairs(near.signatures(texts, SHINGLE, NUM_PERM), THRESHOLD),
        "datatrove": datatrove_pairs(texts, SHINGLE, NUM_PERM, THRESHOLD, workdir),
        "workdir": workdir,
    }


def test_pairs_keep_the_local_engines_contract(engines):
    found = engines["datatrove"]
    assert found == sorted(found)
    assert all(i < j and THRESHOLD <= s <= 1 for i, j, s in found)
    assert len({(i, j) for i, j, _ in found}) == len(found)


def test_only_planted_pairs_and_their_similarity_estimated_from_datatrove_signatures(engines):
    texts, planted = engines["texts"], set(engines["planted"])
    for i, j, s in engines["datatrove"]:
        assert (i, j) in planted  # unrelated texts share no shingle
        exact = jaccard(texts[i], texts[j])
        assert abs(s - exact) <= 4 * standard_error(exact) + 1e-9, (i, j, s, exact)


def test_both_engines_find_every_pair_well_above_the_threshold(engines):
    texts = engines["texts"]
    local = {(i, j) for i, j, _ in engines["local"]}
    found = {(i, j) for i, j, _ in engines["datatrove"]}
    similarity = {(i, j): jaccard(texts[i], texts[j]) for i, j in engines["planted"]}
    above = {p for p, s in similarity.items() if s - THRESHOLD >= NOISE * standard_error(s)}
    assert len(above) >= 15  # the corpus plants enough of them for the check to mean something
    assert above <= local
    assert above <= found
    assert (len(texts) - 2, len(texts) - 1) in found  # shorter than a shingle: one shingle


def test_the_engines_disagree_only_near_the_threshold(engines):
    texts = engines["texts"]
    local = {(i, j) for i, j, _ in engines["local"]}
    found = {(i, j) for i, j, _ in engines["datatrove"]}
    for i, j in local ^ found:
        s = jaccard(texts[i], texts[j])
        assert abs(s - THRESHOLD) < NOISE * standard_error(s), (i, j, s)


def test_unrelated_texts_give_no_pair_and_a_rerun_replaces_the_old_files(engines):
    rng = random.Random(11)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(WORDS)) for _ in range(150)]
    assert near.similar_pairs(near.signatures(texts, SHINGLE, NUM_PERM), THRESHOLD) == []
    # the same folder as the planted corpus: its signatures and pairs must not be read again
    assert datatrove_pairs(texts, SHINGLE, NUM_PERM, THRESHOLD, engines["workdir"]) == []


def test_only_candidates_signatures_are_read_back_and_each_stage_is_said(
    engines, tmp_path, monkeypatch
):
    """At 100,000 rows the engine held every text, a pyarrow table of them and 1 KB of
    signature per text (0.90 GiB where the local engine took 0.22), and said nothing for 102 s:
    documents go out a batch at a time, only a candidate pair's signatures come back, and each
    stage is said as it begins."""
    from tunelab.data import batches, near_datatrove

    read = []
    real = near_datatrove._signatures

    def spy(folder, present, starts, docs, bands, rows):
        read.append(len(docs))
        return real(folder, present, starts, docs, bands, rows)

    monkeypatch.setattr(near_datatrove, "_signatures", spy)
    monkeypatch.setattr(near_datatrove, "WRITE_ROWS", 7)  # many batches a file
    said: list[str] = []
    with batches.reporting(said.append):
        found = datatrove_pairs(engines["texts"], SHINGLE, NUM_PERM, THRESHOLD, tmp_path)
    assert found == engines["datatrove"]
    assert read and read[0] <= 2 * len(engines["planted"]) < len(engines["texts"])
    assert [line.split(" ")[1] for line in said] == ["writing", "MinHash", "16", "checking"]


@pytest.mark.slow  # two worker processes start (forkserver, imports): 5-9 s on a shared CPU
def test_two_workers_give_the_same_pairs_and_print_nothing(engines, tmp_path, capfd):
    texts = engines["texts"]
    capfd.readouterr()
    found = datatrove_pairs(texts, SHINGLE, NUM_PERM, THRESHOLD, tmp_path, workers=2)
    assert found == engines["datatrove"]  # two files, two processes: the same documents
    assert len(list((tmp_path / "documents").glob("*.parquet"))) == 2
    assert capfd.readouterr() == ("", "")  # datatrove logs under workdir/logs only
    assert list((tmp_path / "logs" / "signatures" / "logs").glob("task_*.log"))


def test_empty_and_tiny_corpora(tmp_path):
    assert datatrove_pairs([], SHINGLE, NUM_PERM, THRESHOLD, tmp_path) == []
    assert datatrove_pairs(["", "a b c d"], SHINGLE, NUM_PERM, THRESHOLD, tmp_path) == []
    found = datatrove_pairs(["", "a b c d", "", "a b c d!"], SHINGLE, NUM_PERM, 0.8, tmp_path)
    assert found == [(1, 3, 1.0)]


def test_without_datatrove_the_error_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "datatrove.pipeline.dedup", None)
    with pytest.raises(TunelabError, match=re.escape(INSTALL)):
        datatrove_pairs(["a b c", "a b d"], SHINGLE, NUM_PERM, THRESHOLD, Path(tmp_path))


def test_data_engine_datatrove_gives_the_same_report_in_a_version_of_its_own(tmp_path):
    """`data.engine: datatrove` through `tunelab data`: the planted pairs (well above the
    threshold) found, removed and reported as with the local engine, every row accounted for,
    and the engine recorded in the version's settings (so its own id)."""
    texts, planted = texts_and_planted()
    keep = [(a, b) for a, b in planted[:40] if jaccard(texts[a], texts[b]) > 0.9]
    rows = [{"text": texts[i], "label": "xy"[i % 2]} for i in range(200)]
    rows += [{"text": texts[b], "label": "xy"[a % 2]} for a, b in keep]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    reports = {}
    for engine in ("local", "datatrove"):
        data = {"sources": [{"type": "jsonl", "path": "rows.jsonl"}], "engine": engine}
        spec = validate_spec({"data": data, "model": {"path": "x"}})
        reports[engine] = build_data(spec, tmp_path, Store(tmp_path))
    local, datatrove = reports["local"], reports["datatrove"]
    assert local["duplicates"]["pairs_total"] == len(keep) > 0
    for key in ("kept", "duplicates_removed", "splits"):
        assert datatrove[key] == local[key], key
    assert [(p["a"], p["b"]) for p in datatrove["duplicates"]["pairs"]] == [
        (p["a"], p["b"]) for p in local["duplicates"]["pairs"]
    ]
    assert datatrove["version"] != local["version"]
    manifest = Store(tmp_path).data_dir(datatrove["version"]) / "manifest.json"
    assert json.loads(manifest.read_text())["settings"]["engine"] == "datatrove"
    assert (local["duplicates"]["engine"], datatrove["duplicates"]["engine"]) == (
        "local",
        "datatrove",
    )
    out = Console(width=200, record=True)
    data_view(datatrove, out)  # which engine found them, where the ids differ
    assert "near-duplicates (pairs, found by datatrove (data.engine))" in out.export_text()


def test_the_engine_works_in_the_store_and_a_missing_package_is_named_first(tmp_path, monkeypatch):
    """Its stages' files went to the system's temporary folder (25 MB for 20,000 rows, left
    behind by a kill where fsck could not see them); without the package the error came
    after the reading, cleaning and splitting."""
    texts, _ = texts_and_planted()
    (tmp_path / "rows.jsonl").write_text(
        "".join(json.dumps({"text": t, "label": "xy"[i % 2]}) + "\n" for i, t in enumerate(texts))
    )
    data = {"sources": [{"type": "jsonl", "path": "rows.jsonl"}], "engine": "datatrove"}
    spec = validate_spec({"data": data, "model": {"path": "x"}})
    seen = []
    real = tempfile.TemporaryDirectory

    def watched(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryDirectory", watched)
    build_data(spec, tmp_path, Store(tmp_path))
    (work,) = [k for k in seen if k.get("prefix") == ".datatrove-"]
    assert Path(work["dir"]) == Store(tmp_path).root / "data" and work["suffix"] == ".tmp"
    monkeypatch.setitem(sys.modules, "datatrove.pipeline.dedup", None)
    read = []
    monkeypatch.setattr(pipeline, "_build", lambda *a, **k: read.append(a))
    with pytest.raises(TunelabError, match=re.escape(INSTALL)):
        build_data(spec, tmp_path, Store(tmp_path))
    assert read == []  # refused before any source was read
