"""`build_data` on tiny image labs (task image_classification): the sources, the quarantine of
bad images, the version's rows and images, duplicates across splits, the version id. The
images are made here with Pillow, 32x32 pixels."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, PngImagePlugin

from tunelab.core.spec import Spec, validate_spec
from tunelab.core.store import SealedError, Store, read_json, read_jsonl
from tunelab.data import DataError, build_data

ROW_KEYS = {
    "id",
    "image",
    "label",
    "width",
    "height",
    "mode",
    "format",
    "bytes_sha256",
    "pixels_sha256",
    "dhash",
    "file",
    "origin",
    "source",
}
"""The keys of an image row: a contract that inspection codes against."""


@pytest.fixture(autouse=True)
def _quiet() -> None:
    datasets.disable_progress_bars()


def picture(seed: int, size: int = 32) -> Image.Image:
    """A smooth random picture: 5x5 random colours blown up, so resizing keeps its shape."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 255, (5, 5, 3), dtype=np.uint8))
    return small.resize((size, size), Image.Resampling.BICUBIC)


def save(path: Path, image: Image.Image, **options) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, **options)
    return path


def image_spec(sources: list[dict], **data: object) -> Spec:
    return validate_spec(
        {
            "task": {"type": "image_classification"},
            "data": {"sources": sources, **data},
            "model": {"path": "x"},
        }
    )


def build(lab: Path, spec: Spec) -> dict:
    return build_data(spec, lab, Store(lab))


def label_folders(root: Path, seeds: range, labels: tuple[str, ...] = ("cat", "dog")) -> None:
    for seed in seeds:
        save(root / labels[seed % len(labels)] / f"{seed}.png", picture(seed))


def stored_rows(lab: Path, version: str) -> dict[str, list[dict]]:
    folder = Store(lab).data_dir(version)
    return {s: read_jsonl(folder / f"{s}.jsonl") for s in ("train", "validation", "test")}


def accounted(report: dict) -> bool:
    return report["rows_read"] == (
        report["kept"] + report["quarantined"] + report["duplicates_removed"]
    )


FOLDER = [{"type": "image_folder", "path": "pics"}]


def test_a_folder_source_becomes_a_version_of_image_rows_and_images(tmp_path: Path) -> None:
    label_folders(tmp_path / "pics", range(14))
    report = build(tmp_path, image_spec(FOLDER))

    assert (report["rows_read"], report["kept"], report["quarantined"]) == (14, 14, 0)
    assert report["labels"] == ["cat", "dog"]
    assert report["images"]["files"] == 14 and report["images"]["formats"] == {"PNG": 14}
    folder = Store(tmp_path).data_dir(report["version"])
    assert report["images"]["folder"] == f".tunelab/data/{report['version']}/images"
    rows = [r for split in stored_rows(tmp_path, report["version"]).values() for r in split]
    assert len(rows) == 14
    for row in rows:
        assert set(row) == ROW_KEYS
        source_file = tmp_path / row["file"]
        assert (
            row["id"] == row["origin"] == row["file"] == f"pics/{row['label']}/{source_file.name}"
        )
        assert row["source"] == "pics"
        assert (row["width"], row["height"], row["mode"], row["format"]) == (32, 32, "RGB", "PNG")
        assert row["image"] == f"images/{row['bytes_sha256']}.png"
        kept = (folder / row["image"]).read_bytes()
        assert kept == source_file.read_bytes()
        assert hashlib.sha256(kept).hexdigest() == row["bytes_sha256"]
    manifest = read_json(folder / "manifest.json")
    assert {r["image"] for r in rows} <= set(manifest["files"])  # fsck hashes them
    assert manifest["test_sha256"] == manifest["files"]["test.jsonl"]
    assert manifest["settings"]["images"]["max_pixels"] == 50_000_000
    assert manifest["settings"]["images"]["image_hamming"] == 6
    assert manifest["images"]["pillow"]
    with pytest.raises(SealedError):
        Store(tmp_path).read_split(report["version"], "test")
    assert not list((folder.parent).glob(".*.tmp"))  # the staged images are gone


