"""The data version's two ids, from one pass over the rows; a damaged version found again."""

from __future__ import annotations

import json

from rich.console import Console
from test_pipeline import JSONL, animal_rows, build, make_spec, write_rows

from tunelab.core.digest import sha256_json
from tunelab.core.store import Store
from tunelab.data.loaders import Example, Rejection
from tunelab.data.version import (
    ID_CHARS,
    damaged_files,
    rows_id,
    version_and_rows_ids,
    version_id,
)
from tunelab.views.data import data as data_view


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


def test_a_damaged_version_found_again_is_written_again_whole(tmp_path) -> None:
    """Rebuilding reused a version whose train split had been cut, or whose report.json was
    gone, and said "unchanged"; only fsck saw it."""
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    first = build(tmp_path, make_spec(JSONL))
    store, version = Store(tmp_path), first["version"]
    folder = store.data_dir(version)
    before = json.loads((folder / "manifest.json").read_text())["files"]
    train = folder / "train.jsonl"
    train.write_text("".join(train.read_text().splitlines(keepends=True)[:-3]))
    (folder / "report.json").unlink()
    assert damaged_files(store, version) == ["train.jsonl", "report.json"]
    again = build(tmp_path, make_spec(JSONL))
    assert again["version"] == version and not again["new"]
    assert again["rewritten"] == ["train.jsonl", "report.json"]
    assert damaged_files(store, version) == []
    after = json.loads((folder / "manifest.json").read_text())["files"]
    assert after["train.jsonl"] == before["train.jsonl"]  # the same rows, byte for byte
    assert not list(folder.parent.glob(".*.tmp"))  # the damaged folder is gone
    out = Console(width=200, record=True)
    data_view(again, out)
    assert "damaged (train.jsonl, report.json differed from its manifest)" in out.export_text()
    assert build(tmp_path, make_spec(JSONL))["rewritten"] is None  # whole again: reused


def test_a_version_folder_takes_the_mode_the_umask_gives(tmp_path) -> None:
    """Every version folder was 0700 (mkdtemp's), whatever the umask, so a group-shared lab's
    teammates could not read its splits."""
    from tunelab.core import files

    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    version = build(tmp_path, make_spec(JSONL))["version"]
    folder = Store(tmp_path).data_dir(version)
    assert folder.stat().st_mode & 0o777 == 0o777 & ~files._UMASK
    assert {p.stat().st_mode & 0o777 for p in folder.iterdir()} == {0o666 & ~files._UMASK}
