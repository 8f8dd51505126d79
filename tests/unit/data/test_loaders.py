"""Loaders: every bad row is quarantined with its file and line; good rows survive it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tunelab.core.spec import DataSpec, validate_spec
from tunelab.data.loaders import DataError, Example, get_loader, load_sources


def data_spec(sources: list[dict], **data: object) -> DataSpec:
    return validate_spec({"data": {"sources": sources, **data}, "model": {"path": "x"}}).data


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")


def j(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_jsonl_bad_rows_are_quarantined_with_file_and_line(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "data" / "rows.jsonl",
        [
            j({"text": "good one", "label": "a"}),
            j({"label": "a"}),  # 2: missing text
            j({"text": "   ", "label": "a"}),  # 3: empty text
            b'{"text": "broken", "label": ',  # 4: broken JSON
            b'{"text": "caf\xe9 latin-1", "label": "a"}',  # 5: bad encoding
            j({"text": "list label", "label": ["a"]}),  # 6: label of a bad type
            j({"text": "int label", "label": 3}),  # 7: a number among string labels
            b"",  # blank line: not a row
            j({"text": "good two", "label": "b"}),  # 9
            j(["not", "an", "object"]),  # 10
            j({"text": "bool label", "label": True}),  # 11
        ],
    )
    loaded = load_sources(data_spec([{"type": "jsonl", "path": "data/rows.jsonl"}]), None, tmp_path)
    assert [(e.id, e.text, e.label) for e in loaded.examples] == [
        ("data/rows.jsonl:1", "good one", "a"),
        ("data/rows.jsonl:9", "good two", "b"),
    ]
    got = {(r.file, r.line, r.kind) for r in loaded.rejections}
    assert got == {
        ("data/rows.jsonl", 2, "missing_field"),
        ("data/rows.jsonl", 3, "empty_text"),
        ("data/rows.jsonl", 4, "broken_json"),
        ("data/rows.jsonl", 5, "bad_encoding"),
        ("data/rows.jsonl", 6, "bad_label_type"),
        ("data/rows.jsonl", 7, "label_type"),
        ("data/rows.jsonl", 10, "not_an_object"),
        ("data/rows.jsonl", 11, "bad_label_type"),
    }
    assert loaded.rows_read == len(loaded.examples) + len(loaded.rejections) == 10
    assert all(set(r.to_dict()) >= {"file", "line", "reason"} for r in loaded.rejections)


def test_labels_outside_task_labels_are_rejected(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "r.jsonl", [j({"text": "x", "label": "a"}), j({"text": "y", "label": "z"})]
    )
    loaded = load_sources(data_spec([{"type": "jsonl", "path": "r.jsonl"}]), ["a", "b"], tmp_path)
    assert [e.label for e in loaded.examples] == ["a"]
    assert [(r.line, r.kind) for r in loaded.rejections] == [(2, "unknown_label")]
    assert "'z'" in loaded.rejections[0].reason


def test_csv_quoted_newlines_bad_bytes_and_short_rows(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_bytes(
        b"text,label\n"
        b'"first, with comma",a\n'  # line 2
        b'"spans\ntwo lines",b\n'  # lines 3-4
        b"bad \xff byte,a\n"  # line 5
        b"no label cell\n"  # line 6
        b"last,b\n"  # line 7
    )
    loaded = load_sources(data_spec([{"type": "csv", "path": "r.csv"}]), None, tmp_path)
    assert [(e.id, e.text) for e in loaded.examples] == [
        ("r.csv:2", "first, with comma"),
        ("r.csv:3", "spans\ntwo lines"),
        ("r.csv:7", "last"),
    ]
    assert [(r.line, r.kind) for r in loaded.rejections] == [
        (5, "bad_encoding"),
        (6, "missing_field"),
    ]


def test_folder_loader_labels_from_subfolders(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for rel, content in {
        "pos/b.txt": b"nice",
        "pos/a.txt": b"great",
        "neg/z.txt": b"awful",
        "neg/bad.txt": b"\xff\xfe\xfa",
        "loose.txt": b"no label",
        "pos/.hidden": b"skipped",
        "neg/._z.txt": b"macOS's resource fork",
        "neg/.thumbnails/z.txt": b"a viewer's cache",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    (root / "pos" / "gone.txt").symlink_to(tmp_path / "docs" / "pos" / "deleted.txt")
    loaded = load_sources(data_spec([{"type": "folder", "path": "docs"}]), None, tmp_path)
    assert [(e.id, e.label, e.text) for e in loaded.examples] == [
        ("docs/neg/z.txt", "neg", "awful"),
        ("docs/pos/a.txt", "pos", "great"),
        ("docs/pos/b.txt", "pos", "nice"),
    ]
    assert all(e.line is None and e.origin == e.id for e in loaded.examples)
    assert {(r.file, r.line, r.kind) for r in loaded.rejections} == {
        ("docs/neg/bad.txt", None, "bad_encoding"),
        ("docs/loose.txt", None, "outside_label_folder"),
        ("docs/pos/gone.txt", None, "missing_file"),  # a link to nothing: said, not passed over
    }
    gone = next(r for r in loaded.rejections if r.kind == "missing_file")
    assert "symbolic link to a missing file" in gone.reason and "deleted.txt" in gone.reason
    assert loaded.sources[0]["files"] == [
        "loose.txt",
        "neg/bad.txt",
        "neg/z.txt",
        "pos/a.txt",
        "pos/b.txt",
        "pos/gone.txt",
    ]


def test_a_folder_s_hash_covers_what_is_read_and_nothing_hidden(tmp_path: Path) -> None:
    """A Finder rewriting `.DS_Store` (or a viewer its thumbnails) changes no source hash, so
    no data version; a file's bytes do. Without hidden files the hash is what it always was
    (the sorted `relative path NUL sha256 NEWLINE` list), so no lab's version id moves."""
    root = tmp_path / "docs"
    for rel, text in {"pos/a.txt": "great", "neg/z.txt": "awful"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def source_hash() -> str:
        spec = data_spec([{"type": "folder", "path": "docs"}])
        return load_sources(spec, None, tmp_path).sources[0]["sha256"]

    plain = source_hash()
    listed = "".join(
        f"{rel}\0{hashlib.sha256(text.encode()).hexdigest()}\n"
        for rel, text in (("neg/z.txt", "awful"), ("pos/a.txt", "great"))
    )
    assert plain == hashlib.sha256(listed.encode()).hexdigest()
    (root / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (root / "pos" / ".thumbnails").mkdir()
    (root / "pos" / ".thumbnails" / "a.png").write_bytes(b"png")
    assert source_hash() == plain
    (root / "pos" / "a.txt").write_text("greater")
    assert source_hash() != plain


def test_unknown_type_lists_the_known_ones(tmp_path: Path) -> None:
    known = r"\['csv', 'folder', 'hf_dataset', 'image_folder', 'jsonl', 'parquet', 'tsv'\]"
    with pytest.raises(ValueError, match=rf"unknown source type 'xml'; known: {known}"):
        get_loader("xml")
    (tmp_path / "r.x").write_text("x")
    with pytest.raises(ValueError, match="known"):
        load_sources(data_spec([{"type": "xml", "path": "r.x"}]), None, tmp_path)


def test_missing_path_names_the_spec_field(tmp_path: Path) -> None:
    (tmp_path / "ok.jsonl").write_text(json.dumps({"text": "x", "label": "a"}) + "\n")
    spec = data_spec([{"type": "jsonl", "path": "ok.jsonl"}, {"type": "jsonl", "path": "no.jsonl"}])
    with pytest.raises(DataError, match=r"data\.sources\[1\]\.path.*no\.jsonl"):
        load_sources(spec, None, tmp_path)


def test_field_mapping_ids_groups_and_duplicate_ids(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "r.jsonl",
        [
            j({"body": "one", "cat": "a", "uid": 7, "doc": "d1"}),
            j({"body": "two", "cat": "b", "uid": "x", "doc": "d1"}),
            j({"body": "three", "cat": "a", "uid": 7, "doc": "d2"}),  # id 7 again
            j({"body": "four", "cat": "a", "uid": "y"}),  # no group
        ],
    )
    fields = {"text": "body", "label": "cat", "id": "uid", "group": "doc"}
    spec = data_spec([{"type": "jsonl", "path": "r.jsonl"}], fields=fields)
    loaded = load_sources(spec, None, tmp_path)
    assert [(e.id, e.group, e.origin) for e in loaded.examples] == [
        ("7", "d1", "r.jsonl:1"),
        ("x", "d1", "r.jsonl:2"),
    ]
    assert [(r.line, r.kind) for r in loaded.rejections] == [
        (3, "duplicate_id"),
        (4, "missing_field"),
    ]
    assert loaded.rejections[0].reason == "id '7' is already used (r.jsonl:1)"  # where first
    # the reason names the spec field that asked for the column
    assert loaded.rejections[1].reason.startswith("missing field(s): doc (data.fields.group) (")
    assert loaded.examples[0].to_row() == {
        "id": "7",
        "text": "one",
        "label": "a",
        "group": "d1",
        "origin": "r.jsonl:1",
        "source": "r",
    }


def test_split_column_values_outside_the_three_splits_are_quarantined(tmp_path: Path) -> None:
    rows = [("a", "train"), ("b", "validation"), ("c", "dev"), ("d", "test")]
    write_lines(tmp_path / "r.jsonl", [j({"text": t, "label": "l", "part": s}) for t, s in rows])
    spec = data_spec([{"type": "jsonl", "path": "r.jsonl"}], fields={"split": "part"})
    loaded = load_sources(spec, None, tmp_path)
    assert loaded.presplit
    assert [(e.text, e.split) for e in loaded.examples] == [
        ("a", "train"),
        ("b", "validation"),
        ("d", "test"),
    ]
    assert [(r.line, r.kind) for r in loaded.rejections] == [(3, "bad_split_value")]


def test_mixing_split_and_unsplit_sources_is_refused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_lines(tmp_path / f"{name}.jsonl", [j({"text": name, "label": "l"})])
    spec = data_spec(
        [
            {"type": "jsonl", "path": "a.jsonl", "split": "train"},
            {"type": "jsonl", "path": "b.jsonl"},
        ]
    )
    with pytest.raises(DataError, match=r"data\.sources\[1\]\.split"):
        load_sources(spec, None, tmp_path)


def test_source_hashes_are_recorded(tmp_path: Path) -> None:
    write_lines(tmp_path / "r.jsonl", [j({"text": "x", "label": "a"})])
    first = load_sources(data_spec([{"type": "jsonl", "path": "r.jsonl"}]), None, tmp_path)
    write_lines(tmp_path / "r.jsonl", [j({"text": "y", "label": "a"})])
    second = load_sources(data_spec([{"type": "jsonl", "path": "r.jsonl"}]), None, tmp_path)
    assert first.sources[0]["path"] == "r.jsonl"
    assert (
        second.sources[0]["sha256"]
        == hashlib.sha256((tmp_path / "r.jsonl").read_bytes()).hexdigest()
    )
    assert first.sources[0]["sha256"] != second.sources[0]["sha256"]


def test_natural_id_order() -> None:
    ids = ["f:10", "f:9", "f:1", "e:100"]
    rows = [Example(i, "t", "l", "f", None) for i in ids]
    assert [r.id for r in sorted(rows, key=Example.sort_key)] == ["e:100", "f:1", "f:9", "f:10"]


def test_a_generative_target_says_whether_it_was_empty_or_of_another_type(tmp_path: Path) -> None:
    rows = [j({"text": "t", "target": ""}), j({"text": "t", "target": 3})]
    write_lines(tmp_path / "rows.jsonl", rows)
    data = data_spec([{"type": "jsonl", "path": "rows.jsonl"}])
    loaded = load_sources(data, None, tmp_path, generative=True)
    reasons = [r.reason for r in loaded.rejections]
    assert reasons == [
        "target must be a JSON object or a non-empty string, got an empty string",
        "target must be a JSON object or a non-empty string, got int",
    ]


def test_an_extraction_target_written_as_a_string_is_the_object_it_holds(tmp_path: Path) -> None:
    """A completion column of JSON text had been kept as text, and inspect then called it
    truncated (`target_truncated`) while baseline refused it as no object."""
    rows = [
        j({"text": "t1", "target": '{"a": 1}'}),
        j({"text": "t2", "target": '```json\n{"a": 1}\n```'}),
        j({"text": "t3", "target": '{"a": 1, "a": 2}'}),
        j({"text": "t4", "target": "[1]"}),
    ]
    write_lines(tmp_path / "rows.jsonl", rows)
    data = data_spec([{"type": "jsonl", "path": "rows.jsonl"}])
    loaded = load_sources(data, None, tmp_path, generative=True, object_target=True)
    assert [ex.target for ex in loaded.examples] == [{"a": 1}]
    reasons = [r.reason for r in loaded.rejections]
    assert [r.kind for r in loaded.rejections] == ["bad_target"] * 3
    assert "(a Markdown fence around it)" in reasons[0]
    assert "duplicate key 'a'" in reasons[1] and "an array, not an object" in reasons[2]
    format_lab = load_sources(data, None, tmp_path, generative=True)  # a format target is text
    assert len(format_lab.examples) == 4


def test_a_list_label_in_a_classification_lab_points_at_multilabel(tmp_path: Path) -> None:
    write_lines(tmp_path / "rows.jsonl", [j({"text": "t", "label": ["a", "b"]})])
    loaded = load_sources(data_spec([{"type": "jsonl", "path": "rows.jsonl"}]), None, tmp_path)
    (rejected,) = loaded.rejections
    assert rejected.reason.endswith(
        "got list (several labels a row: task.type multilabel reads lists)"
    )


def test_a_tsv_field_that_starts_with_a_quote_says_what_the_file_is_and_the_fix(
    tmp_path: Path,
) -> None:
    """It read "not valid CSV: '\\t' expected after '\"'" with no fix, of a TSV file."""
    write_lines(tmp_path / "rows.tsv", [b"text\tlabel", b'"Breaking" market news\tbiz', b"ok\tbiz"])
    loaded = load_sources(data_spec([{"type": "tsv", "path": "rows.tsv"}]), None, tmp_path)
    (bad,) = loaded.rejections
    assert bad.reason.startswith("not valid TSV (tab-separated, quoted as CSV): ")
    assert "quote the whole field and double each quote inside it" in bad.reason


def test_a_scratch_file_that_cannot_be_written_is_the_store_s_not_the_source_s(tmp_path):
    """A full disk (or a read-only store) while texts were set aside read "r.jsonl cannot be
    read (No space left on device)": the user was sent to a file that reads fine."""
    import errno

    write_lines(tmp_path / "r.jsonl", [j({"text": "x", "label": "a"})])

    def full(text: str):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DataError) as caught:
        load_sources(data_spec([{"type": "jsonl", "path": "r.jsonl"}]), None, tmp_path, hold=full)
    said = str(caught.value)
    assert "cannot be read" not in said and "r.jsonl" not in said
    assert "scratch file in the lab's store" in said and "No space left on device" in said