def test_each_bad_image_of_a_folder_is_quarantined_and_the_counts_add_up(tmp_path: Path) -> None:
    label_folders(tmp_path / "pics", range(14))
    cat = tmp_path / "pics" / "cat"
    (cat / "empty.png").write_bytes(b"")
    (cat / "notes.txt").write_text("not a picture")
    png = (cat / "0.png").read_bytes()
    (cat / "cut.png").write_bytes(png[: len(png) // 2])
    save(cat / "old.bmp", picture(40))
    save(cat / "huge.png", picture(41, 64))  # 4,096 pixels, over max_pixels
    save(tmp_path / "pics" / "loose.png", picture(42))  # in no label folder

    report = build(tmp_path, image_spec(FOLDER, images={"max_pixels": 2_000}))

    assert report["quarantine"]["reasons"] == {
        "image_empty": 1,
        "image_too_large": 1,
        "image_truncated": 1,
        "image_unreadable": 1,
        "image_unsupported": 1,
        "outside_label_folder": 1,
    }
    assert (report["rows_read"], report["kept"], report["quarantined"]) == (20, 14, 6)
    assert accounted(report)
    quarantine = read_jsonl(Store(tmp_path).data_dir(report["version"]) / "quarantine.jsonl")
    where = {q["kind"]: (q["file"], q["line"]) for q in quarantine}
    assert where["image_truncated"] == ("pics/cat/cut.png", None)
    assert where["image_unsupported"] == ("pics/cat/old.bmp", None)
    too_large = next(q for q in quarantine if q["kind"] == "image_too_large")
    assert "more than data.images.max_pixels (2,000)" in too_large["reason"]


def path_rows(lab: Path) -> list[dict]:
    label_folders(lab / "pics", range(14))
    return [
        {"image": f"pics/{'cat' if i % 2 == 0 else 'dog'}/{i}.png", "label": "cd"[i % 2]}
        for i in range(14)
    ]


def write_source(lab: Path, kind: str, rows: list[dict]) -> dict:
    if kind == "jsonl":
        (lab / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "csv":
        with (lab / "rows.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, ["image", "label"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), lab / "rows.parquet")
    return {"type": kind, "path": f"rows.{kind}"}


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_a_file_names_its_images_by_paths_relative_to_the_lab(tmp_path: Path, kind) -> None:
    source = write_source(tmp_path, kind, path_rows(tmp_path))
    report = build(tmp_path, image_spec([source]))

    assert (report["rows_read"], report["kept"], report["quarantined"]) == (14, 14, 0)
    rows = [r for split in stored_rows(tmp_path, report["version"]).values() for r in split]
    first = min(rows, key=lambda r: int(r["origin"].rpartition(":")[2]))
    assert set(first) == ROW_KEYS
    assert (first["origin"], first["file"], first["label"]) == (
        f"rows.{kind}:{2 if kind == 'csv' else 1}",
        "pics/cat/0.png",
        "c",
    )
    folder = Store(tmp_path).data_dir(report["version"])
    assert (folder / first["image"]).read_bytes() == (tmp_path / "pics/cat/0.png").read_bytes()


def test_bad_image_rows_of_a_file_are_quarantined_with_file_and_line(tmp_path: Path) -> None:
    rows = path_rows(tmp_path)
    (tmp_path / "empty.png").write_bytes(b"")
    save(tmp_path.parent / "elsewhere.png", picture(50))
    rows += [
        {"image": "pics/cat/nope.png", "label": "c"},  # line 15
        {"image": "../elsewhere.png", "label": "c"},
        {"image": 7, "label": "c"},
        {"image": "empty.png", "label": "c"},
        {"label": "c"},
    ]
    source = write_source(tmp_path, "jsonl", rows)
    report = build(tmp_path, image_spec([source]))

    quarantine = read_jsonl(Store(tmp_path).data_dir(report["version"]) / "quarantine.jsonl")
    assert [(q["file"], q["line"], q["kind"]) for q in quarantine] == [
        ("rows.jsonl", 15, "image_missing"),
        ("rows.jsonl", 16, "image_outside_lab"),
        ("rows.jsonl", 17, "bad_image_type"),
        ("rows.jsonl", 18, "image_empty"),
        ("rows.jsonl", 19, "missing_field"),
    ]
    assert "allow_outside_lab" in quarantine[1]["reason"]
    assert quarantine[3]["reason"].startswith("empty.png: ")
    assert accounted(report) and report["kept"] == 14

    allowed = build(tmp_path, image_spec([source], allow_outside_lab=True))
    assert "image_outside_lab" not in allowed["quarantine"]["reasons"]
    assert allowed["kept"] == 15

    kept_image = stored_rows(tmp_path, report["version"])["train"][0]["image"]
    store_file = f".tunelab/data/{report['version']}/{kept_image}"
    source = write_source(tmp_path, "jsonl", [*rows, {"image": store_file, "label": "c"}])
    in_store = build(tmp_path, image_spec([source]))
    assert in_store["quarantine"]["reasons"]["image_in_store"] == 1


def test_a_saved_dataset_with_an_image_column(tmp_path: Path) -> None:
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("string")})
    pictures = [picture(seed) for seed in range(14)]
    dataset = datasets.Dataset.from_dict(
        {
            "image": [*pictures, {"bytes": b"no picture", "path": None}],
            "label": ["a", "b"] * 7 + ["a"],
        },
        features=features,
    )
    dataset.save_to_disk(str(tmp_path / "hf"))
    report = build(tmp_path, image_spec([{"type": "hf_dataset", "path": "hf"}]))

    assert (report["kept"], report["quarantine"]["reasons"]) == (14, {"image_unreadable": 1})
    rows = [r for split in stored_rows(tmp_path, report["version"]).values() for r in split]
    first = next(r for r in rows if r["id"] == "hf:1")
    assert set(first) == ROW_KEYS and first["file"] == "hf:1"
    assert first["format"] == "PNG" and first["label"] == "a"


def split_folders(lab: Path) -> list[dict]:
    """Three already split image folders with one copy of each kind across them."""
    label_folders(lab / "train", range(8))
    label_folders(lab / "validation", range(20, 24))
    label_folders(lab / "test", range(30, 34))
    (lab / "train" / "cat" / "same-bytes.png").write_bytes((lab / "test/cat/30.png").read_bytes())
    original = Image.open(lab / "validation/dog/21.png")
    save(lab / "train" / "dog" / "lossless.webp", original, lossless=True)
    small = Image.open(lab / "validation/cat/20.png").resize((24, 24))
    save(lab / "train" / "cat" / "small.jpg", small, quality=75)
    return [
        {"type": "image_folder", "path": split, "split": split}
        for split in ("train", "validation", "test")
    ]


def test_exact_and_near_duplicates_across_splits(tmp_path: Path) -> None:
    report = build(tmp_path, image_spec(split_folders(tmp_path)))

    dups = report["duplicates"]
    assert dups["counts"] == {
        "train-test": 1,
        "train-validation": 1,
        "near:train-validation": 1,
    }
    by_id = {p["a"]["id"]: p for p in dups["pairs"]}
    exact_bytes = by_id["train/cat/same-bytes.png"]
    assert (exact_bytes["method"], exact_bytes["b"]["id"]) == ("exact", "test/cat/30.png")
    assert exact_bytes["snippet"] == "train/cat/same-bytes.png"  # never the test file
    lossless = by_id["train/dog/lossless.webp"]
    assert (lossless["method"], lossless["b"]["id"]) == ("exact", "validation/dog/21.png")
    resized = by_id["train/cat/small.jpg"]
    assert (resized["method"], resized["b"]["id"]) == ("near", "validation/cat/20.png")
    assert 0.9 < resized["similarity"] < 1
    assert report["duplicates_removed"] == 3 and accounted(report)
    train_ids = {r["id"] for r in stored_rows(tmp_path, report["version"])["train"]}
    assert not train_ids & {"train/cat/same-bytes.png", "train/dog/lossless.webp"}

    kept = build(tmp_path, image_spec(split_folders(tmp_path), dedup={"policy": "report"}))
    assert kept["duplicates"]["counts"] == dups["counts"]
    assert kept["duplicates_removed"] == 0 and kept["version"] != report["version"]
    strict = build(tmp_path, image_spec(split_folders(tmp_path), dedup={"image_hamming": 0}))
    assert "near:train-validation" not in strict["duplicates"]["counts"]


def test_the_same_picture_with_two_labels_is_a_conflict(tmp_path: Path) -> None:
    label_folders(tmp_path / "pics", range(14))
    save(tmp_path / "pics" / "dog" / "also-a-cat.webp", picture(0), lossless=True)  # cat/0.png
    report = build(tmp_path, image_spec(FOLDER))
    assert report["quarantine"]["reasons"] == {"label_conflict": 2}
    assert report["conflicts"]["examples"][0]["ids"] == [
        "pics/cat/0.png",
        "pics/dog/also-a-cat.webp",
    ]


def test_the_version_id_follows_the_image_bytes(tmp_path: Path) -> None:
    label_folders(tmp_path / "pics", range(14))
    spec = image_spec(FOLDER)
    first = build(tmp_path, spec)
    again = build(tmp_path, spec)
    assert (again["version"], again["new"]) == (first["version"], False)

    target = tmp_path / "pics" / "cat" / "4.png"
    before = target.read_bytes()
    note = PngImagePlugin.PngInfo()
    note.add_text("comment", "one more byte")
    with Image.open(target) as image:
        image.load()
    image.save(target, pnginfo=note)  # the same pixels, other bytes
    assert target.read_bytes() != before
    changed = build(tmp_path, spec)
    assert changed["version"] != first["version"]
    assert changed["rows_id"] != first["rows_id"]
    rows = {
        r["id"]: r for split in stored_rows(tmp_path, changed["version"]).values() for r in split
    }
    old = {r["id"]: r for split in stored_rows(tmp_path, first["version"]).values() for r in split}
    row, was = rows["pics/cat/4.png"], old["pics/cat/4.png"]
    assert row["pixels_sha256"] == was["pixels_sha256"]
    assert row["bytes_sha256"] != was["bytes_sha256"]

    target.write_bytes(before)
    assert build(tmp_path, spec)["version"] == first["version"]
    assert (
        build(tmp_path, image_spec(FOLDER, images={"max_pixels": 10_000}))["version"]
        != (first["version"])
    )


def test_fsck_checks_a_versions_images(tmp_path: Path) -> None:
    from tunelab.stages.fsck import fsck

    label_folders(tmp_path / "pics", range(14))
    report = build(tmp_path, image_spec(FOLDER))
    assert fsck(tmp_path)["passed"]
    row = stored_rows(tmp_path, report["version"])["test"][0]
    image = Store(tmp_path).data_dir(report["version"]) / row["image"]
    image.write_bytes(image.read_bytes() + b"!")
    problems = fsck(tmp_path)["problems"]
    assert [p["path"] for p in problems] == [f".tunelab/data/{report['version']}/{row['image']}"]


@pytest.mark.parametrize(
    ("task", "data", "field"),
    [
        ("image_classification", {"sources": [{"type": "folder", "path": "pics"}]}, "type"),
        ("classification", {"sources": FOLDER}, "type"),
        (
            "image_classification",
            {"sources": FOLDER, "cleaning": [{"rule": "lowercase"}]},
            "cleaning",
        ),
        ("image_classification", {"sources": FOLDER, "eval_from": "abc"}, "eval_from"),
    ],
)
def test_sources_and_settings_that_do_not_fit_the_task_are_refused(
    tmp_path: Path, task, data, field
) -> None:
    label_folders(tmp_path / "pics", range(4))
    spec = validate_spec({"task": {"type": task}, "data": data, "model": {"path": "x"}})
    with pytest.raises(DataError, match=rf"data\.(sources\[0\]\.)?{field}"):
        build(tmp_path, spec)
    assert not (tmp_path / ".tunelab" / "data").exists() or not list(
        (tmp_path / ".tunelab" / "data").iterdir()
    )


def test_unusable_image_data_leaves_no_staged_images(tmp_path: Path) -> None:
    label_folders(tmp_path / "pics", range(2))  # too few for three splits
    with pytest.raises(DataError, match="split is empty"):
        build(tmp_path, image_spec(FOLDER))
    assert not list((tmp_path / ".tunelab" / "data").glob(".*"))
