"""Predictions on a split under the shared protocol (same split, batch size, max length).

Examples are scored in length order so each batch pads little; results come back in the
split's own order, one record per example.
"""

from __future__ import annotations

import torch

from tunelab.render import Encoded, collate
from tunelab.tasks import get_task


@torch.no_grad()
def predict_classifier(
    model: torch.nn.Module,
    examples: list[Encoded],
    labels: list[str],
    batch_size: int,
    device: torch.device,
    pad_id: int,
) -> list[dict]:
    model.eval()
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    out: list[dict | None] = [None] * len(examples)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate([examples[i] for i in idx], pad_id, device)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        probs = torch.softmax(logits.logits.float(), dim=-1)
        conf, pred = probs.max(dim=-1)
        for row, i in enumerate(idx):
            out[i] = {
                "id": examples[i].id,
                "gold": labels[examples[i].label],
                "predicted": labels[int(pred[row])],
                "confidence": round(float(conf[row]), 4),
            }
    return out  # type: ignore[return-value]


def score(task_name: str, predictions: list[dict], labels: list[str]) -> dict:
    """Metrics of per-example predictions, by the task's own definitions."""
    task = get_task(task_name)
    gold = [p["gold"] for p in predictions]
    predicted = [p["predicted"] for p in predictions]
    return task.metrics(gold, predicted, labels)
