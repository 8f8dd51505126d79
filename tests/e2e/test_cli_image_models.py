"""Image classifiers through the CLI, on tiny models built from a config: a ViT with LoRA and
with full fine-tuning, and a small convnet (batch normalisation, convolutions only) whose LoRA
must reload as it trained; baselines, check, run, compare, final, export and verify."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from conftest import tl

sys.path.insert(0, str(Path(__file__).parents[1] / "assets"))
from make_tiny import build_tiny_resnet, build_tiny_vit


def colour_lab(root: Path, model: Path, method: str) -> str:
    """Two categories told apart by their colour, each at sizes from 30 to 60 pixels (no size
    shortcut), and a lab on `model`."""
    rng = random.Random(0)
    for label, colour in {"reddish": (200, 60, 60), "bluish": (60, 60, 200)}.items():
        (root / "pics" / label).mkdir(parents=True)
        for i in range(30):
            w, h = rng.randint(30, 60), rng.randint(30, 60)
            noise = np.random.default_rng(rng.randrange(10**6)).integers(-45, 45, (h, w, 3))
            pixels = np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / f"pics/{label}/{i}.png")
    spec = {
        "hypothesis": {"behaviour": "colours apart", "metric": "macro_f1", "min_effect": 0.02},
        "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
        "task": {"type": "image_classification"},
        "data": {"sources": [{"type": "image_folder", "path": "pics"}]},
        "model": {"path": str(model)},
        "method": {"type": method},
        "training": {"budget": {"steps": 4}, "global_batch": 8, "microbatch": 4, "lr": 1e-3},
    }
    (root / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    return str(root)


@pytest.mark.slow
def test_a_vit_trains_with_lora_and_full_and_hands_over_a_verified_bundle(tmp_path, capsys):
    lab = colour_lab(tmp_path / "lab", build_tiny_vit(tmp_path / "tiny-vit"), "lora")
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0 and [r["method"] for r in base["runs"]] == ["majority", "probe"]
    probe = base["runs"][1]
    assert probe["preprocessing"]["processor"] == "ViTImageProcessorPil"
    assert probe["baseline"]["features"].startswith("the input of the image classifier's head")

    code, check = tl(capsys, "check", "--lab", lab)
    assert code == 0 and check["passed"], [i for i in check["items"] if not i["passed"]]

    code, lora = tl(capsys, "run", "--lab", lab)
    assert code == 0 and lora["status"] == "completed", lora
    assert lora["training"]["unit"] == "images" and lora["training"]["tokens"] == 32
    assert lora["trainable"]["modules_to_save"] == ["classifier"]
    assert lora["preprocessing"] == probe["preprocessing"]
    code, full = tl(capsys, "run", "--lab", lab, "--name", "full", "method.type=full")
    assert code == 0 and full["trainable"]["trainable_fraction"] == 1.0

    code, compared = tl(capsys, "compare", "--lab", lab)
    assert code == 0 and {r["id"] for r in compared["runs"]} >= {lora["id"], full["id"]}
    code, final = tl(capsys, "final", "--lab", lab, lora["id"], "--reason", "the test's own")
    assert code == 0 and final["metrics"]["accuracy"] is not None

    bundle = tmp_path / "bundle"
    code, exported = tl(capsys, "export", "--lab", lab, lora["id"], "--out", str(bundle), "--merge")
    assert code == 0 and exported["merge_check"]["agree"], exported
    assert exported["serving"]["plain_lora"] is False  # the new head is kept whole
    info = json.loads((bundle / "tunelab.json").read_text())
    assert info["kind"] == "image" and info["preprocessing"] == lora["preprocessing"]
    assert (bundle / "preprocessor_config.json").is_file()
    sample = [
        json.loads(line) for line in (bundle / "verify/sample.jsonl").read_text().splitlines()
    ]
    assert all((bundle / "verify" / s["row"]["image"]).is_file() for s in sample)
    code, verified = tl(capsys, "verify", str(bundle))
    assert code == 0 and verified["passed"], verified["items"]
    names = [i["name"] for i in verified["items"]]
    assert names == ["files", "base", "load", "preprocessing", "predictions", "merged"]
    assert "AutoModelForImageClassification alone" in verified["items"][-1]["detail"]
    # the card's "Use" lines, run as written on a transparent picture: the processor alone
    # refuses RGBA; through tunelab.open_image the bundle answers as it did in its run
    card = (bundle / "README.md").read_text()
    code = card.split("## Use", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    first = sample[0]
    with Image.open(bundle / "verify" / first["row"]["image"]) as img:
        img.convert("RGBA").save(tmp_path / "photo.png")
    for placeholder, path in {
        "path/to/bundle": bundle,
        "path/to/base": info["base_model"]["path"],
        "photo.jpg": tmp_path / "photo.png",
    }.items():
        code = code.replace(placeholder, str(path))
    used: dict = {}
    exec(code, used)
    assert used["label"] == first["prediction"]["predicted"]

    # the same weights with a processor that normalises otherwise: verify names the field
    other = tmp_path / "other-base"
    shutil.copytree(Path(info["base_model"]["path"]), other)
    config = json.loads((other / "preprocessor_config.json").read_text())
    (other / "preprocessor_config.json").write_text(json.dumps(config | {"image_mean": [0.4] * 3}))
    code, wrong = tl(capsys, "verify", str(bundle), "--base", str(other))
    (step,) = [i for i in wrong["items"] if i["name"] == "preprocessing"]
    assert code != 0 and not step["passed"]
    assert "the base's own processor: image_mean" in step["detail"]


@pytest.mark.slow
def test_a_convnet_lora_keeps_its_batch_norm_statistics_and_reloads_as_it_trained(tmp_path, capsys):
    """LoRA on a ResNet: the frozen batch normalisation's running statistics are buffers an
    adapter does not save; the check's reload in a fresh process proves they did not move."""
    lab = colour_lab(tmp_path / "lab", build_tiny_resnet(tmp_path / "tiny-resnet"), "lora")
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, check = tl(capsys, "check", "--lab", lab)
    assert code == 0 and check["passed"], [i for i in check["items"] if not i["passed"]]
    (targets,) = [i for i in check["items"] if i["name"] == "targets"]
    assert targets["matched"] == {"(every channel-mixing convolution of the blocks)": 6}
    code, run = tl(capsys, "run", "--lab", lab, "--allow-warnings", "tiny data")
    assert code == 0 and run["status"] == "completed", run
    code, refused = tl(capsys, "size", "--lab", lab)
    assert code == 2 and "image classifiers" in refused["error"]
