"""LP-FT: a new classification head that starts from a linear probe instead of at random.

Linear probing then fine-tuning (Kumar et al., "Fine-Tuning can Distort Pretrained Features
and Underperform Out-of-Distribution", ICLR 2022): fit a linear classifier on the frozen
model's own head features first, start fine-tuning from it, and the early gradients no longer
come from a random head that tears the pretrained features apart.

The features are what the head's last linear layer receives (for a BERT classifier, the
pooled [CLS] output), read with a forward hook on the model as it is built for the run, in
evaluation mode (no dropout) and with its LoRA layers still zero. The probe is the same
StandardScaler + LogisticRegression as the probe baseline (`modeling/probe.py`); the scaler is
folded into the linear layer, so the model's first logits are the probe's:

    W = coef / scale,   b = intercept - W @ mean

Two classes: scikit-learn keeps one row (the second class's log-odds s); the layer's two rows
become -s/2 and +s/2, whose softmax is the probe's sigmoid.

The same features of a frozen image base (`image_base_features`) are what an image lab's probe
baseline fits on and what `final` scores that probe's head on.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from tunelab.core.errors import TunelabError
from tunelab.core.spec import Spec
from tunelab.modeling.classifier_inputs import Encoded, classifier_batch
from tunelab.modeling.feature_cache import FeatureCache
from tunelab.modeling.probe import Head, fit_head
from tunelab.modeling.render import lab_renderer


def head_layer(model: torch.nn.Module, n_labels: int) -> tuple[str, torch.nn.Linear]:
    """The trained head's last linear layer: the last trainable Linear with one output per
    label (under LoRA, the copy PEFT trains and saves)."""
    found = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear)
        and m.out_features == n_labels
        and m.weight.requires_grad
        and "original_module" not in name
    ]
    if not found:
        raise TunelabError(
            "method.head_init: probe needs a classifier whose head ends in a trainable linear "
            f"layer with {n_labels} outputs (one per label); this model has none. Use "
            "head_init: new, or a sequence classifier (model.kind: encoder)."
        )
    return found[-1]


def redraw(model: torch.nn.Module, layer: torch.nn.Module) -> None:
    """Draw `layer`'s weights anew by the model's own rule (`_init_weights`, from torch's
    seed), even where they were loaded from the checkpoint: transformers' initialisers skip a
    tensor marked as loaded (`_is_hf_initialized`), so the mark goes first."""
    for param in layer.parameters(recurse=False):
        param._is_hf_initialized = False
    model._init_weights(layer)


@torch.no_grad()
def head_features(
    model: torch.nn.Module,
    layer: torch.nn.Linear,
    examples: list[Encoded] | list,
    batch_size: int,
    pad_id: int,
    device: torch.device,
) -> np.ndarray:
    """The input of `layer` for each example, in order, in evaluation mode. A decoder's head
    (`score`) reads every position, and the model keeps the logits of the last token that is
    not padding: its features are that position's, picked by the same rule (they had come
    back per token, and the probe stopped on a 3-D array, exit 1)."""
    captured: list[torch.Tensor] = []
    hook = layer.register_forward_hook(lambda _m, args, _out: captured.append(args[0].float()))
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(examples), batch_size):
            batch = classifier_batch(examples[start : start + batch_size], pad_id, device)
            model(**batch)
            if captured[-1].dim() == 3:
                captured[-1] = _last_token(captured[-1], batch, model.config.pad_token_id)
    finally:
        hook.remove()
        model.train(was_training)
    return torch.cat(captured).cpu().numpy()


def _last_token(features: torch.Tensor, batch: dict, pad: int | None) -> torch.Tensor:
    """Each sequence's features at the position whose logits a decoder's sequence classifier
    keeps: transformers' rule, the last token that is not `pad_token_id` (the last position
    where the config names no pad)."""
    if pad is None:
        return features[:, -1]
    ids = batch["input_ids"]
    positions = torch.arange(ids.shape[-1], device=ids.device)
    last = (positions * (ids != pad).int()).argmax(-1)
    return features[torch.arange(len(features), device=features.device), last]


def probe_features(
    model: torch.nn.Module,
    layer: tuple[str, torch.nn.Linear],
    examples: list,
    batch_size: int,
    pad_id: int,
    device: torch.device,
    cache: FeatureCache | None = None,
) -> tuple[np.ndarray, bool]:
    """`head_features` of the named `layer`, read from `cache` when an earlier run of the same
    base, method and examples kept them (and kept there when not); and whether they were."""
    if cache is None:
        return head_features(model, layer[1], examples, batch_size, pad_id, device), False
    key = cache.key(model, layer[0], examples, batch_size, pad_id, device)
    x = cache.load(key, len(examples))
    if x is not None:
        return x, True
    x = head_features(model, layer[1], examples, batch_size, pad_id, device)
    cache.save(key, x)
    return x, False


def base_features(
    model: torch.nn.Module, examples: list, n_labels: int, batch_size: int, device: torch.device
) -> np.ndarray:
    """What the base gives a classification head: the input of the classifier's last linear
    layer on each example, the base frozen (an image classifier's probe features)."""
    return head_features(model, head_layer(model, n_labels)[1], examples, batch_size, 0, device)


def image_base_features(
    spec: Spec,
    lab: Path,
    labels: list[str],
    version: str,
    device: torch.device,
    *splits: list[dict],
) -> tuple[list[np.ndarray], dict]:
    """The frozen image base's features (`base_features`) of each list of rows in `splits`, in
    order, rendered by the lab's image renderer for data `version` (whose folder holds every
    split's images, the test split's too) at `spec.evaluation.batch_size`; and the renderer's
    preprocessing settings."""
    from tunelab.modeling.image_model import load_image_classifier

    renderer = lab_renderer(spec, lab, labels, version)
    model = load_image_classifier(spec.model, lab, labels, device)
    size = spec.evaluation.batch_size
    features = [
        base_features(model, renderer.encode(rows), len(labels), size, device) for rows in splits
    ]
    return features, renderer.settings


def folded(head: Head, labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The probe as one linear layer's weight (labels, features) and bias (labels,), rows in
    the model's label order, with the scaler folded in."""
    coef = head.coef / head.scale
    bias = head.intercept - coef @ head.mean
    if coef.shape[0] == 1:  # two classes: one log-odds row for classes[1]
        coef = np.concatenate([-coef / 2, coef / 2])
        bias = np.concatenate([-bias / 2, bias / 2])
    rows = [head.classes.index(label) for label in labels]
    return coef[rows], bias[rows]


def init_from_probe(
    model: torch.nn.Module,
    examples: list[Encoded] | list,
    labels: list[str],
    batch_size: int,
    pad_id: int,
    device: torch.device,
    cache: FeatureCache | None = None,
) -> dict:
    """Fit the probe on `examples` (the run's train split) and load it into the head; return
    what the record keeps: the layer, the rows, the probe's train accuracy, the seconds and
    whether the features came from `cache` (`feature_cache`); and two losses the run's first
    steps are held to (`training.divergence.start_lost`): the probe's own on train (the head's
    start, in evaluation mode) and `prior_loss`, that of a head knowing only how often each
    label occurs in train (their entropy). Multilabel examples (a 0/1
    target per label) get the one-vs-rest probe (`multilabel_head.init_from_multilabel_probe`)."""
    if examples and isinstance(examples[0].label, tuple):
        from tunelab.modeling.multilabel_head import init_from_multilabel_probe

        return init_from_multilabel_probe(
            model, examples, labels, batch_size, pad_id, device, cache
        )
    start = time.perf_counter()
    name, layer = head_layer(model, len(labels))
    x, cached = probe_features(model, (name, layer), examples, batch_size, pad_id, device, cache)
    gold = [labels[e.label] for e in examples]
    missing = sorted(set(labels) - set(gold))
    if missing:
        raise TunelabError(
            f"method.head_init: probe fits the head on the train split, which has no example "
            f"of {missing}; add some, or use head_init: new"
        )
    head = fit_head(x, gold, intercept=layer.bias is not None)
    weight, bias = folded(head, labels)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(weight, dtype=layer.weight.dtype))
        if layer.bias is not None:
            layer.bias.copy_(torch.as_tensor(bias, dtype=layer.bias.dtype))
    proba = head.predict_proba(x)
    predicted = np.asarray(head.classes)[proba.argmax(axis=1)]
    picked = proba[np.arange(len(gold)), [head.classes.index(g) for g in gold]]
    _, counts = np.unique(gold, return_counts=True)
    shares = counts / counts.sum()
    return {
        "from": "probe",
        "layer": name,
        "features": int(x.shape[1]),
        "rows": len(examples),
        "train_accuracy": round(float(np.mean(predicted == np.asarray(gold))), 4),
        "train_loss": round(float(-np.mean(np.log(np.clip(picked, 1e-12, None)))), 4),
        "prior_loss": round(float(-np.sum(shares * np.log(shares))), 4),
        "seconds": round(time.perf_counter() - start, 2),
        "features_cached": cached,
    }
