"""The columnar formats: Parquet files and saved Hugging Face datasets, with the same row
checks and quarantine as JSONL; a row's line is its index + 1."""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data import DataError, build_data, formats
from tunelab.data.label_sets import label_set_check
from tunelab.data.loaders import load_sources

WORDS = ["otter", "maple", "copper", "lantern", "meadow", "glacier", "saffron", "quartz"]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    datasets.disable_progress_bars()


def data_spec(sources: list[dict], **data: object):
    return validate_spec({"data": {"sources": sources, **data}, "model": {"path": "x"}})


def parquet(path: Path, columns: dict[str, list]) -> dict:
    pq.write_table(pa.table(columns), path)
    return {"type": "parquet", "path": path.name}


def found(loaded) -> tuple[list, list]:
    return (
        [(e.origin, e.text, e.label) for e in loaded.examples],
        [(r.origin, r.kind) for r in loaded.rejections],
    )


def test_parquet_rows_are_checked_like_any_row(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(formats, "BATCH", 2)  # lines keep counting across batches
    source = parquet(
        tmp_path / "rows.parquet",
        {"text": ["first", None, "third", "  ", "fifth"], "label": ["a", "b", "", "a", "b"]},
    )
    loaded = load_sources(data_spec([source]).data, None, tmp_path)
    assert found(loaded) == (
        [("rows.parquet:1", "first", "a"), ("rows.parquet:5", "fifth", "b")],
        [
            ("rows.parquet:2", "null_field"),
            ("rows.parquet:3", "empty_label"),
            ("rows.parquet:4", "empty_text"),
        ],
    )
    assert loaded.rows_read == 5 and loaded.sources[0]["rows"] == 5


@pytest.mark.parametrize(
    ("columns", "kind"),
    [
        ({"text": [b"raw bytes"], "label": ["a"]}, "bad_text_type"),
        ({"text": ["x y"], "label": [["a", "b"]]}, "bad_label_type"),
        ({"text": ["x y"], "label": [0.5]}, "bad_label_type"),
        ({"body": ["x y"], "label": ["a"]}, "missing_field"),
    ],
)
def test_parquet_column_types_are_checked(tmp_path: Path, columns: dict, kind: str) -> None:
    source = parquet(tmp_path / "rows.parquet", columns)
    loaded = load_sources(data_spec([source]).data, None, tmp_path)
    assert found(loaded) == ([], [("rows.parquet:1", kind)])


def test_integer_labels_become_strings(tmp_path: Path) -> None:
    source = parquet(tmp_path / "rows.parquet", {"text": ["x y", "z w"], "label": [0, 7]})
    assert [e.label for e in load_sources(data_spec([source]).data, None, tmp_path).examples] == [
        "0",
        "7",
    ]


def test_a_parquet_file_datasets_wrote_gives_its_class_names(tmp_path: Path) -> None:
    """`datasets` keeps a ClassLabel's names in the schema's metadata (`to_parquet`, the Hub's
    files): they were read as the integers 0 and 1, class names lost."""
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )
    rows = {"text": ["so bad", "so good", "unsure"], "label": [0, 1, -1]}
    datasets.Dataset.from_dict(rows, features=features).to_parquet(tmp_path / "hub.parquet")
    source = {"type": "parquet", "path": "hub.parquet"}
    assert found(load_sources(data_spec([source]).data, None, tmp_path)) == (
        [("hub.parquet:1", "so bad", "neg"), ("hub.parquet:2", "so good", "pos")],
        [("hub.parquet:3", "empty_label")],
    )


def test_a_file_that_is_not_parquet_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "rows.parquet").write_text('{"text": "x", "label": "a"}\n')
    spec = data_spec([{"type": "parquet", "path": "rows.parquet"}])
    with pytest.raises(DataError, match=r"^rows\.parquet: not a readable Parquet file"):
        load_sources(spec.data, None, tmp_path)


