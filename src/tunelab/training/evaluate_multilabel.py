"""Evaluating a multilabel classifier: a sigmoid per label, then the decision threshold.

The model's logits become one probability per label (`probabilities`, batches in length order
as every classifier's evaluation runs). On the validation split the threshold is chosen there
(`tasks.multilabel.choose_threshold`) and recorded with the metrics (`metrics.threshold`) and
in each prediction; on any other split (`tunelab final`'s test split, a bundle's check) the
caller passes the recorded threshold and it is applied as it is, never chosen again.
"""

from __future__ import annotations

import numpy as np
import torch

from tunelab.modeling.classifier_inputs import Encoded, classifier_batch, encode_classification
from tunelab.modeling.render import Renderer
from tunelab.tasks.multilabel import score_probabilities


@torch.no_grad()
def probabilities(
    model: torch.nn.Module,
    examples: list[Encoded],
    batch_size: int,
    device: torch.device,
    pad_id: int,
) -> np.ndarray:
    """Each label's sigmoid probability, one row per example (in the examples' order)."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    out = np.zeros((len(examples), 0))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        logits = model(**classifier_batch([examples[i] for i in idx], pad_id, device)).logits
        probs = torch.sigmoid(logits.float()).cpu().numpy()
        if out.shape[1] != probs.shape[1]:
            out = np.zeros((len(examples), probs.shape[1]))
        out[idx] = probs
    return out


def evaluate_multilabel(
    model: torch.nn.Module,
    renderer: Renderer,
    rows: list[dict],
    batch_size: int,
    device: torch.device,
    threshold: float | None = None,
    metric: str | None = None,
) -> tuple[list[dict], dict]:
    """Predictions and metrics of `rows` (each with its `labels`). `threshold` None: chosen
    here, maximising `metric` (the primary metric; default micro_f1): the validation split
    only. Else the recorded threshold, applied."""
    model.eval()
    encoded = encode_classification(renderer.tokenizer, rows, renderer.labels, renderer.max_length)
    probs = probabilities(model, encoded, batch_size, device, renderer.pad_id)
    return score_probabilities(
        [r["id"] for r in rows],
        [r["labels"] for r in rows],
        probs,
        renderer.labels,
        threshold,
        metric,
    )
