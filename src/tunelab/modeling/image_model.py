"""Image classifiers: the base's own image processor, and a classifier with a head for the lab.

An image base opens as a text one does (`model.resolve_path`: a local folder of safetensors
weights, `trust_remote_code` warned about), through transformers' Auto classes once
EfficientNet-Lite folders are registered with them (`modeling.lite`). Its processor runs on
`IMAGE_BACKEND`, so the pixels are the same on every machine. `model.load_base` and
`model.load_trained_classifier` call in here for `kind: image`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageClassification, PreTrainedModel

from tunelab.core.spec import ModelSpec
from tunelab.modeling.model import lab_remote_kwargs, resolve_path, weights_kwargs

IMAGE_BACKEND = "pil"
"""The image processors' backend: Pillow and numpy, the same pixels on every machine (the
torchvision one, where torchvision is installed, resizes slightly differently)."""


def load_processor(spec: ModelSpec, lab: Path):
    """The base's own image processor (`AutoImageProcessor`: its resize, crop and
    normalisation), for an image classifier, on the `IMAGE_BACKEND`."""
    from transformers import AutoImageProcessor

    from tunelab.modeling.lite import register

    register()  # EfficientNet-Lite folders (`modeling.lite`) open with the Auto classes
    path = resolve_path(spec, lab)
    return AutoImageProcessor.from_pretrained(
        path, backend=IMAGE_BACKEND, **lab_remote_kwargs(spec, path, lab)
    )


def load_image_classifier(
    spec: ModelSpec, lab: Path, labels: list[str], device: torch.device
) -> PreTrainedModel:
    """An image classifier on the pretrained backbone with a head for `labels`: the base's own
    head when it already predicts exactly these labels in this order, else a new one (drawn
    from torch's seed, as a text classifier's is), whatever the base's head had."""
    from tunelab.modeling.lite import register

    register()  # EfficientNet-Lite folders (`modeling.lite`) open with the Auto classes
    path = resolve_path(spec, lab)
    kwargs = weights_kwargs(spec, path, lab)
    base_labels = AutoConfig.from_pretrained(path, **lab_remote_kwargs(spec, path, lab)).id2label
    keep = [base_labels[i] for i in sorted(base_labels)] == labels
    model = AutoModelForImageClassification.from_pretrained(
        path,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        ignore_mismatched_sizes=True,  # the base's head (e.g. 1000 ImageNet classes) goes
        **kwargs,
    )
    if not keep and len(base_labels) == len(labels):  # same count, other labels: not kept
        from tunelab.modeling.head_init import head_layer, redraw

        redraw(model, head_layer(model, len(labels))[1])
    return model.to(device)
