"""Image -> pixels: the one place that decides what an image model sees, for training,
evaluation, the probe, export and verify.

An image lab's row names its image by its content (`images/<sha256>.<ext>`, relative to the data
version's folder, or to a bundle's). Each image is decoded with Pillow, its first frame taken,
made RGB (transparency flattened onto white: `ALPHA_BACKGROUND`, recorded), then given to the
base's own image processor (`AutoImageProcessor`: its resize rule, crop, rescale and
normalisation). What that processor does is recorded in the run (`preprocessing`) and in the
bundle, so `verify` can name a difference: a slow and a fast processor of the same model give
slightly different pixels, and a normalisation that is not the base's own costs accuracy in
silence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tunelab.core.errors import TunelabError
from tunelab.modeling.transfer import to_device

ALPHA_BACKGROUND = (255, 255, 255)
"""The colour transparent pixels are flattened onto before the processor sees them."""
ENCODE_CHUNK = 64
"""Images decoded and processed at once (bounds the decoded pictures held in memory)."""
PROCESSOR_FIELDS = (
    "size",
    "crop_size",
    "do_resize",
    "do_center_crop",
    "crop_pct",
    "resample",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
    "do_convert_rgb",
    "data_config",
)
"""The processor settings a run records (those its class has): what decides the pixels."""


@dataclass(frozen=True)
class Pixels:
    """One image as the model receives it: (channels, height, width) float32, and its label's
    index."""

    id: str
    pixel_values: torch.Tensor
    label: int


def open_rgb(path: Path, max_pixels: int | None = None):
    """The image's picture (`data.images.picture`: first frame, upright, 8 bits) in RGB,
    transparency flattened onto `ALPHA_BACKGROUND`: what the model sees. `max_pixels`: the
    lab's `data.images.max_pixels`, the limit its images were accepted under (None: Pillow's
    own, for an image from elsewhere)."""
    from PIL import Image

    from tunelab.data.images import picture, pixel_limit

    with pixel_limit(max_pixels), Image.open(path) as opened:
        img = picture(opened)
        if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
            rgba = img.convert("RGBA")
            flat = Image.new("RGBA", rgba.size, (*ALPHA_BACKGROUND, 255))
            return Image.alpha_composite(flat, rgba).convert("RGB")
        return img.convert("RGB")


def preprocessing(processor) -> dict:
    """What the processor does to an image, as a run records it: its class (a fast and a slow
    processor differ slightly), each deciding setting it has, and the alpha rule."""
    settings = json.loads(processor.to_json_string())  # as a record holds it: lists, not tuples
    found = {k: settings[k] for k in PROCESSOR_FIELDS if k in settings}
    return {
        "processor": type(processor).__name__,
        **found,
        "alpha_background": list(ALPHA_BACKGROUND),
    }


def differences(recorded: dict, now: dict) -> list[str]:
    """The preprocessing settings that differ, each as `name: recorded -> now`."""
    keys = sorted(set(recorded) | set(now))
    return [
        f"{k}: {recorded.get(k)!r} -> {now.get(k)!r}" for k in keys if recorded.get(k) != now.get(k)
    ]


def encode_images(
    processor,
    rows: list[dict],
    labels: list[str],
    root: Path,
    progress: Callable | None = None,
    max_pixels: int | None = None,
) -> list[Pixels]:
    """Every row's image, processed as the model receives it, with its label's index
    (`max_pixels`: the lab's limit, `open_rgb`)."""
    index = {label: i for i, label in enumerate(labels)}
    out: list[Pixels] = []
    for start in range(0, len(rows), ENCODE_CHUNK):
        chunk = rows[start : start + ENCODE_CHUNK]
        images = [open_rgb(_image_path(root, r), max_pixels) for r in chunk]
        values = processor(images=images, return_tensors="pt")["pixel_values"].float()
        out.extend(Pixels(r["id"], values[i], index[r["label"]]) for i, r in enumerate(chunk))
        if progress is not None:
            progress(len(out))
    return out


def _image_path(root: Path, row: dict) -> Path:
    path = root / row["image"]
    if not path.is_file():
        raise TunelabError(
            f"{path}: the image of row {row['id']!r} is missing from {root}; run `tunelab fsck`"
        )
    return path


def collate_pixels(batch: list[Pixels], device: torch.device) -> dict[str, torch.Tensor]:
    """A microbatch: the images stacked, and their labels."""
    pixels = torch.stack([p.pixel_values for p in batch])
    return to_device(
        {"pixel_values": pixels, "labels": torch.tensor([p.label for p in batch])}, device
    )


@dataclass
class ImageRenderer:
    """Renders an image lab's rows for its model: the counterpart of `render.Renderer`, with
    the base's image processor in place of a tokenizer. `root` is the folder the rows' image
    paths are relative to (the data version's, or a bundle's)."""

    processor: object
    task: object
    labels: list[str]
    root: Path
    kind: str = "image"
    schema: dict | None = None
    max_length: int | None = None
    pack_length: int | None = None
    template: object = None
    max_pixels: int | None = None
    """The lab's `data.images.max_pixels`: its images are opened under the limit they were
    accepted under."""
    settings: dict = field(init=False)

    def __post_init__(self) -> None:
        self.settings = preprocessing(self.processor)

    @property
    def pad_id(self) -> int:
        """Images are not padded; the shared signatures still pass a pad id."""
        return 0

    def training(self, rows: list[dict]) -> tuple[list[Pixels], list[dict]]:
        """Training inputs (every image: they were checked at `tunelab data`), nothing rejected."""
        return self.encode(rows), []

    def require_prompts(self, rows: list[dict], split: str) -> None:
        """An image has no prompt for a template to render (`Renderer.require_prompts`)."""

    def encode(self, rows: list[dict]) -> list[Pixels]:
        return encode_images(
            self.processor, rows, self.labels, self.root, max_pixels=self.max_pixels
        )
