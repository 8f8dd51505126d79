"""The sha256 helpers every record's hash goes through."""

from __future__ import annotations

import hashlib
import json
import os

from tunelab.core.digest import CHUNK, sha256_file, sha256_json


def test_sha256_file_streams_across_chunks(tmp_path):
    data = os.urandom(2 * CHUNK + 12345)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_json_digest_ignores_key_order():
    assert sha256_json({"a": 1, "b": [1, "é"]}) == sha256_json({"b": [1, "é"], "a": 1})
    assert sha256_json({"a": 1}) != sha256_json({"a": 2})


def test_json_digest_is_the_digest_of_the_canonical_text_however_it_is_streamed():
    """Hashed piece by piece (long lists item by item, across the 1 MiB hashing chunks), the
    digest is that of the one canonical string a data version's id has always hashed."""
    rows = [
        [f"f.jsonl:{i}", 'é\u2028"' * (i % 7) + "x" * 900, None, 1.5, {"b": 1, "a": [i]}]
        for i in range(3000)
    ]
    for value in (
        {"examples": {"train": rows, "test": rows[:5], "validation": []}, "settings": {"k": {}}},
        rows,
        {"1": 2, "a": [3] * 65},
        [],
        "text",
    ):
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert sha256_json(value) == hashlib.sha256(text.encode("utf-8")).hexdigest()