def test_a_damaged_row_group_is_refused_by_name(tmp_path: Path) -> None:
    texts = [f"text number {i} " * 3 for i in range(5000)]
    pq.write_table(
        pa.table({"text": texts, "label": ["a"] * 5000}),
        tmp_path / "rows.parquet",
        row_group_size=1000,
    )
    damaged = bytearray((tmp_path / "rows.parquet").read_bytes())
    middle = len(damaged) // 2
    damaged[middle : middle + 2000] = bytes(range(250)) * 8
    (tmp_path / "rows.parquet").write_bytes(bytes(damaged))
    spec = data_spec([{"type": "parquet", "path": "rows.parquet"}])
    with pytest.raises(DataError, match=r"^rows\.parquet: unreadable after row [1-9]\d* \("):
        load_sources(spec.data, None, tmp_path)


def test_a_parquet_lab_builds_a_version(tmp_path: Path) -> None:
    texts = [f"a note about the {w}" for w in WORDS]
    source = parquet(tmp_path / "rows.parquet", {"text": texts, "label": list("abababab")})
    report = build_data(data_spec([source]), tmp_path, Store(tmp_path))
    assert report["rows_read"] == report["kept"] == 8
    [entry] = Store(tmp_path).data_manifest(report["version"])["sources"]
    assert entry["type"] == "parquet" and entry["rows"] == 8


def rows_of(n: int, offset: int = 0) -> dict[str, list]:
    return {
        "text": [f"{WORDS[(i + offset) % 8]} note {i + offset}" for i in range(n)],
        "label": [i % 2 for i in range(n)],
    }


def class_labels() -> datasets.Features:
    return datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )


def test_a_saved_dataset_gives_class_label_names(tmp_path: Path) -> None:
    columns = {"text": ["good", "bad", "unlabelled", ""], "label": [1, 0, -1, 1]}
    datasets.Dataset.from_dict(columns, features=class_labels()).save_to_disk(tmp_path / "ds")
    spec = data_spec([{"type": "hf_dataset", "path": "ds"}])
    loaded = load_sources(spec.data, None, tmp_path)
    assert found(loaded) == (
        [("ds:1", "good", "pos"), ("ds:2", "bad", "neg")],
        [("ds:3", "empty_label"), ("ds:4", "empty_text")],
    )
    assert not loaded.presplit
    assert "state.json" in loaded.sources[0]["files"]


def test_a_list_of_class_labels_gives_their_names(tmp_path: Path) -> None:
    """A multilabel column as the Hub keeps one (`List(ClassLabel)`, go_emotions' shape) was
    quarantined whole: "label 3 in the list is a number"."""
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "labels": datasets.List(datasets.ClassLabel(names=["neg", "pos", "mixed"])),
        }
    )
    columns = {"text": ["good", "both", "none"], "labels": [[1], [0, 2], []]}
    dataset = datasets.Dataset.from_dict(columns, features=features)
    dataset.save_to_disk(tmp_path / "ds")
    dataset.to_parquet(tmp_path / "ds.parquet")
    for source in ({"type": "hf_dataset", "path": "ds"}, {"type": "parquet", "path": "ds.parquet"}):
        spec = validate_spec(
            {
                "task": {"type": "multilabel"},
                "data": {"sources": [source], "fields": {"label": "labels"}},
                "model": {"path": "x"},
            }
        )
        check = label_set_check(spec.data.fields, spec.task)
        loaded = load_sources(spec.data, None, tmp_path, check=check)
        assert [e.label_set for e in loaded.examples] == [["pos"], ["mixed", "neg"], []], source


def save_dict(path: Path, splits: dict[str, int]) -> None:
    offsets = {"train": 0, "validation": 100, "test": 200, "dev": 300}
    parts = {
        name: datasets.Dataset.from_dict(rows_of(n, offsets[name]), features=class_labels())
        for name, n in splits.items()
    }
    datasets.DatasetDict(parts).save_to_disk(path)


def test_a_dataset_dict_brings_its_own_split(tmp_path: Path) -> None:
    save_dict(tmp_path / "dd", {"train": 8, "validation": 4, "test": 2})
    report = build_data(
        data_spec([{"type": "hf_dataset", "path": "dd"}]), tmp_path, Store(tmp_path)
    )
    assert report["presplit"] is True
    assert {s: c["n"] for s, c in report["splits"].items()} == {
        "train": 8,
        "validation": 4,
        "test": 2,
    }
    assert report["labels"] == ["neg", "pos"]
    train = Store(tmp_path).read_split(report["version"], "train")
    assert train[0]["origin"] == "dd/train:1" and train[0]["label"] == "neg"


