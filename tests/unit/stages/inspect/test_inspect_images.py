"""Image inspection: sizes and modes per category, the size shortcut, contact sheets."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from PIL import Image

from tunelab.core.lab import Lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.stages.inspect.images import image_view, shortcut_accuracy

SPEC = {"data": {"sources": [{"type": "jsonl", "path": "d"}]}, "model": {"path": "m"}}


def image_row(lab: Path, i: int, label: str, size: tuple[int, int], mode: str = "RGB") -> dict:
    """A row as the data step writes it, with its image stored under the version's images/."""
    colour = {"L": 90, "P": 3}.get(mode, (40 * i % 255, 80, 160, 255)[: len(mode)])
    buffer = io.BytesIO()
    Image.new(mode, size, colour).save(buffer, format="PNG")
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()
    path = lab / ".tunelab" / "data" / "v1" / "images" / f"{digest}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return {
        "id": f"{label}-{i}",
        "image": f"images/{digest}.png",
        "label": label,
        "width": size[0],
        "height": size[1],
        "mode": mode,
        "format": "PNG",
    }


def lab_at(tmp_path: Path) -> Lab:
    return Lab(tmp_path, validate_spec(SPEC), Store(tmp_path), None, data="v1")  # type: ignore[arg-type]


def test_one_category_all_16x16_is_a_blocking_size_shortcut(tmp_path):
    rows = [image_row(tmp_path, i, "icon", (16, 16)) for i in range(6)]
    rows += [image_row(tmp_path, i, "photo", (40 + 3 * i, 30 + 2 * i)) for i in range(6)]
    summary, findings = image_view(lab_at(tmp_path), rows, "train")
    (shortcut,) = [f for f in findings if f["code"] == "size_shortcut"]
    assert shortcut["blocking"] and "size alone" in shortcut["message"]
    assert shortcut["example"] == "icon: 16x16"
    assert summary["categories"]["icon"]["width"] == {
        "min": 16,
        "p5": 16,
        "p50": 16,
        "p95": 16,
        "max": 16,
    }
    assert summary["categories"]["photo"]["count"] == 6


def test_sizes_shared_by_every_category_are_no_shortcut(tmp_path):
    rows = [
        image_row(tmp_path, i, label, (16 + 8 * (i % 3), 16))
        for label in ("a", "b")
        for i in range(6)
    ]
    _, findings = image_view(lab_at(tmp_path), rows, "train")
    assert [f["code"] for f in findings] == []


def test_sizes_drawn_alike_for_every_category_predict_nothing():
    sizes = [(20 + (7 * i) % 23, 10 + (5 * i) % 17) for i in range(40)]
    rows = [{"label": "ab"[i % 2], "width": w, "height": h} for i, (w, h) in enumerate(sizes)]
    assert shortcut_accuracy(rows, lambda r: (r["width"], r["height"])) is None


def test_a_category_of_one_mode_only_is_named(tmp_path):
    rows = [image_row(tmp_path, i, "logo", (20, 20), "RGBA") for i in range(4)]
    rows += [image_row(tmp_path, i, "scan", (20, 20), "L") for i in range(2)]
    rows += [image_row(tmp_path, i + 2, "scan", (20, 20), "RGB") for i in range(2)]
    _, findings = image_view(lab_at(tmp_path), rows, "train")
    (mode,) = [f for f in findings if f["code"] == "mode_by_category"]
    assert not mode["blocking"] and mode["example"] == "logo: RGBA"
    assert "no other category's is: as stored, the mode alone tells" in mode["message"]
    assert "tunelab makes every image RGB" in mode["message"]  # the mode never reaches a model
    # the emoji's case: one category all palette, the others palette with a few RGBA
    rows = [image_row(tmp_path, i, "people", (20, 20), "P") for i in range(4)]
    rows += [image_row(tmp_path, i + 4, "food", (20, 20), m) for i, m in enumerate("PPP")]
    rows += [image_row(tmp_path, 9, "food", (20, 20), "RGBA")]
    _, findings = image_view(lab_at(tmp_path), rows, "train")
    (mode,) = [f for f in findings if f["code"] == "mode_by_category"]
    assert "a mode other categories have too; the 1 in RGBA all belong to other" in mode["message"]


def test_each_category_gets_a_contact_sheet_of_its_images(tmp_path):
    rows = [image_row(tmp_path, i, "cat dog", (30, 20)) for i in range(5)]
    rows += [image_row(tmp_path, i, "bird", (20, 30), "RGBA") for i in range(20)]
    summary, _ = image_view(lab_at(tmp_path), rows, "validation")
    sheets = {label: c["contact_sheet"] for label, c in summary["categories"].items()}
    assert sheets == {
        "bird": ".tunelab/inspect/v1/validation-bird.png",
        "cat dog": ".tunelab/inspect/v1/validation-cat_dog.png",
    }
    with Image.open(tmp_path / sheets["bird"]) as sheet:
        assert sheet.size == (4 * 104, 4 * 116)  # 16 of the 20, 4 a row
    with Image.open(tmp_path / sheets["cat dog"]) as sheet:
        assert sheet.size == (4 * 104, 2 * 116)
