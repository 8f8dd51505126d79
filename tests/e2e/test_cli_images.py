"""An image lab through the CLI: data with its quarantine, inspect with contact sheets and the
size shortcut (which blocks training), fsck clean, and the report's contact sheets."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import yaml
from PIL import Image

from conftest import tl

sys.path.insert(0, str(Path(__file__).parents[1] / "assets"))
from make_tiny import build_tiny_vit


def image_lab(root: Path) -> Path:
    """Icons all 16x16 RGBA against photos of many sizes, and one broken JPEG."""
    rng = random.Random(0)
    for label in ("icon", "photo"):
        (root / "pics" / label).mkdir(parents=True)
    for i in range(12):
        Image.effect_noise((16, 16), 60 + 5 * i).convert("RGBA").save(root / f"pics/icon/{i}.png")
        size = (rng.randint(40, 90), rng.randint(30, 70))
        Image.effect_noise(size, 40 + i).convert("RGB").save(root / f"pics/photo/{i}.jpg")
    (root / "pics/photo/broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    spec = {
        "hypothesis": {
            "behaviour": "icons apart from photos",
            "metric": "macro_f1",
            "min_effect": 0.02,
        },
        "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
        "task": {"type": "image_classification"},
        "data": {"sources": [{"type": "image_folder", "path": "pics"}]},
        "model": {"path": str(build_tiny_vit(root / "tiny-vit"))},
    }
    (root / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    return root


def test_an_image_lab_is_built_inspected_and_kept_from_training(tmp_path, capsys):
    lab = str(image_lab(tmp_path / "lab"))
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0, data
    assert data["quarantine"]["reasons"] == {"image_truncated": 1}
    assert sum(s["n"] for s in data["splits"].values()) == 24

    code, seen = tl(capsys, "inspect", "--lab", lab)
    assert code == 0 and seen["kind"] == "images"
    icon = seen["summary"]["categories"]["icon"]
    assert icon["width"]["max"] == 16 and icon["modes"] == {"RGBA": icon["count"]}
    (shortcut,) = [f for f in seen["findings"] if f["code"] == "size_shortcut"]
    assert shortcut["blocking"] and shortcut["example"] == "icon: 16x16"
    for category in seen["summary"]["categories"].values():
        with Image.open(Path(lab) / category["contact_sheet"]) as sheet:
            assert sheet.format == "PNG" and sheet.size[0] > 0
        view = category["model_view"]  # through the tiny ViT's processor: 32x32, no crop
        assert view["shape"] == [3, 32, 32] and -1 <= view["range"][0] < view["range"][1] <= 1
        assert view["kept_area"]["p50"] > 0.9 and (Path(lab) / view["contact_sheet"]).is_file()

    code, refused = tl(capsys, "run", "--lab", lab)  # the size shortcut blocks training
    assert code == 2 and "size_shortcut" in refused["error"], refused
    code, found = tl(capsys, "fsck", "--lab", lab)
    assert code == 0 and found["passed"] and found["checked"]["data_files"] > 24

    code, report = tl(capsys, "report", "--lab", lab)  # the sheets, on the page
    page = Path(report["file"]).read_text()
    assert code == 0 and page.count('<img class="sheet" src="data:image/png;base64,') == 4
    assert "icon · train split" in page and "photo · train split" in page
    assert "icon, as the model receives it · train split" in page


def test_a_raised_pixel_limit_holds_in_every_stage_after_data(tmp_path, capsys, monkeypatch):
    """An image above Pillow's own bomb limit but within a raised `data.images.max_pixels`
    was kept by `data`, then refused by Pillow's default in inspect (and training): every
    stage opens a lab's images under the limit they were accepted under. Pillow's default is
    scaled down here, so a 90x70 photo stands for a 180-million-pixel scan."""
    lab = image_lab(tmp_path / "lab")
    (lab / "pics/photo/broken.jpg").unlink()
    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    spec["data"]["images"] = {"max_pixels": 10_000}
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000)  # twice that and Pillow refuses
    code, data = tl(capsys, "data", "--lab", str(lab))
    assert code == 0 and not data["quarantine"]["reasons"], data
    code, seen = tl(capsys, "inspect", "--lab", str(lab))
    assert code == 0, seen
    assert seen["summary"]["categories"]["photo"]["model_view"]["shape"] == [3, 32, 32]
    assert Image.MAX_IMAGE_PIXELS == 1_000  # put back after each stage
