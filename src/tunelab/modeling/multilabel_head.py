"""The multilabel head: one sigmoid per label, its one-vs-rest probe, and LP-FT from that probe.

A multilabel model is the lab's sequence classifier (`AutoModelForSequenceClassification`, one
logit per label) trained with a binary cross-entropy per label (`training.step.summed_loss`),
its config marked `problem_type: multi_label_classification` so that transformers and the
handover read its logits as independent sigmoids, not one softmax.

The probe (baseline `probe`, and `method.head_init: probe`) is the single-label probe's
StandardScaler followed by one LogisticRegression per label (one-vs-rest), kept as arrays and
stored as safetensors beside its run, like `modeling/probe.py`'s head:

    probe_head.safetensors
      mean, scale        the scaler's per-feature mean and scale   (features,)
      coef, intercept    one logistic regression per label         (labels, features), (labels,)
      metadata           classes (the labels, JSON list), format, kind: multilabel

A label that every train row has, or none has, leaves a regression nothing to fit: its row is
zero and its intercept the log-odds of its train frequency (clipped to 0.001..0.999), a
constant probability. With the scaler folded into the layer, LP-FT starts the head at exactly
the probe's logits: W = coef / scale, b = intercept - W @ mean.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tunelab.core.errors import TunelabError
from tunelab.modeling.probe import HEAD_FORMAT
from tunelab.tasks.multilabel import multi_hot

PROBLEM_TYPE = "multi_label_classification"
HEAD_KIND = "multilabel"
HEAD_MODEL = "StandardScaler + one LogisticRegression(max_iter=2000) per label (one-vs-rest)"


def mark_multilabel(model: torch.nn.Module) -> None:
    """Mark the transformers model inside `model` (a PEFT wrapper is looked through) as
    multi-label, so its saved config says its logits are independent sigmoids."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner.config.problem_type = PROBLEM_TYPE


@dataclass(frozen=True)
class MultiHead:
    """A fitted scaler and one logistic regression per label, as arrays (see the module)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    classes: list[str]

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Each label's probability, one row per example, columns in `classes` order."""
        from scipy.special import expit

        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        return expit(z @ self.coef.T + self.intercept)


def fit_multilabel_head(
    x: np.ndarray, sets: list[list[str]], labels: list[str], intercept: bool = True
) -> MultiHead:
    """The scaler on `x`, then one logistic regression per label on whether each row has it;
    without `intercept` (a head layer with no bias) scaled, not centred, and no intercept, as
    `probe.fit_head` does (a label present in every row or none then starts at even odds)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    y = multi_hot(sets, labels)
    scaler = StandardScaler(with_mean=intercept).fit(x)
    z = scaler.transform(x)
    coef = np.zeros((len(labels), x.shape[1]))
    bias = np.zeros(len(labels))
    for j in range(len(labels)):
        column = y[:, j]
        if column.all() or not column.any():  # one class: a constant probability
            p = float(np.clip(column.mean(), 1e-3, 1 - 1e-3))
            bias[j] = np.log(p / (1 - p)) if intercept else 0.0
            continue
        regression = LogisticRegression(max_iter=2000, fit_intercept=intercept).fit(z, column)
        coef[j], bias[j] = regression.coef_[0], regression.intercept_[0] if intercept else 0.0
    return MultiHead(
        mean=np.asarray(scaler.mean_ if intercept else np.zeros(x.shape[1]), dtype=np.float64),
        scale=np.asarray(scaler.scale_, dtype=np.float64),
        coef=coef,
        intercept=bias,
        classes=list(labels),
    )


def save_multilabel_head(head: MultiHead, path: Path) -> None:
    """The head as safetensors, its labels and kind in the metadata (written atomically)."""
    from safetensors.numpy import save_file

    tensors = {
        "mean": head.mean,
        "scale": head.scale,
        "coef": head.coef,
        "intercept": head.intercept,
    }
    metadata = {
        "classes": json.dumps(head.classes),
        "format": HEAD_FORMAT,
        "model": HEAD_MODEL,
        "kind": HEAD_KIND,
    }
    tmp = path.with_name(f".{path.name}.tmp")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp), metadata)
    tmp.replace(path)


def load_multilabel_head(path: Path) -> MultiHead:
    """A head saved by `save_multilabel_head`; any other file is an error that names it."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            metadata = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in ("mean", "scale", "coef", "intercept")}
        classes = json.loads(metadata["classes"])
    except (OSError, KeyError, ValueError, SafetensorError) as err:
        raise TunelabError(f"{path}: not a probe head saved by tunelab ({err})") from None
    if metadata.get("kind") != HEAD_KIND or metadata.get("format") != HEAD_FORMAT:
        raise TunelabError(
            f"{path}: not a multilabel probe head (kind {metadata.get('kind')!r}, format "
            f"{metadata.get('format')!r})"
        )
    return MultiHead(classes=classes, **tensors)


def folded(head: MultiHead, labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The probe as one linear layer (labels, features) and bias, the scaler folded in."""
    coef = head.coef / head.scale
    bias = head.intercept - coef @ head.mean
    rows = [head.classes.index(label) for label in labels]
    return coef[rows], bias[rows]


def init_from_multilabel_probe(
    model: torch.nn.Module,
    examples: list,
    labels: list[str],
    batch_size: int,
    pad_id: int,
    device: torch.device,
    cache=None,
) -> dict:
    """LP-FT for a multilabel head (`head_init.init_from_probe`'s counterpart): fit the
    one-vs-rest probe on the head's input features over `examples` (the run's train split,
    each with its 0/1 targets; from `cache` when kept there) and load it into the head's last
    layer. Returns what the record keeps; `train_accuracy` is the probe's subset accuracy at
    0.5 on train, `prior_loss` the loss of a head knowing only how often each label occurs."""
    from tunelab.modeling.head_init import head_layer, probe_features

    start = time.perf_counter()
    name, layer = head_layer(model, len(labels))
    x, cached = probe_features(model, (name, layer), examples, batch_size, pad_id, device, cache)
    gold = np.asarray([e.label for e in examples], dtype=float) > 0.5
    if not gold.any():
        raise TunelabError(
            "method.head_init: probe fits the head on the train split, whose rows have no "
            "label at all; use head_init: new"
        )
    sets = [[labels[j] for j in np.flatnonzero(row)] for row in gold]
    head = fit_multilabel_head(x, sets, labels, intercept=layer.bias is not None)
    weight, bias = folded(head, labels)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(weight, dtype=layer.weight.dtype))
        if layer.bias is not None:
            layer.bias.copy_(torch.as_tensor(bias, dtype=layer.bias.dtype))
    proba = head.predict_proba(x)
    exact = (proba >= 0.5) == gold
    return {
        "from": "probe (one-vs-rest)",
        "layer": name,
        "features": int(x.shape[1]),
        "rows": len(examples),
        "train_accuracy": round(float(exact.all(-1).mean()), 4),
        # as the run's loss counts an example: its labels' mean binary cross-entropy
        "train_loss": round(_binary_loss(np.where(gold, proba, 1 - proba)), 4),
        "prior_loss": round(_binary_loss(np.where(gold, gold.mean(0), 1 - gold.mean(0))), 4),
        "seconds": round(time.perf_counter() - start, 2),
        "features_cached": cached,
    }


def _binary_loss(picked: np.ndarray) -> float:
    """The mean binary cross-entropy over examples and labels, given the probability each
    example's own answer for each label got (0 where it was certain and wrong is clipped)."""
    return float(-np.mean(np.log(np.clip(picked, 1e-12, None))))
