"""The linear probe: a frozen encoder's mean-pooled embeddings, and a fitted linear head on them.

`embed` turns encoded examples into one row per example. The head is a StandardScaler then a
LogisticRegression, fitted by scikit-learn (`fit_head`) and kept as plain arrays (`Head`), so
that it can be stored as safetensors beside its run and applied again with numpy alone:

    probe_head.safetensors
      mean, scale        the scaler's per-feature mean and scale          (features,)
      coef, intercept    the logistic regression's weights               (k, features), (k,)
      metadata           classes (JSON list, in the columns' order), format

k is the number of classes, or 1 for two classes (scikit-learn's binary form: a sigmoid).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tunelab.core.errors import TunelabError
from tunelab.modeling.classifier_inputs import Encoded, collate, encode_classification
from tunelab.modeling.render import pad_id

HEAD_FILE = "probe_head.safetensors"
HEAD_FORMAT = "1"
HEAD_MODEL = "StandardScaler + LogisticRegression(max_iter=2000)"


@torch.no_grad()
def embed(
    encoder: torch.nn.Module,
    examples: list[Encoded],
    batch_size: int,
    device: torch.device,
    pad_id: int,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Mean of the last hidden states over real (unpadded) tokens, one row per example;
    `progress(done, total)` after each batch."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    rows: list[np.ndarray | None] = [None] * len(examples)
    for start in range(0, len(order), batch_size):
        if progress is not None:
            progress(start, len(order))
        idx = order[start : start + batch_size]
        batch = collate([examples[i] for i in idx], pad_id, device)
        hidden = encoder(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state.float()
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        for row, i in enumerate(idx):
            rows[i] = pooled[row].cpu().numpy()
    return np.stack(rows)


def features(
    encoder: torch.nn.Module,
    tokenizer,
    rows: list[dict],
    labels: list[str],
    max_length: int,
    batch_size: int,
    device: torch.device,
    progress: Callable[[int, int], None] | None = None,
    tokenising: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """The probe's input for `rows`: each text encoded as every classifier sees it (cut to
    `max_length`), then embedded by the frozen encoder; `tokenising` and `progress` hear how
    far each has come."""
    encoded = encode_classification(tokenizer, rows, labels, max_length, tokenising)
    return embed(encoder, encoded, batch_size, device, pad_id(tokenizer), progress)


@dataclass(frozen=True)
class Head:
    """A fitted StandardScaler + LogisticRegression as arrays (see the module's docstring)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    classes: list[str]

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, one row per example, columns in `classes` order: what
        scikit-learn's pipeline gives (scaled features, linear scores, sigmoid or softmax).
        Scaling is done in the features' own dtype, as scikit-learn's scaler does it."""
        z = np.array(x, dtype=np.result_type(x, np.float32))  # a copy; float32 stays float32
        z -= self.mean.astype(z.dtype)
        z /= self.scale.astype(z.dtype)
        scores = z @ self.coef.T + self.intercept
        if self.coef.shape[0] == 1:  # two classes: one score, the second class's log-odds
            from scipy.special import expit  # scikit-learn's sigmoid, for the same bits

            p = expit(scores[:, 0])
            return np.stack([1 - p, p], axis=1)
        scores = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)

    def predictions(self, rows: list[dict], x: np.ndarray) -> list[dict]:
        """Per-example predictions in the shape every run stores (confidence to 4 decimals)."""
        probs = self.predict_proba(x)
        return [
            {
                "id": r["id"],
                "gold": r["label"],
                "predicted": self.classes[int(p.argmax())],
                "confidence": round(float(p.max()), 4),
            }
            for r, p in zip(rows, probs, strict=True)
        ]


def fit_head(x: np.ndarray, labels: list[str], intercept: bool = True) -> Head:
    """Fit the scaler and the logistic regression on `x` and keep their arrays (the scaler's in
    float64, the regression's in the features' dtype, as scikit-learn leaves them). Without
    `intercept` (a head layer with no bias: a decoder's `score`) the features are scaled, not
    centred, and the regression has no intercept, so the layer holds the whole probe: folded
    into a bias-less layer, the probe's intercept and centring had been dropped (GPT-2's LP-FT
    start scored 68.8% where its probe scored 87.5%)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipeline = make_pipeline(
        StandardScaler(with_mean=intercept),
        LogisticRegression(max_iter=2000, fit_intercept=intercept),
    )
    pipeline.fit(x, labels)
    scaler, regression = pipeline[0], pipeline[-1]
    coef = np.asarray(regression.coef_)
    return Head(  # each array in scikit-learn's own dtype, so applying it gives the same bits
        mean=np.asarray(scaler.mean_) if intercept else np.zeros_like(scaler.scale_),
        scale=np.asarray(scaler.scale_),
        coef=coef,
        intercept=np.asarray(regression.intercept_)
        if intercept
        else np.zeros(coef.shape[0], coef.dtype),
        classes=[str(c) for c in regression.classes_],
    )


def save_head(head: Head, path: Path) -> None:
    """The head as safetensors (each tensor in its fitted dtype; the classes' order in the
    metadata)."""
    from safetensors.numpy import save_file

    tensors = {
        "mean": head.mean,
        "scale": head.scale,
        "coef": head.coef,
        "intercept": head.intercept,
    }
    metadata = {"classes": json.dumps(head.classes), "format": HEAD_FORMAT, "model": HEAD_MODEL}
    tmp = path.with_name(f".{path.name}.tmp")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp), metadata)
    tmp.replace(path)  # a kill leaves no half-written head under the real name


def load_head(path: Path) -> Head:
    """A head saved by `save_head`; a file of another shape is an error that names it."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            metadata = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in ("mean", "scale", "coef", "intercept")}
        classes = json.loads(metadata["classes"])
    except (OSError, KeyError, ValueError, SafetensorError) as err:
        raise TunelabError(f"{path}: not a probe head saved by tunelab ({err})") from None
    if metadata.get("format") != HEAD_FORMAT:
        raise TunelabError(f"{path}: probe head format {metadata.get('format')!r} is unknown")
    return Head(classes=classes, **tensors)
