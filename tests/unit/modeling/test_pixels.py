"""Image -> pixels: alpha flattened onto white, the processor's settings recorded and compared,
each image processed as the model receives it; the convnet LoRA targets; frozen batch norm."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor

from tunelab.modeling.blocks import block_linears
from tunelab.modeling.pixels import (
    ALPHA_BACKGROUND,
    collate_pixels,
    differences,
    encode_images,
    open_rgb,
    preprocessing,
)
from tunelab.training.step import train_mode

sys.path.insert(0, str(Path(__file__).parents[2] / "assets"))
from make_tiny import build_tiny_resnet, build_tiny_vit


def test_transparency_is_flattened_onto_the_recorded_background(tmp_path) -> None:
    clear = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    clear.putpixel((0, 0), (10, 20, 30, 255))
    clear.save(tmp_path / "a.png")
    flat = open_rgb(tmp_path / "a.png")
    assert flat.mode == "RGB"
    assert flat.getpixel((0, 0)) == (10, 20, 30) and flat.getpixel((3, 3)) == ALPHA_BACKGROUND
    Image.new("L", (3, 3), 7).save(tmp_path / "g.png")
    assert open_rgb(tmp_path / "g.png").getpixel((1, 1)) == (7, 7, 7)


def test_each_image_is_processed_to_the_models_size_with_its_label(tmp_path) -> None:
    model = build_tiny_vit(tmp_path / "vit")
    processor = AutoImageProcessor.from_pretrained(model, backend="pil")
    (tmp_path / "images").mkdir()
    rows = []
    for i, size in enumerate([(50, 20), (7, 90), (32, 32)]):
        Image.new("RGB", size, (255, 0, 0)).save(tmp_path / f"images/{i}.png")
        rows.append({"id": str(i), "image": f"images/{i}.png", "label": ["a", "b"][i % 2]})
    pixels = encode_images(processor, rows, ["a", "b"], tmp_path)
    assert [p.label for p in pixels] == [0, 1, 0]
    assert {tuple(p.pixel_values.shape) for p in pixels} == {(3, 32, 32)}
    red = pixels[0].pixel_values[:, 16, 16]  # (1 - 0.5) / 0.5 and (0 - 0.5) / 0.5
    assert torch.allclose(red, torch.tensor([1.0, -1.0, -1.0]))
    batch = collate_pixels(pixels, torch.device("cpu"))
    assert batch["pixel_values"].shape == (3, 3, 32, 32) and batch["labels"].tolist() == [0, 1, 0]


def test_the_recorded_preprocessing_names_what_differs(tmp_path) -> None:
    model = build_tiny_vit(tmp_path / "vit")
    processor = AutoImageProcessor.from_pretrained(model, backend="pil")
    recorded = preprocessing(processor)
    assert recorded["processor"] == "ViTImageProcessorPil"
    assert recorded["image_mean"] == [0.5, 0.5, 0.5] and recorded["size"]["height"] == 32
    assert differences(recorded, preprocessing(processor)) == []
    processor.image_mean = [0.485, 0.456, 0.406]
    (found,) = differences(recorded, preprocessing(processor))
    assert found.startswith("image_mean: [0.5, 0.5, 0.5] -> [0.485")


def test_a_convnet_without_linear_layers_in_its_blocks_adapts_its_convolutions(tmp_path) -> None:
    from transformers import AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(build_tiny_resnet(tmp_path / "r"))
    found = block_linears(model)
    assert found and all(isinstance(model.get_submodule(n), torch.nn.Conv2d) for n in found)
    assert "classifier.1" not in found


def test_frozen_batch_norm_keeps_its_statistics_in_training_mode() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
    model[1].requires_grad_(False)
    train_mode(model)
    assert model.training and model[0].training and not model[1].training
    model[1].requires_grad_(True)
    train_mode(model)
    assert model[1].training


def test_the_model_sees_a_photo_upright_as_transformers_loads_it(tmp_path) -> None:
    """A phone's portrait photo (stored sideways, EXIF orientation 6) reaches the model as
    transformers' own `load_image` gives it to a pipeline that serves the bundle; a 16-bit grey
    scan scaled to 8 bits, not clipped to white."""
    from transformers.image_utils import load_image

    sideways = Image.effect_noise((40, 20), 50).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6
    sideways.save(tmp_path / "portrait.jpg", exif=exif, quality=95)
    seen = open_rgb(tmp_path / "portrait.jpg")
    served = load_image(str(tmp_path / "portrait.jpg")).convert("RGB")
    assert seen.size == served.size == (20, 40) and seen.tobytes() == served.tobytes()
    Image.fromarray(np.full((4, 4), 32768, dtype=np.uint16)).save(tmp_path / "scan.png")
    assert open_rgb(tmp_path / "scan.png").getpixel((1, 1)) == (128, 128, 128)
