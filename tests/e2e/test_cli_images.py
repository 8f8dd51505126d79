"""An image lab through the CLI: data with its quarantine, inspect with contact sheets and the
size shortcut, fsck clean, and the model commands refused until image models land."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml
from PIL import Image

from tunelab.cli import main


def tl(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


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
        "model": {"path": "no-image-model-yet"},
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

    for command in (["baseline"], ["check"], ["run"], ["size"]):
        code, refused = tl(capsys, *command, "--lab", lab)
        assert code == 2 and "image_classification" in refused["error"], command
    code, found = tl(capsys, "fsck", "--lab", lab)
    assert code == 0 and found["passed"] and found["checked"]["data_files"] > 24

    code, report = tl(capsys, "report", "--lab", lab)  # the sheets, on the page
    page = Path(report["file"]).read_text()
    assert code == 0 and page.count('<img class="sheet" src="data:image/png;base64,') == 2
    assert "icon · train split" in page and "photo · train split" in page
