"""`data.eval_from`: a new cleaning rule changes train while validation and test stay byte for
byte those of the pinned version, the sealed test's hash included; without it the same rule
changes validation, and `split_changes` counts how."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from test_pipeline import JSONL, build, make_spec, write_rows

from tunelab.core.seal import open_sealed
from tunelab.core.store import Store
from tunelab.data.loaders import DataError
from tunelab.data.same_eval import SameEval, split_changes
from tunelab.views.data import data as data_view


def spaced_rows() -> list[dict]:
    """Rows whose texts the whitespace rule changes (double spaces), two labels."""
    rows = [{"text": f"a  note about cat  number {i}", "label": "cat"} for i in range(28)]
    return rows + [{"text": f"a  note about dog  number {i}", "label": "dog"} for i in range(14)]


WHITESPACE = [{"rule": "whitespace"}]


def split_bytes(lab: Path, version: str, split: str) -> bytes:
    return (lab / ".tunelab" / "data" / version / f"{split}.jsonl").read_bytes()


def test_eval_from_keeps_validation_and_test_while_a_rule_changes_train(tmp_path):
    write_rows(tmp_path / "data" / "rows.jsonl", spaced_rows())
    v1 = build(tmp_path, make_spec(JSONL))["version"]
    pinned = build(tmp_path, make_spec(JSONL, cleaning=WHITESPACE, eval_from=v1))
    v2, store = pinned["version"], Store(tmp_path)
    assert v2 != v1 and pinned["eval_from"] == v1
    evaluated_n = pinned["splits"]["validation"]["n"] + pinned["splits"]["test"]["n"]
    assert pinned["held_out_of_train"] == evaluated_n  # the same rows, by id
    console = Console(record=True, width=200)
    data_view(pinned, console)
    assert f"validation and test kept byte for byte from version {v1}" in console.export_text()
    for split in ("validation", "test"):
        assert split_bytes(tmp_path, v2, split) == split_bytes(tmp_path, v1, split)
    assert store.data_manifest(v2)["test_sha256"] == store.data_manifest(v1)["test_sha256"]
    train = store.read_split(v2, "train")
    assert train and all("  " not in r["text"] for r in train)  # the rule applied to train
    evaluated = {r["id"] for r in store.read_split(v1, "validation") + open_sealed(store, v1)[0]}
    assert not evaluated & {r["id"] for r in train}
    assert SameEval(store, v2)(v1)  # compare pairs the runs of both versions

    # the same rule without the pin re-cleans validation too: another split, counted
    v3 = build(tmp_path, make_spec(JSONL, cleaning=WHITESPACE))["version"]
    assert not SameEval(store, v3)(v1)
    n = len(store.read_split(v1, "validation"))
    assert split_changes(store, v1, v3) == {"added": 0, "removed": 0, "changed": n}


def test_new_rows_go_to_train_under_eval_from(tmp_path):
    rows = spaced_rows()
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    v1 = build(tmp_path, make_spec(JSONL))["version"]
    more = rows + [{"text": f"a fresh note about dogs {i}", "label": "dog"} for i in range(6)]
    write_rows(tmp_path / "data" / "rows.jsonl", more)
    report = build(tmp_path, make_spec(JSONL, eval_from=v1))
    store = Store(tmp_path)
    train = store.read_split(report["version"], "train")
    assert sum("fresh" in r["text"] for r in train) == 6
    assert SameEval(store, report["version"])(v1)


def test_an_unknown_eval_from_version_is_refused_naming_the_field(tmp_path):
    write_rows(tmp_path / "data" / "rows.jsonl", spaced_rows())
    v1 = build(tmp_path, make_spec(JSONL))["version"]
    with pytest.raises(DataError, match=rf"data.eval_from: 'nope' is not a data version .*{v1}"):
        build(tmp_path, make_spec(JSONL, eval_from="nope"))


def test_under_eval_from_the_dedup_policy_decides_about_copies_of_pinned_texts(tmp_path):
    """A train copy of a validation text (another id) is a duplicate across splits: dropped
    under drop_from_train, kept and reported under report; every row read is accounted for."""
    rows = spaced_rows()
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    v1 = build(tmp_path, make_spec(JSONL))["version"]
    store = Store(tmp_path)
    copied = store.read_split(v1, "validation")[0]
    write_rows(tmp_path / "data" / "rows.jsonl", [*rows, {"text": copied["text"], "label": "cat"}])
    for policy, kept in (("drop_from_train", False), ("report", True)):
        spec = make_spec(JSONL, eval_from=v1, dedup={"policy": policy, "near": False})
        report = build(tmp_path, spec)
        assert report["rows_read"] == len(rows) + 1
        assert report["rows_read"] == (
            report["kept"] + report["quarantined"] + report["duplicates_removed"]
        )
        train = store.read_split(report["version"], "train")
        assert any(r["text"] == copied["text"] for r in train) is kept
        assert SameEval(store, report["version"])(v1)
