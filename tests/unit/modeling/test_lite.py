"""EfficientNet-Lite as a transformers image classifier: a Lite0 built from its config with
random weights (small inputs: the padding is built for the config's image size) runs, saves and
reloads through the Auto classes once registered, swaps its head for other labels keeping every
other weight, and trains under LoRA with only the adapters and the head, its frozen batch norm
kept in evaluation mode."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForImageClassification

from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.modeling import lite
from tunelab.modeling.image_model import load_image_classifier
from tunelab.modeling.lite import (
    HEAD_STD,
    EfficientNetLiteConfig,
    EfficientNetLiteForImageClassification,
    register,
)
from tunelab.modeling.model import apply_method, load_trained_classifier
from tunelab.modeling.saved import save_trained
from tunelab.training.step import train_mode

pytest.importorskip("efficientnet_lite_pytorch", reason="the Lite model code (make setup)")

SIZE = 64  # the convolutions' padding is built for this; 224 in a real Lite0
CPU = torch.device("cpu")


def labelled(names: list[str]) -> dict:
    return {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}


def lite0(names: list[str], seed: int = 0) -> EfficientNetLiteForImageClassification:
    torch.manual_seed(seed)
    config = EfficientNetLiteConfig(image_size=SIZE, **labelled(names))
    return EfficientNetLiteForImageClassification(config)


def pixels(n: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(seed))


def saved(tmp_path, names: list[str]):
    model = lite0(names)
    model.save_pretrained(tmp_path / "base")
    return model, tmp_path / "base"


def test_forward_gives_one_logit_per_label_and_the_cross_entropy():
    model = lite0(["a", "b", "c", "d", "e"]).eval()
    labels = torch.tensor([0, 4])
    out = model(pixel_values=pixels(), labels=labels)
    assert out.logits.shape == (2, 5)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    assert model(pixel_values=pixels()).loss is None
    assert model.net._fc.bias.abs().max() == 0  # a new head: zero bias, small weights
    assert abs(float(model.net._fc.weight.detach().std()) - HEAD_STD) < 0.002


def test_another_input_size_is_refused_not_padded_wrongly():
    with pytest.raises(ValueError, match=r"built for 64x64 inputs.*image processor"):
        lite0(["a", "b"])(pixel_values=torch.zeros(1, 3, SIZE + 8, SIZE))


def test_the_config_refuses_an_unknown_variant():
    with pytest.raises(ValueError, match="efficientnet-lite0, efficientnet-lite1"):
        EfficientNetLiteConfig(variant="efficientnet-b0")


def test_registered_it_saves_and_reloads_through_the_auto_classes(tmp_path):
    register()
    register()  # a second call changes nothing
    model, folder = saved(tmp_path, ["cat", "dog", "cup"])
    assert "net._blocks.1._expand_conv.weight" in model.state_dict()
    assert isinstance(AutoConfig.from_pretrained(folder), EfficientNetLiteConfig)
    again = AutoModelForImageClassification.from_pretrained(folder)
    assert type(again) is EfficientNetLiteForImageClassification
    assert again.config.image_size == SIZE and again.config.id2label[2] == "cup"
    x = pixels()
    assert torch.equal(again.eval()(pixel_values=x).logits, model.eval()(pixel_values=x).logits)


def test_a_new_head_for_other_labels_keeps_every_other_weight(tmp_path):
    register()
    base, folder = saved(tmp_path, ["a", "b", "c", "d", "e"])
    torch.manual_seed(7)
    model = AutoModelForImageClassification.from_pretrained(
        folder, ignore_mismatched_sizes=True, num_labels=3, **labelled(["x", "y", "z"])
    )
    old, new = base.state_dict(), model.state_dict()
    assert sorted(old) == sorted(new)
    head = {"net._fc.weight", "net._fc.bias"}
    assert all(torch.equal(old[k], new[k]) for k in old if k not in head)
    assert new["net._fc.weight"].shape == (3, 1280)
    assert new["net._fc.bias"].abs().max() == 0  # initialised, not left as memory
    assert 0.005 < float(new["net._fc.weight"].std()) < 0.015


def test_tunelab_loads_a_lite_base_and_redraws_a_head_of_other_labels(tmp_path):
    """Through `image_model.load_image_classifier` (which registers): the same number of labels with
    other names still gets a new head (tunelab calls `_init_weights` on the loaded head)."""
    base, folder = saved(tmp_path, ["a", "b", "c"])
    spec = ModelSpec(path=str(folder))
    kept = load_image_classifier(spec, tmp_path, ["a", "b", "c"], CPU)
    assert torch.equal(kept.net._fc.weight, base.net._fc.weight)
    redrawn = load_image_classifier(spec, tmp_path, ["x", "y", "z"], CPU)
    assert not torch.equal(redrawn.net._fc.weight, base.net._fc.weight)
    assert torch.equal(redrawn.net._conv_head.weight, base.net._conv_head.weight)


def test_lora_trains_the_block_convolutions_adapters_and_the_head_only(tmp_path):
    model = lite0(["a", "b", "c"])
    model, report = apply_method(model, LoraMethod(type="lora"), None)
    adapted = report["adapted_modules"]
    # 16 blocks: each projects; all but the first (no expansion) expand
    assert len(adapted) == 31
    assert all(n.endswith(("._expand_conv", "._project_conv")) for n in adapted)
    assert report["modules_to_save"] == ["net._fc"]
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or "modules_to_save" in n for n in trainable)
    assert any("_fc.modules_to_save" in n for n in trainable)

    train_mode(model)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert model.training and norms and not any(m.training for m in norms)
    before = {k: v.clone() for k, v in model.state_dict().items() if "running_" in k}
    out = model(pixel_values=pixels(4), labels=torch.tensor([0, 1, 2, 0]))
    out.loss.backward()
    grads = {n for n, p in model.named_parameters() if p.grad is not None}
    assert grads == set(trainable)
    after = model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())  # statistics unmoved


def test_full_fine_tuning_trains_batch_norm_and_reloads_through_tunelab(tmp_path, monkeypatch):
    model, _ = apply_method(lite0(["a", "b"]), FullMethod(), None)
    train_mode(model)
    assert all(m.training for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    model(pixel_values=pixels(), labels=torch.tensor([0, 1])).loss.backward()
    model.save_pretrained(tmp_path / "weights")

    calls = []
    monkeypatch.setattr(lite, "register", lambda: calls.append(1) or register())
    spec = ModelSpec(path=str(tmp_path / "unused"))
    again = load_trained_classifier(spec, tmp_path, ["a", "b"], tmp_path / "weights", CPU, "image")
    assert calls == [1]  # registered before the saved config is read
    x = pixels()
    assert torch.equal(again(pixel_values=x).logits, model.eval()(pixel_values=x).logits)


def test_a_lora_run_reloads_on_its_base_to_the_same_logits(tmp_path):
    """A trained adapter (LoRA convolutions and the saved head) put back on the base folder by
    tunelab's own reload gives the trained model's logits: nothing it learned lives outside
    what PEFT saves (the frozen batch norm kept its statistics)."""
    _, folder = saved(tmp_path, ["p", "q", "r", "s", "t"])
    spec, labels = ModelSpec(path=str(folder)), ["x", "y", "z"]
    torch.manual_seed(3)
    model, _ = apply_method(load_image_classifier(spec, tmp_path, labels, CPU), LoraMethod(), None)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    for step in range(2):
        train_mode(model)
        model(pixel_values=pixels(4, seed=step), labels=torch.tensor([0, 1, 2, 1])).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    files = save_trained(model, tmp_path / "run")
    assert "adapter_model.safetensors" in files
    again = load_trained_classifier(spec, tmp_path, labels, tmp_path / "run", CPU, "image")
    x = pixels(3, seed=9)
    with torch.no_grad():
        want = model.eval()(pixel_values=x).logits
        got = again(pixel_values=x).logits
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_activation_checkpointing_is_refused_by_name_not_by_a_traceback() -> None:
    from tunelab.modeling.model import ModelError, enable_checkpointing

    model = EfficientNetLiteForImageClassification(EfficientNetLiteConfig(image_size=64))
    with pytest.raises(ModelError, match=r"training\.activation_checkpointing: EfficientNetLite"):
        enable_checkpointing(model)


def test_a_transformers_image_head_of_other_labels_is_redrawn_too(tmp_path):
    """A ViT's `_init_weights` goes through transformers' initialisers, which skip a tensor
    loaded from the checkpoint: a head of the same size for other labels was kept as loaded."""
    from make_tiny import build_tiny_vit

    folder = build_tiny_vit(tmp_path / "vit")  # a 5-class head: LABEL_0 ... LABEL_4
    spec = ModelSpec(path=str(folder))
    ours = ["a", "b", "c", "d", "e"]
    base = AutoModelForImageClassification.from_pretrained(folder).classifier.weight
    redrawn = load_image_classifier(spec, tmp_path, ours, CPU).classifier.weight
    assert redrawn.shape == base.shape and not torch.equal(redrawn, base)
    named = [f"LABEL_{i}" for i in range(5)]  # the base's own labels, in order: kept
    kept = load_image_classifier(spec, tmp_path, named, CPU).classifier.weight
    torch.testing.assert_close(kept, base)
