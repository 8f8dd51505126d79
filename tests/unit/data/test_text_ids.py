"""A text lab's version ids do not move when the data step learns new kinds of data (images):
the ids below were computed by the code before image labs existed."""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data import build_data


def test_text_version_ids_are_those_from_before_images(tmp_path: Path) -> None:
    """Ids computed by the code before image labs existed: a text lab's versions keep them."""
    rows = [{"text": f"a note about cat number {i}", "label": "cat"} for i in range(28)]
    rows += [{"text": f"a note about dog number {i}", "label": "dog"} for i in range(14)]
    rows += [
        {"text": "A note about CAT number 3", "label": "cat"},
        {"text": "a note about cat number 3!", "label": "cat"},
    ]
    (tmp_path / "rows.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"text": 1}\n'
    )
    for i in range(6):
        path = tmp_path / "f" / "ab"[i % 2] / f"{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"text {i} here")
    found = []
    for source in ({"type": "jsonl", "path": "rows.jsonl"}, {"type": "folder", "path": "f"}):
        spec = validate_spec(
            {
                "data": {"sources": [source], "cleaning": [{"rule": "lowercase"}]},
                "model": {"path": "x"},
            }
        )
        report = build_data(spec, tmp_path, Store(tmp_path))
        found.append((report["version"], report["rows_id"]))
    assert found == [("6f44ed5c2b9f", "0858031222b5"), ("6704c1ccaa20", "3ba70a2f43ad")]
