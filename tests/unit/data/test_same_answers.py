"""The data step gives the answers it gave before it was made to scale (commit 2c7192e): the
same version and rows ids, duplicates and quarantine, on the demo's corpus and on a grouped lab
read from two files out of id order. The ids below were computed by that commit's code; a
change that moves them changes every user's data versions, and must say so. Each also with its
texts past a tiny `data.texts_in_memory_mb`, so that they wait on disk (`data/spill.py`)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data import build_data
from tunelab.demo.assets import bbc_news

SPILL = pytest.mark.parametrize("budget_mb", [None, 0.05], ids=["in-memory", "spilled"])


def build(data: dict, lab: Path, budget_mb: float | None) -> dict:
    """The data step's report; `budget_mb`: the texts' memory budget (None: the default)."""
    if budget_mb is not None:
        data = data | {"texts_in_memory_mb": budget_mb}
    texts: dict = {}
    spec = validate_spec({"data": data, "model": {"path": "x"}})
    report = build_data(spec, lab, Store(lab), texts=texts)
    assert texts["spilled"] == (budget_mb is not None)
    assert not list((lab / ".tunelab" / "data").glob(".texts-*"))  # the scratch file is gone
    return report


@SPILL
def test_the_demo_corpus_keeps_its_version_and_duplicates(tmp_path: Path, budget_mb) -> None:
    shutil.copytree(bbc_news(), tmp_path / "bbcnews")  # inside the lab: the spec's path is
    source = {"type": "folder", "path": "bbcnews"}  # the same wherever the corpus is installed
    rules = [{"rule": "unicode_nfkc"}, {"rule": "whitespace"}]
    report = build({"sources": [source], "cleaning": rules}, tmp_path, budget_mb)
    assert (report["version"], report["rows_id"]) == ("1db568b3cd5c", "21ab41a047c8")
    assert (report["kept"], report["duplicates_removed"], report["quarantined"]) == (2083, 141, 1)
    assert report["duplicates"]["counts"] == {
        "train-validation": 13,
        "train-train": 60,
        "train-test": 17,
        "validation-test": 6,
        "validation-validation": 3,
        "test-test": 2,
        "near:train-train": 30,
        "near:train-validation": 13,
        "near:train-test": 8,
        "near:validation-test": 4,
        "near:test-test": 1,
    }


@SPILL
def test_a_grouped_lab_in_two_shuffled_files_keeps_its_version(tmp_path: Path, budget_mb) -> None:
    rng = random.Random(3)
    words = [f"w{i}" for i in range(3000)]
    rows = [
        {
            "id": f"doc-{i}",
            "text": " ".join(rng.choice(words) for _ in range(40)),
            "label": "abc"[i % 3],
            "group": f"g{i % 211}",
        }
        for i in range(1500)
    ]
    for i in range(0, 1500, 50):  # a near copy and an exact copy (case only) of every 50th
        changed = rows[i]["text"].split()
        changed[5] = "changed"
        label = rows[i]["label"]
        rows.append({"id": f"copy-{i}", "text": " ".join(changed), "label": label, "group": "gc"})
        rows.append(
            {"id": f"same-{i}", "text": rows[i]["text"].upper(), "label": label, "group": "gs"}
        )
    rng.shuffle(rows)
    (tmp_path / "data").mkdir()
    for k, part in enumerate((rows[:900], rows[900:])):
        text = "".join(json.dumps(r) + "\n" for r in part)
        (tmp_path / "data" / f"part{k}.jsonl").write_text(text)
    sources = [{"type": "jsonl", "path": f"data/part{k}.jsonl"} for k in range(2)]
    data = {"sources": sources, "fields": {"id": "id", "group": "group"}}
    report = build(data, tmp_path, budget_mb)
    assert (report["version"], report["rows_id"]) == ("11baa051accd", "e34a7baefdb4")
    assert (report["kept"], report["duplicates_removed"], report["quarantined"]) == (1502, 58, 0)
    assert report["duplicates"]["counts"] == {
        "train-train": 21,
        "train-validation": 4,
        "train-test": 5,
        "near:train-train": 48,
        "near:train-validation": 4,
        "near:train-test": 4,
    }
