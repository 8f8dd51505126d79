"""The model's view of an image lab: the area a processor's resize and crop keep (measured
through the processor itself), the normalisation undone for display, and `crop_cuts`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers import AutoImageProcessor

from tunelab.modeling.pixels import preprocessing
from tunelab.stages.inspect.lab import finding
from tunelab.stages.inspect.pixels import CROP_KEPT, crop_findings, kept_area, to_image

sys.path.insert(0, str(Path(__file__).parents[2] / "assets"))
from make_tiny import build_tiny_resnet, build_tiny_vit


@pytest.fixture(scope="module")
def processors(tmp_path_factory):
    root = tmp_path_factory.mktemp("processors")
    return {
        name: AutoImageProcessor.from_pretrained(build(root / name), backend="pil")
        for name, build in (("vit", build_tiny_vit), ("resnet", build_tiny_resnet))
    }


def test_a_plain_resize_keeps_the_whole_image(processors) -> None:
    """It read 96-98% (the edge pixels' centres lie half a pixel in); what is left is Pillow's
    filter at the borders, about 1% an axis on a large picture."""
    vit = processors["vit"]
    for size in ((32, 32), (90, 30), (200, 200), (640, 480)):
        assert kept_area(vit, preprocessing(vit), *size) == pytest.approx(1.0, abs=0.025)


def test_a_centre_crop_keeps_what_its_geometry_says(processors) -> None:
    """Shortest edge to int(32 / 0.875) = 36, then a 32x32 centre crop: (32/36)² of a square,
    and a wide image loses its sides as well (90x30 -> 108x36: 32/108 of the width, 32/36 of
    the height)."""
    resnet = processors["resnet"]
    settings = preprocessing(resnet)
    assert kept_area(resnet, settings, 64, 64) == pytest.approx((32 / 36) ** 2, abs=0.01)
    assert kept_area(resnet, settings, 90, 30) == pytest.approx(32 / 108 * 32 / 36, abs=0.01)


def test_a_processed_image_is_shown_as_it_was_before_normalisation(processors) -> None:
    vit = processors["vit"]
    picture = Image.new("RGB", (32, 32), (200, 40, 90))
    values = vit(images=[picture], return_tensors="np")["pixel_values"][0]
    shown = np.asarray(to_image(values, preprocessing(vit)))
    assert shown.shape == (32, 32, 3) and tuple(shown[5, 5]) == (200, 40, 90)


def test_crop_cuts_names_the_categories_whose_typical_image_loses_most() -> None:
    view = {
        "wide": {"kept_area": {"p50": CROP_KEPT - 0.2, "min": 0.1}},
        "square": {"kept_area": {"p50": 0.77, "min": 0.7}},
        "unknown": {"kept_area": None},
    }
    (found,) = crop_findings(view, finding)
    assert found["code"] == "crop_cuts" and not found["blocking"]
    assert found["example"] == "wide: 40% kept" and "the least: 10%" in found["message"]
