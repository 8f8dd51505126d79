"""`tunelab inspect` on an image lab, as the model sees it: each category's images after the
base's own processor (`modeling.pixels`), with what that did to them.

Per category, for up to `MODEL_VIEW_IMAGES` images (the first by id):

- the processed tensors' shape and value range (after rescale and normalisation);
- how much of each image survives the resize and crop: a picture whose red and green channels
  hold each pixel's column and row goes through the same processor, and the columns and rows
  that come out say what was kept (the processor is not re-implemented, so any size rule and
  crop is measured as it is);
- a contact sheet of the images exactly as the model receives them, the normalisation undone
  for display, written beside the stored-image sheets (`<split>-<category>-model.png`).

A category whose typical image (the median) keeps less than `CROP_KEPT` of its area gives the
finding `crop_cuts` (a warning: a centre crop that cuts the sides of wide images loses what may
be the point of them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CROP_KEPT = 0.6
MODEL_VIEW_IMAGES = 16


def model_view(renderer, by_label: dict[str, list[dict]], folder: Path, split: str, safe) -> dict:
    """Per category: shape, value range, kept area (median, min) and the model-view sheet."""
    from tunelab.stages.inspect.images import _save_png, sheet_of

    out = {}
    for label in sorted(by_label):
        chosen = sorted(by_label[label], key=lambda r: r["id"])[:MODEL_VIEW_IMAGES]
        pixels = renderer.encode(chosen)
        values = np.stack([p.pixel_values.numpy() for p in pixels])
        settings = renderer.settings
        kept = [kept_area(renderer.processor, settings, r["width"], r["height"]) for r in chosen]
        known = [k for k in kept if k is not None]
        path = folder / f"{split}-{safe(label)}-model.png"
        shown = [to_image(v, settings) for v in values]
        captions = ["" if k is None else f"kept {k:.0%}" for k in kept]
        _save_png(sheet_of(shown, captions), path)
        out[label] = {
            "shape": list(values.shape[1:]),
            "range": [round(float(values.min()), 3), round(float(values.max()), 3)],
            "kept_area": {"p50": round(float(np.median(known)), 3), "min": round(min(known), 3)}
            if known
            else None,
            "contact_sheet": path,
        }
    return out


def crop_findings(view: dict[str, dict], finding) -> list[dict]:
    """`crop_cuts` for each category whose median image keeps less than CROP_KEPT."""
    return [
        finding(
            "crop_cuts",
            1,
            f"{label}: {v['kept_area']['p50']:.0%} kept",
            f"the model's resize and crop keep {v['kept_area']['p50']:.0%} of a typical "
            f"{label!r} image (the least: {v['kept_area']['min']:.0%}); look at its model-view "
            "contact sheet. Pad or resize the images to the model's aspect ratio at the source, "
            "or use a processor without a crop",
        )
        for label, v in sorted(view.items())
        if v["kept_area"] and v["kept_area"]["p50"] < CROP_KEPT
    ]


def kept_area(processor, settings: dict, width: int, height: int) -> float | None:
    """The share of a width x height image that the processor's resize and crop keep, read
    from a picture whose red channel is each pixel's column and green its row (0-255); None
    when the processor's settings do not say how to undo its rescale (`to_image`)."""
    from PIL import Image

    if not (settings.get("do_rescale") and settings.get("rescale_factor")):
        return None
    columns = np.linspace(0, 255, width).round().astype(np.uint8)
    rows = np.linspace(0, 255, height).round().astype(np.uint8)
    grid = np.zeros((height, width, 3), np.uint8)
    grid[..., 0], grid[..., 1] = columns[None, :], rows[:, None]
    values = processor(images=[Image.fromarray(grid)], return_tensors="np")["pixel_values"][0]
    seen = np.asarray(to_image(values, settings), dtype=np.float64)
    return float(
        _kept(seen[..., 0], width, seen.shape[1]) * _kept(seen[..., 1], height, seen.shape[0])
    )


def _kept(coordinate: np.ndarray, n_in: int, n_out: int) -> float:
    """The share of `n_in` input pixels along one axis that `n_out` output pixels cover, from
    the input coordinate (0-255, pixel centres) the first and last output pixels read. Those
    are centres too: n_out pixels spaced d apart cover (n_out - 1) d between the first and last
    centre and d/2 beyond each, so a plain resize keeps the whole axis (its edge pixels average
    the edge and its neighbour, and read 1/64 short of each end at 32 of 2,000 pixels)."""
    between = (coordinate.max() - coordinate.min()) / 255 * (n_in - 1)  # in input pixels
    covered = between * n_out / (n_out - 1) if n_out > 1 else 1.0
    return min(1.0, max(covered, 1.0) / n_in)


def to_image(values: np.ndarray, settings: dict):
    """A processed (channels, height, width) tensor as a picture: normalisation and rescale
    undone with the recorded mean, std and factor (else stretched to its own range)."""
    from PIL import Image

    x = values.astype(np.float64)
    if settings.get("do_normalize") and settings.get("image_mean") is not None:
        mean = np.asarray(settings["image_mean"], dtype=np.float64)[:, None, None]
        std = np.asarray(settings["image_std"], dtype=np.float64)[:, None, None]
        x = x * std + mean
    if settings.get("do_rescale") and settings.get("rescale_factor"):
        x = x / settings["rescale_factor"]
    else:
        x = (x - x.min()) / (x.max() - x.min() or 1.0) * 255
    return Image.fromarray(np.clip(x, 0, 255).round().astype(np.uint8).transpose(1, 2, 0))