def test_a_dataset_dict_of_train_and_test_gets_validation_from_its_train(tmp_path: Path) -> None:
    save_dict(tmp_path / "dd", {"train": 20, "test": 6})
    sources = [{"type": "hf_dataset", "path": "dd"}]
    with pytest.raises(DataError, match=r"data\.split\.validation_from_train: 0\.1"):
        build_data(data_spec(sources), tmp_path, Store(tmp_path))  # says how
    split = {"validation_from_train": 0.2, "seed": 0}
    report = build_data(data_spec(sources, split=split), tmp_path, Store(tmp_path))
    assert {s: c["n"] for s, c in report["splits"].items()} == {
        "train": 16,
        "validation": 4,
        "test": 6,
    }
    assert report["validation_from_train"] == {"share": 0.2, "rows": 4, "seed": 0}
    validation = Store(tmp_path).read_split(report["version"], "validation")
    assert {r["origin"].split(":")[0] for r in validation} == {"dd/train"}
    ratio = data_spec([{"type": "jsonl", "path": "rows.jsonl"}], split=split)
    (tmp_path / "rows.jsonl").write_text('{"text": "a note", "label": "pos"}\n')
    with pytest.raises(DataError, match=r"set data\.split\.validation instead"):
        build_data(ratio, tmp_path, Store(tmp_path))


def test_split_on_a_dataset_dict_reads_only_that_split(tmp_path: Path) -> None:
    save_dict(tmp_path / "dd", {"train": 6, "validation": 3, "dev": 2})
    (tmp_path / "val.jsonl").write_text('{"text": "other validation text", "label": "pos"}\n')
    sources = [
        {"type": "hf_dataset", "path": "dd", "split": "train"},
        {"type": "jsonl", "path": "val.jsonl", "split": "validation"},
    ]
    loaded = load_sources(data_spec(sources).data, None, tmp_path)
    assert [e.split for e in loaded.examples] == ["train"] * 6 + ["validation"]
    assert loaded.rows_read == 7


def test_a_dataset_dict_with_other_split_names_is_refused(tmp_path: Path) -> None:
    save_dict(tmp_path / "dd", {"train": 4, "dev": 2})
    spec = data_spec([{"type": "hf_dataset", "path": "dd"}])
    with pytest.raises(DataError, match=r"^dd: the DatasetDict has split\(s\) \['dev'\], but a "):
        load_sources(spec.data, None, tmp_path)
    only = data_spec([{"type": "hf_dataset", "path": "dd", "split": "test"}])
    with pytest.raises(DataError, match=r"no split 'test'; it has \['train', 'dev'\]"):
        load_sources(only.data, None, tmp_path)


def test_a_dataset_dict_beside_an_unsplit_source_is_refused(tmp_path: Path) -> None:
    save_dict(tmp_path / "dd", {"train": 4, "validation": 2})
    (tmp_path / "more.jsonl").write_text('{"text": "x", "label": "pos"}\n')
    sources = [{"type": "hf_dataset", "path": "dd"}, {"type": "jsonl", "path": "more.jsonl"}]
    with pytest.raises(DataError, match=r"data\.sources\[1\]\.split: other sources are already"):
        load_sources(data_spec(sources).data, None, tmp_path)


def test_a_folder_that_is_no_saved_dataset_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "rows.jsonl").write_text("{}\n")
    spec = data_spec([{"type": "hf_dataset", "path": "ds"}])
    with pytest.raises(DataError, match=r"^ds: not a folder saved with datasets' save_to_disk"):
        load_sources(spec.data, None, tmp_path)


def test_an_integer_label_column_pandas_kept_as_floats_reads_as_integers(tmp_path: Path) -> None:
    """An integer column with one empty cell is float64 in pandas (0.0, 1.0, NaN), and so in its
    Parquet: every row was quarantined as "got float", with a hint about the field's name."""
    source = parquet(
        tmp_path / "rows.parquet",
        {"text": ["a b", "c d", "e f"], "label": [0.0, 1.0, float("nan")]},
    )
    loaded = load_sources(data_spec([source]).data, None, tmp_path)
    assert [e.label for e in loaded.examples] == ["0", "1"]
    (empty,) = loaded.rejections
    assert (empty.kind, empty.reason) == ("empty_label", "label is empty (NaN: an empty cell)")
