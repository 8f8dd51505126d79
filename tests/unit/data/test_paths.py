"""Where sources may be read from: the lab folder, unless `data.allow_outside_lab` says more."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tunelab.core.spec import Spec, validate_spec
from tunelab.core.store import Store
from tunelab.data import DataError, build_data
from tunelab.data.loaders import load_sources
from tunelab.data.paths import locate_file

ROWS = [{"text": f"note {i} on the {w}", "label": "ab"[i % 2]} for i, w in enumerate("uvwxyz")]


def write_rows(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def spec_for(sources: list[dict], **data: object) -> Spec:
    return validate_spec({"data": {"sources": sources, **data}, "model": {"path": "x"}})


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    (tmp_path / "lab").mkdir()
    return tmp_path / "lab"


def test_a_relative_path_out_of_the_lab_is_refused_and_the_fix_named(lab: Path) -> None:
    outside = write_rows(lab.parent / "outside.jsonl")
    spec = spec_for([{"type": "jsonl", "path": "../outside.jsonl"}])
    with pytest.raises(DataError) as err:
        build_data(spec, lab, Store(lab))
    assert str(err.value) == (
        f"data.sources[0].path: '../outside.jsonl' resolves to {outside}, outside the lab "
        f"folder {lab}; copy the data into the lab, or set data.allow_outside_lab: true to "
        "read it where it is"
    )
    assert not (lab / ".tunelab").exists()


def test_an_absolute_path_elsewhere_is_refused(lab: Path) -> None:
    outside = write_rows(lab.parent / "elsewhere" / "rows.jsonl")
    spec = spec_for([{"type": "jsonl", "path": str(outside)}])
    with pytest.raises(DataError, match=rf"'{outside}' is outside the lab folder"):
        load_sources(spec.data, None, lab)


def test_a_link_inside_the_lab_that_points_out_is_refused(lab: Path) -> None:
    outside = write_rows(lab.parent / "secret.jsonl")
    os.symlink(outside, lab / "rows.jsonl")
    spec = spec_for([{"type": "jsonl", "path": "rows.jsonl"}])
    with pytest.raises(DataError, match=rf"'rows\.jsonl' resolves to {outside}, outside"):
        load_sources(spec.data, None, lab)


def test_allowed_outside_the_path_read_is_recorded(lab: Path) -> None:
    outside = write_rows(lab.parent / "shared" / "rows.jsonl")
    os.symlink(outside, lab / "link.jsonl")
    spec = spec_for([{"type": "jsonl", "path": "link.jsonl"}], allow_outside_lab=True)
    report = build_data(spec, lab, Store(lab))
    [source] = Store(lab).data_manifest(report["version"])["sources"]
    assert source["resolved"] == str(outside)
    assert source["path"] == "link.jsonl" and source["rows"] == 6


def test_a_home_path_reads_as_it_does_for_a_model(lab: Path, monkeypatch) -> None:
    """`~/corpus.jsonl` worked for model.path and read as LAB/~/corpus.jsonl for a source."""
    from tunelab.core.spec_paths import spec_path

    monkeypatch.setenv("HOME", str(lab.parent / "home"))
    rows = write_rows(lab.parent / "home" / "corpus.jsonl")
    assert spec_path(lab, "~/corpus.jsonl") == rows and spec_path(lab, "a/b") == lab / "a/b"
    refused = spec_for([{"type": "jsonl", "path": "~/corpus.jsonl"}])
    with pytest.raises(DataError, match=rf"resolves to {rows}, outside"):
        load_sources(refused.data, None, lab)
    spec = spec_for([{"type": "jsonl", "path": "~/corpus.jsonl"}], allow_outside_lab=True)
    [source] = Store(lab).data_manifest(build_data(spec, lab, Store(lab))["version"])["sources"]
    assert source["resolved"] == str(rows) and source["rows"] == 6


def test_a_link_inside_a_folder_source_cannot_reach_out(lab: Path) -> None:
    for i, label in enumerate("abab"):
        (lab / "docs" / label).mkdir(parents=True, exist_ok=True)
        (lab / "docs" / label / f"{i}.txt").write_text(f"text number {i} of {label}")
    outside = lab.parent / "passwd"
    outside.write_text("root:x:0:0")
    os.symlink(outside, lab / "docs" / "a" / "leak.txt")
    spec = spec_for([{"type": "folder", "path": "docs"}])
    with pytest.raises(DataError, match=r"data\.sources\[0\]\.path: docs/a/leak\.txt resolves to"):
        load_sources(spec.data, None, lab)
    allowed = load_sources(
        spec_for(spec.data.model_dump()["sources"], allow_outside_lab=True).data, None, lab
    )
    [source] = allowed.sources
    assert source["files"] == ["a/0.txt", "a/2.txt", "a/leak.txt", "b/1.txt", "b/3.txt"]
    assert source["links"] == {"a/leak.txt": str(outside)}
    assert "root:x:0:0" in [e.text for e in allowed.examples]


def test_the_store_is_never_a_source(lab: Path) -> None:
    write_rows(lab / ".tunelab" / "data" / "v1" / "test.jsonl")
    spec = spec_for(
        [{"type": "jsonl", "path": ".tunelab/data/v1/test.jsonl"}], allow_outside_lab=True
    )
    with pytest.raises(
        DataError, match=r"inside the lab's store \(\.tunelab/\).*sealed test split"
    ):
        load_sources(spec.data, None, lab)
    (lab / "docs" / "a").mkdir(parents=True)  # a folder that leads into the store
    (lab / "docs" / "a" / "x.txt").symlink_to(lab / ".tunelab" / "data" / "v1" / "test.jsonl")
    folder = spec_for([{"type": "folder", "path": "docs"}])
    with pytest.raises(DataError, match=r"docs/a/x\.txt is inside the lab's store \(\.tunelab/\)"):
        load_sources(folder.data, None, lab)
    (lab / "docs" / "a" / "x.txt").unlink()
    whole = load_sources(spec_for([{"type": "folder", "path": "."}]).data, None, lab)
    assert not [f for f in whole.sources[0]["files"] if ".tunelab" in f]  # hidden: not data
    os.link(lab / ".tunelab" / "data" / "v1" / "test.jsonl", lab / "rows.jsonl")
    linked = spec_for([{"type": "jsonl", "path": "rows.jsonl"}])  # no path into the store
    with pytest.raises(
        DataError, match=r"rows\.jsonl' is a hard link to \.tunelab/data/v1/test\.jsonl"
    ):
        load_sources(linked.data, None, lab)


def test_a_lab_reached_through_a_link_reads_its_own_files(lab: Path) -> None:
    write_rows(lab / "rows.jsonl")
    os.symlink(lab, lab.parent / "lab-link")
    spec = spec_for([{"type": "jsonl", "path": "rows.jsonl"}])
    loaded = load_sources(spec.data, None, lab.parent / "lab-link")
    assert loaded.sources[0]["path"] == "rows.jsonl" and len(loaded.examples) == 6


def test_a_pattern_for_a_path_is_said_to_be_no_path(tmp_path):
    """`path: data/*.jsonl` read as a missing file, "put the file there"."""
    with pytest.raises(DataError, match=r"a path names one file or folder, not a pattern"):
        locate_file("data/*.jsonl", tmp_path, False, "data.sources[0].path")
    with pytest.raises(DataError, match=r"put the file there"):
        locate_file("data/rows.jsonl", tmp_path, False, "data.sources[0].path")
