"""`tunelab inspect` on an image lab: sizes, aspect ratios and modes per category, the findings
they lead to, and a contact sheet per category.

The guide asks to "check the sizes and the transforms applied to each category" and to look at
a few examples of each category by hand. This module reads the split's rows (the data step
wrote each image's width, height, mode and format, and a content-addressed copy of its bytes
under the version's `images/`) and reports, per category:

- the distribution of widths, heights and aspect ratios (p5, p50, p95, min, max), and the counts
  of each mode (RGB, RGBA, L, P...) and file format;
- **size_shortcut** (blocking): the size alone, or the aspect ratio alone, predicts the category.
  Measured with a depth-3 decision tree on the width and height (or the aspect ratio), scored
  by stratified cross-validation: one that gets `SHORTCUT_ACCURACY` of the images right and
  beats always answering the largest category by `SHORTCUT_MARGIN` is a shortcut a model will
  learn instead of the content (one class's images all 16x16, another's all larger);
- **mode_by_category** (a warning): a category whose images all have one mode while others have
  other modes: the channels themselves tell the category (an alpha channel or a palette);
- a contact sheet per category: up to `SHEET_IMAGES` images of the split in id order, as
  thumbnails with their size, written as a PNG under `.tunelab/inspect/<version>/` (a path the
  result gives), as they are stored;
- the same images as the model receives them, after the base's own processor (shape, value
  range, the area its resize and crop keep, a second contact sheet, and the finding
  **crop_cuts**: `pixels`), when the model folder opens.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from tunelab.core.lab import Lab
from tunelab.core.layout import INSPECT

SHORTCUT_ACCURACY = 0.8
SHORTCUT_MARGIN = 0.25
SHEET_IMAGES = 16
THUMB = 96
"""Contact sheet: at most 16 images a category, each fitted into a 96-pixel square."""


def image_view(lab: Lab, rows: list[dict], split: str) -> tuple[dict, list[dict]]:
    """The per-category summary (with each category's contact sheet) and the findings."""

    by_label: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_label[row["label"]].append(row)
    folder = lab.store.path(INSPECT, lab.data_version)
    categories = {}
    for label in sorted(by_label):
        version_dir, limit = lab.store.data_dir(lab.data_version), lab.spec.data.images.max_pixels
        sheet = contact_sheet(version_dir, by_label[label], limit)
        path = folder / f"{split}-{_safe(label)}.png"
        _save_png(sheet, path)
        categories[label] = describe(by_label[label]) | {
            "contact_sheet": str(path.relative_to(lab.path))
        }
    findings = image_findings(rows)
    seen, why = _model_view(lab, by_label, folder, split)
    for label, view in seen.items():
        categories[label]["model_view"] = view | {
            "contact_sheet": str(view["contact_sheet"].relative_to(lab.path))
        }
    if seen:
        from tunelab.stages.inspect.findings import finding
        from tunelab.stages.inspect.pixels import crop_findings

        findings += crop_findings(seen, finding)
    summary = {"images": len(rows), "categories": categories}
    return summary | ({"model_view": why} if why else {}), findings


def _model_view(lab: Lab, by_label: dict, folder: Path, split: str) -> tuple[dict, str | None]:
    """Each category through the base's own image processor (`pixels`), or why it
    could not be shown (the model folder cannot be opened yet)."""
    from tunelab.core.errors import TunelabError
    from tunelab.modeling.render import lab_renderer
    from tunelab.stages.inspect.pixels import model_view

    labels = sorted(by_label)
    try:
        renderer = lab_renderer(lab.spec, lab.path, labels, lab.data_version)
    except (TunelabError, OSError, ValueError) as err:
        return {}, f"not shown: the model's image processor did not open ({err})"
    return model_view(renderer, by_label, folder, split, _safe), None


def image_findings(rows: list[dict]) -> list[dict]:
    """The findings of some images (see the module docstring), without the contact sheets:
    what `inspect` shows and `run` checks before it trains."""
    from tunelab.stages.inspect.findings import finding

    by_label: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_label[row["label"]].append(row)
    findings = []
    for what, features, key in (
        ("size", lambda r: (r["width"], r["height"]), _size),
        ("aspect ratio", lambda r: (r["width"] / max(r["height"], 1),), _aspect),
    ):
        shortcut = shortcut_accuracy(rows, features)
        if shortcut is not None:
            accuracy, majority = shortcut
            findings.append(
                finding(
                    "size_shortcut",
                    len(rows),
                    _most_uniform(rows, key),
                    f"the {what} alone gives the category of {accuracy:.0%} of the images "
                    f"(always answering the largest category: {majority:.0%}): a model learns "
                    f"the {what}, not the content. Resize the images to one size at the source, "
                    "or add images of every size to every category",
                )
            )
            break  # the aspect ratio is the size's: one finding says it
    findings += _mode_findings(by_label, finding)
    return findings


def describe(rows: list[dict]) -> dict:
    """Widths, heights and aspect ratios (percentiles), modes and formats of some images."""
    widths = np.array([r["width"] for r in rows], dtype=float)
    heights = np.array([r["height"] for r in rows], dtype=float)
    return {
        "count": len(rows),
        "width": _spread(widths),
        "height": _spread(heights),
        "aspect": _spread(widths / np.maximum(heights, 1), digits=2),
        "modes": dict(Counter(r["mode"] for r in rows).most_common()),
        "formats": dict(Counter(r.get("format") for r in rows).most_common()),
    }


def _spread(values: np.ndarray, digits: int = 0) -> dict:
    def rounded(x: float) -> float | int:
        return round(float(x), digits) if digits else round(float(x))

    quantiles = np.percentile(values, [5, 50, 95])
    return {
        "min": rounded(values.min()),
        "p5": rounded(quantiles[0]),
        "p50": rounded(quantiles[1]),
        "p95": rounded(quantiles[2]),
        "max": rounded(values.max()),
    }


def _size(row: dict) -> str:
    return f"{row['width']}x{row['height']}"


def _aspect(row: dict) -> str:
    return f"{row['width'] / max(row['height'], 1):.2f}"


def shortcut_accuracy(rows: list[dict], features) -> tuple[float, float] | None:
    """(accuracy, majority rate) when `features` of an image alone predict its category as a
    shortcut (see the module docstring), else None. A depth-3 decision tree, scored by
    stratified cross-validation; needs two categories of two images or more."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.tree import DecisionTreeClassifier

    labels = [r["label"] for r in rows]
    counts = Counter(labels)
    folds = min(5, min(counts.values()))
    if len(counts) < 2 or folds < 2:
        return None
    x = np.array([features(r) for r in rows], dtype=float)
    tree = DecisionTreeClassifier(max_depth=3, random_state=0)
    split = StratifiedKFold(folds, shuffle=True, random_state=0)
    accuracy = float(cross_val_score(tree, x, labels, cv=split).mean())
    majority = counts.most_common(1)[0][1] / len(rows)
    if accuracy >= SHORTCUT_ACCURACY and accuracy >= majority + SHORTCUT_MARGIN:
        return accuracy, majority
    return None


def _most_uniform(rows: list[dict], key) -> str:
    """The category whose images share one value of `key` the most, with that value."""
    by_label: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        by_label[row["label"]][key(row)] += 1
    label, values = max(by_label.items(), key=lambda kv: kv[1].most_common(1)[0][1] / kv[1].total())
    return f"{label}: {values.most_common(1)[0][0]}"


def _mode_findings(by_label: dict[str, list[dict]], finding) -> list[dict]:
    modes = {label: {r["mode"] for r in rows} for label, rows in by_label.items()}
    if len(set().union(*modes.values())) < 2:
        return []  # one mode everywhere: nothing to tell the categories apart by
    out = []
    converted = (
        "tunelab makes every image RGB before the model's processor (transparency flattened "
        "onto white), but what a mode means can still reach the model: a grey image stays grey "
        "(R = G = B), a palette keeps its few colours, and a model learns that as easily as the "
        "mode. Look at the contact sheets: if the mode comes from how the category was "
        "collected, not from what it shows, collect its images as the others were"
    )
    for label, found in sorted(modes.items()):
        if len(found) == 1:
            (mode,) = found
            others = sorted(set().union(*(m for lbl, m in modes.items() if lbl != label)))
            if mode not in others:
                said = (
                    f"every image of {label!r} is {mode} and no other category's is: as stored, "
                    f"the mode alone tells this category apart; {converted}"
                )
            else:  # the mode is everywhere: only the other modes rule this category out
                rest = [m for m in others if m != mode]
                n = sum(r["mode"] in rest for lbl, rows in by_label.items() for r in rows)
                said = (
                    f"every image of {label!r} is {mode}, a mode other categories have too; the "
                    f"{n} in {', '.join(rest)} all belong to other categories, so as stored such "
                    f"an image is never {label!r}; {converted}"
                )
            out.append(finding("mode_by_category", len(by_label[label]), f"{label}: {mode}", said))
    return out


def contact_sheet(version_dir: Path, rows: list[dict], max_pixels: int | None = None):
    """A grid of thumbnails of the first `SHEET_IMAGES` images (by id), each the picture it
    shows (`data.images.picture`) captioned with its size and mode; transparency shown on a
    checkerboard. `max_pixels`: the lab's limit, the one its images were accepted under."""
    from PIL import Image

    from tunelab.data.images import picture, pixel_limit

    chosen = sorted(rows, key=lambda r: r["id"])[:SHEET_IMAGES]
    images = []
    for row in chosen:
        with pixel_limit(max_pixels), Image.open(version_dir / row["image"]) as img:
            images.append(picture(img).convert("RGBA"))
    return sheet_of(images, [f"{r['width']}x{r['height']} {r['mode']}" for r in chosen])


def sheet_of(images: list, captions: list[str]):
    """A grid of the images as thumbnails (at most 4 a row), each over a checkerboard (where
    it is transparent) and above its caption."""
    from PIL import Image, ImageDraw

    columns = min(4, max(1, len(images)))
    cell, caption = THUMB + 8, 12
    rows_n = -(-len(images) // columns)
    sheet = Image.new("RGB", (columns * cell, rows_n * (cell + caption)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (image, text) in enumerate(zip(images, captions, strict=True)):
        x, y = (i % columns) * cell + 4, (i // columns) * (cell + caption) + 4
        thumb = image.convert("RGBA")
        thumb.thumbnail((THUMB, THUMB))
        sheet.paste(_checkerboard(thumb.size), (x, y))
        sheet.paste(thumb, (x, y), thumb)
        draw.text((x, y + THUMB + 1), text, fill="black")
    return sheet


def _checkerboard(size: tuple[int, int]):
    from PIL import Image

    w, h = size
    tiles = (np.add.outer(np.arange(h) // 8, np.arange(w) // 8) % 2) * 40 + 200
    return Image.fromarray(tiles.astype(np.uint8), "L").convert("RGB")


def _save_png(image, path: Path) -> None:
    import io

    from tunelab.core.files import atomic_write_bytes

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    atomic_write_bytes(path, buffer.getvalue())


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", label)[:64] or "label"
