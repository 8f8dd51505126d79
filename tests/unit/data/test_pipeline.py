"""`build_data` end to end on tiny labs: accounting, versions, the seal, the user's split."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tunelab.core.spec import Spec, validate_spec
from tunelab.core.store import Store, read_json, read_jsonl
from tunelab.data import build_data


def make_spec(sources: list[dict], **data: object) -> Spec:
    return validate_spec({"data": {"sources": sources, **data}, "model": {"path": "x"}})


def write_rows(path: Path, rows: list[dict], extra: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + extra)


def animal_rows(n_cat: int = 28, n_dog: int = 14) -> list[dict]:
    rows = [{"text": f"a note about cat number {i}", "label": "cat"} for i in range(n_cat)]
    rows += [{"text": f"a note about dog number {i}", "label": "dog"} for i in range(n_dog)]
    return rows


JSONL = [{"type": "jsonl", "path": "data/rows.jsonl"}]
BAD_LINES = (
    b'{"label": "cat"}\n'  # missing text
    b'{"text": "  ", "label": "dog"}\n'  # empty text
    b'{"text": "broken", \n'  # broken JSON
    b'{"text": "bad \xff byte", "label": "cat"}\n'  # bad encoding
    b'{"text": "a list label", "label": ["cat"]}\n'  # bad label type
)


def build(lab: Path, spec: Spec) -> dict:
    return build_data(spec, lab, Store(lab))


def test_bad_rows_land_in_quarantine_and_every_row_is_accounted_for(tmp_path: Path) -> None:
    rows = animal_rows()
    rows += [{"text": "A note about CAT number 3", "label": "cat"}]  # exact duplicate of row 4
    write_rows(tmp_path / "data" / "rows.jsonl", rows, BAD_LINES)
    report = build(tmp_path, make_spec(JSONL))

    assert report["rows_read"] == 48
    assert report["quarantined"] == 5
    [pair] = report["duplicates"]["pairs"]  # the CAT-number-3 copy, wherever it landed
    assert {pair["a"]["id"], pair["b"]["id"]} == {"data/rows.jsonl:4", "data/rows.jsonl:43"}
    assert report["duplicates_removed"] == (1 if pair["kind"].startswith("train") else 0)
    assert report["rows_read"] == (
        report["kept"] + report["quarantined"] + report["duplicates_removed"]
    )
    assert report["quarantine"]["reasons"] == {
        "bad_encoding": 1,
        "bad_label_type": 1,
        "broken_json": 1,
        "empty_text": 1,
        "missing_field": 1,
    }
    store = Store(tmp_path)
    folder = store.data_dir(report["version"])
    quarantine = read_jsonl(folder / "quarantine.jsonl")
    assert [(q["file"], q["line"]) for q in quarantine] == [
        ("data/rows.jsonl", line) for line in range(44, 49)
    ]
    assert report["quarantine"]["file"] == f".tunelab/data/{report['version']}/quarantine.jsonl"
    assert report["labels"] == ["cat", "dog"]
    assert sum(s["n"] for s in report["splits"].values()) == report["kept"]


def test_report_shape_and_split_files(tmp_path: Path) -> None:
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    spec = make_spec(JSONL, cleaning=[{"rule": "lowercase"}, {"rule": "whitespace"}])
    report = build(tmp_path, spec)
    assert set(report) >= {
        "version", "new", "rows_read", "kept", "quarantined", "duplicates_removed", "splits",
        "labels", "cleaning", "quarantine", "duplicates", "presplit",
    }  # fmt: skip
    assert report["new"] is True and report["presplit"] is False
    assert len(report["version"]) == 12
    assert report["cleaning"] == {"lowercase": 0, "whitespace": 0}
    assert report["splits"]["train"] == {"n": 30, "labels": {"cat": 20, "dog": 10}}
    assert report["splits"]["validation"]["n"] == report["splits"]["test"]["n"] == 6
    dups = report["duplicates"]
    assert set(dups) == {
        "policy",
        "engine",
        "counts",
        "pairs",
        "pairs_total",
        "pairs_file",
        "removed",
        "across_sources",
    }
    assert dups["across_sources"] == {}  # one source: no pair across sources

    folder = Store(tmp_path).data_dir(report["version"])
    names = {"train", "validation", "test", "quarantine", "duplicates", "report", "manifest"}
    names.add("test_keys")  # the test rows' digests: matched, never read, by a later `data`
    assert {p.stem for p in folder.iterdir()} == names
    train = read_jsonl(folder / "train.jsonl")
    assert set(train[0]) == {"id", "text", "label", "origin", "source"}
    assert train[0]["origin"].startswith("data/rows.jsonl:")
    assert read_json(folder / "report.json") == report


def test_manifest_holds_hashes_and_the_test_seal(tmp_path: Path) -> None:
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    report = build(tmp_path, make_spec(JSONL))
    store = Store(tmp_path)
    manifest = store.data_manifest(report["version"])
    folder = store.data_dir(report["version"])
    test_hash = hashlib.sha256((folder / "test.jsonl").read_bytes()).hexdigest()
    assert manifest["test_sha256"] == test_hash
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    source_hash = hashlib.sha256((tmp_path / "data" / "rows.jsonl").read_bytes()).hexdigest()
    assert manifest["sources"] == [
        {
            "name": "rows",
            "type": "jsonl",
            "path": "data/rows.jsonl",
            "split": None,
            "sha256": source_hash,
            "rows": 42,
            "resolved": str((tmp_path / "data" / "rows.jsonl").resolve()),
            "quarantined": 0,
            "reasons": {},
            "first": {},
        }
    ]
    assert manifest["version"] == report["version"]
    assert manifest["counts"] == report["splits"]
    assert manifest["labels"] == ["cat", "dog"]


def test_the_test_split_text_never_appears_in_the_report(tmp_path: Path) -> None:
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    report = build(tmp_path, make_spec(JSONL))
    test_rows = read_jsonl(Store(tmp_path).data_dir(report["version"]) / "test.jsonl")
    assert test_rows
    shown = json.dumps(report)
    assert not any(row["text"] in shown for row in test_rows)


def test_version_is_stable_and_changes_with_rules_or_data(tmp_path: Path) -> None:
    path = tmp_path / "data" / "rows.jsonl"
    write_rows(path, animal_rows())
    store = Store(tmp_path)
    first = build(tmp_path, make_spec(JSONL))
    again = build(tmp_path, make_spec(JSONL))
    assert again["version"] == first["version"] and again["new"] is False
    assert store.current_data() == first["version"]

    with_rule = build(tmp_path, make_spec(JSONL, cleaning=[{"rule": "lowercase"}]))
    assert with_rule["version"] != first["version"] and with_rule["new"] is True
    other_rule = build(tmp_path, make_spec(JSONL, cleaning=[{"rule": "whitespace"}]))
    assert other_rule["version"] not in {first["version"], with_rule["version"]}
    other_seed = build(tmp_path, make_spec(JSONL, split={"seed": 1}))
    assert other_seed["version"] != first["version"]

    write_rows(path, [*animal_rows(), {"text": "one more dog", "label": "dog"}])
    more_data = build(tmp_path, make_spec(JSONL))
    assert more_data["version"] != first["version"]
    assert store.current_data() == more_data["version"]

    versions = {first["version"], with_rule["version"], other_rule["version"]}
    versions |= {other_seed["version"], more_data["version"]}
    for version in versions:
        assert (store.data_dir(version) / "manifest.json").exists()
    logged = [e["version"] for e in store.events() if e["event"] == "data"]
    assert logged[:2] == [first["version"], first["version"]]
    assert len(logged) == 6


def test_presplit_sources_keep_the_users_split_and_dedup_runs_across(tmp_path: Path) -> None:
    train = [{"text": f"train row {i}", "label": "a" if i % 2 else "b"} for i in range(10)]
    train.append({"text": "Shared With Validation", "label": "a"})
    val = [{"text": "shared with  validation", "label": "a"}, {"text": "val only", "label": "b"}]
    test = [{"text": "test row", "label": "a"}]
    for name, rows in (("train", train), ("val", val), ("test", test)):
        write_rows(tmp_path / f"{name}.jsonl", rows)
    sources = [
        {"type": "jsonl", "path": "train.jsonl", "split": "train"},
        {"type": "jsonl", "path": "val.jsonl", "split": "validation"},
        {"type": "jsonl", "path": "test.jsonl", "split": "test"},
    ]
    report = build(tmp_path, make_spec(sources))
    assert report["presplit"] is True
    assert [report["splits"][s]["n"] for s in ("train", "validation", "test")] == [10, 2, 1]
    assert report["duplicates"]["counts"] == {"train-validation": 1}
    assert report["duplicates_removed"] == 1
    folder = Store(tmp_path).data_dir(report["version"])
    assert {r["origin"].split(":")[0] for r in read_jsonl(folder / "train.jsonl")} == {
        "train.jsonl"
    }
    assert [r["text"] for r in read_jsonl(folder / "validation.jsonl")] == [
        "shared with  validation",
        "val only",
    ]
    assert "train.jsonl:11" not in {r["id"] for r in read_jsonl(folder / "train.jsonl")}


def test_split_column_keeps_the_users_split(tmp_path: Path) -> None:
    rows = [{"text": f"row {i}", "label": "ab"[i % 2], "part": "train"} for i in range(4)]
    rows += [
        {"text": "v", "label": "a", "part": "validation"},
        {"text": "t", "label": "a", "part": "test"},
    ]
    rows += [{"text": "odd", "label": "a", "part": "holdout"}]
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL, fields={"split": "part"}))
    assert [report["splits"][s]["n"] for s in ("train", "validation", "test")] == [4, 1, 1]
    assert report["quarantine"]["reasons"] == {"bad_split_value": 1}


def test_groups_stay_together_through_the_pipeline(tmp_path: Path) -> None:
    rows = [
        {"text": f"doc {d} para {p}", "label": "x" if d % 3 else "y", "doc": f"d{d}"}
        for d in range(15)
        for p in range(3)
    ]
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL, fields={"group": "doc"}))
    folder = Store(tmp_path).data_dir(report["version"])
    where: dict[str, set[str]] = {}
    for split in ("train", "validation", "test"):
        for row in read_jsonl(folder / f"{split}.jsonl"):
            where.setdefault(row["group"], set()).add(split)
    assert len(where) == 15 and all(len(s) == 1 for s in where.values())


def test_a_bad_rule_fails_before_anything_is_written(tmp_path: Path) -> None:
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    spec = make_spec(JSONL, cleaning=[{"rule": "strip_regex", "pattern": "["}])
    with pytest.raises(ValueError, match="strip_regex"):
        build(tmp_path, spec)
    assert not (tmp_path / ".tunelab" / "data").exists()


def test_task_labels_filter_and_order(tmp_path: Path) -> None:
    write_rows(
        tmp_path / "data" / "rows.jsonl", [*animal_rows(), {"text": "a bird", "label": "bird"}]
    )
    raw = {
        "data": {"sources": JSONL},
        "model": {"path": "x"},
        "task": {"type": "classification", "labels": ["dog", "cat"]},
    }
    report = build(tmp_path, validate_spec(raw))
    assert report["labels"] == ["dog", "cat"]
    assert list(report["splits"]["train"]["labels"]) == ["dog", "cat"]
    assert report["quarantine"]["reasons"] == {"unknown_label": 1}


def test_the_step_says_each_stage_as_it_begins_and_only_writes_a_new_version(
    tmp_path: Path,
) -> None:
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    spec, heard = make_spec(JSONL), []
    report = build_data(spec, tmp_path, Store(tmp_path), say=heard.append)
    assert heard == [
        "data: reading 1 source(s)",  # no cleaning rule: no cleaning said
        "data: grouping 42 rows by content, splitting",
        "data: finding duplicates",
        f"data: writing version {report['version']}",
    ]
    heard.clear()
    build_data(spec, tmp_path, Store(tmp_path), say=heard.append)
    assert heard[-1] == "data: finding duplicates"  # the same version: found, not written
    heard.clear()
    spec = make_spec(JSONL, cleaning=[{"rule": "whitespace"}])
    build_data(spec, tmp_path, Store(tmp_path), say=heard.append)
    assert heard[1] == "data: cleaning 42 rows"


def test_labels_equal_but_for_case_or_spacing_are_warned_of_and_kept_apart(tmp_path: Path) -> None:
    slips = [{"text": f"a note about a Cat, typed {i}", "label": "Cat"} for i in range(6)]
    write_rows(tmp_path / "data" / "rows.jsonl", [*animal_rows(), *slips])
    report = build(tmp_path, make_spec(JSONL))
    assert "Cat" in report["labels"] and "cat" in report["labels"]  # nothing merged silently
    alike = [w for w in report["warnings"] if "differ only in case or spacing" in w]
    assert alike == [
        "labels ['Cat', 'cat'] differ only in case or spacing: they are 2 separate classes; "
        "if they are one, correct the labels at the source"
    ]


def test_the_data_step_warns_of_labels_spelt_as_a_number_twice_or_as_an_empty_cell(
    tmp_path: Path,
) -> None:
    rows = [*animal_rows(), *({"text": f"a note {i}", "label": "NaN"} for i in range(3))]
    rows += [{"text": f"a count {i}", "label": "2" if i % 2 else "2.0"} for i in range(6)]
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    warnings = build(tmp_path, make_spec(JSONL))["warnings"]
    assert any(w.startswith("labels ['2', '2.0'] are one number written 2 ways") for w in warnings)
    assert any(w.startswith("label(s) ['NaN'] look like a spreadsheet's") for w in warnings)
