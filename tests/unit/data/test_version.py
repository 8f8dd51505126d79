"""The data version's two ids, from one pass over the rows."""

from __future__ import annotations

from tunelab.core.digest import sha256_json
from tunelab.data.loaders import Example, Rejection
from tunelab.data.version import ID_CHARS, rows_id, version_and_rows_ids, version_id


def test_both_ids_are_the_hashes_of_their_documented_content() -> None:
    """One serialisation feeds both hashes; each is still the sha256 of the canonical JSON it
    has always been (so no stored version changes its id)."""
    rows = [
        Example(f"f.jsonl:{i}", f"téxt {i}\u2028" * (i % 5 + 1), "b", "f.jsonl", i)
        for i in range(300)
    ]
    rows[3].target = {"z": 1, "a": [1, "é"]}
    splits = {"train": rows[:200], "validation": rows[200:250], "test": rows[250:]}
    quarantine = [Rejection("f.jsonl", 7, "empty_text", "text is empty")]
    settings = {"labels": ["b"], "split": {"seed": 0, "train": 0.8}, "dedup": {}}
    examples = {s: [ex.hashed() for ex in splits[s]] for s in splits}
    content = {
        "examples": examples,
        "quarantine": [["f.jsonl", 7, "empty_text"]],
        "settings": settings,
    }
    version, rows_only = version_and_rows_ids(splits, quarantine, settings)
    assert version == sha256_json(content)[:ID_CHARS] == version_id(splits, quarantine, settings)
    assert rows_only == sha256_json(examples)[:ID_CHARS] == rows_id(splits)
    assert version_and_rows_ids({**splits, "test": []}, quarantine, settings)[0] != version
