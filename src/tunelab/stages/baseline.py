"""`tunelab baseline`: the honest starting points of a classifier whose head is new.

Two baselines, each saved as a run record with per-example predictions on validation:

- **majority**: always predict the most common train label (what "better than nothing" means);
- **probe**: a logistic regression on the frozen pretrained encoder's mean-pooled embeddings
  (what the encoder already knows without any fine-tuning).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from rich.console import Console
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tunelab.core import ledger
from tunelab.core.lab import Lab
from tunelab.core.store import write_jsonl
from tunelab.modeling.model import identity, load_causal, load_encoder, load_tokenizer
from tunelab.modeling.render import Encoded, collate, encode_classification, make_renderer
from tunelab.training.evaluate import evaluate_rows, protocol, score


def run_baseline(lab: Lab, console: Console | None = None) -> dict:
    store, spec = lab.store, lab.spec
    version = store.current_data()
    labels = store.data_manifest(version)["labels"]
    train, val = store.read_split(version, "train"), store.read_split(version, "validation")
    base = identity(spec.model, lab.path)
    if spec.model_kind == "causal":
        return {"data_version": version, "runs": [_zero_shot(lab, version, labels, val, base)]}

    majority_label = Counter(e["label"] for e in train).most_common(1)[0][0]
    majority = [{"id": e["id"], "gold": e["label"], "predicted": majority_label} for e in val]
    runs = [_save(lab, "majority", version, labels, majority, {"label": majority_label}, base)]

    tokenizer = load_tokenizer(spec.model, lab.path)
    encoder = load_encoder(spec.model, lab.path, lab.device)
    pad = tokenizer.pad_token_id
    if console:
        console.print(f"[dim]embedding {len(train)} train and {len(val)} validation examples…[/]")
    enc_train = encode_classification(tokenizer, train, labels, spec.model.max_length)
    enc_val = encode_classification(tokenizer, val, labels, spec.model.max_length)
    x_train = embed(encoder, enc_train, spec.evaluation.batch_size, lab.device, pad)
    x_val = embed(encoder, enc_val, spec.evaluation.batch_size, lab.device, pad)
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    probe.fit(x_train, [e["label"] for e in train])
    probs = probe.predict_proba(x_val)
    classes = list(probe.classes_)
    predicted = [
        {
            "id": e["id"],
            "gold": e["label"],
            "predicted": classes[int(p.argmax())],
            "confidence": round(float(p.max()), 4),
        }
        for e, p in zip(val, probs, strict=True)
    ]
    probe_info = {
        "model": "StandardScaler + LogisticRegression(max_iter=2000)",
        "features": "mean-pooled last hidden state of the frozen encoder",
    }
    runs.append(_save(lab, "probe", version, labels, predicted, probe_info, base))
    return {"data_version": version, "runs": runs}


def _zero_shot(lab: Lab, version: str, labels: list[str], val: list[dict], base: dict) -> dict:
    renderer = make_renderer(lab.spec, load_tokenizer(lab.spec.model, lab.path), labels, lab.path)
    model = load_causal(lab.spec.model, lab.path, lab.device)
    e = lab.spec.evaluation
    predictions, metrics = evaluate_rows(
        model, renderer, val, e.batch_size, e.max_new_tokens, lab.device
    )
    info = {"model": "the base model, zero-shot, with the lab's template and decoding"}
    return _save(lab, "zero-shot", version, labels, predictions, info, base, metrics)


def _save(
    lab: Lab,
    name: str,
    version: str,
    labels: list[str],
    predictions: list[dict],
    info: dict,
    base: dict,
    metrics: dict | None = None,
) -> dict:
    record, run_dir = ledger.open_run(
        lab,
        name,
        "baseline",
        version,
        method=name,
        base_model=base,
        baseline=info,
        protocol=protocol(lab.spec),
    )
    write_jsonl(run_dir / "predictions.jsonl", predictions)
    record["metrics"] = metrics or score(lab.spec.task.type, predictions, labels)
    ledger.close_run(lab, record, "completed")
    return record


@torch.no_grad()
def embed(
    encoder: torch.nn.Module,
    examples: list[Encoded],
    batch_size: int,
    device: torch.device,
    pad_id: int,
) -> np.ndarray:
    """Mean of the last hidden states over real (unpadded) tokens, one row per example."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    rows: list[np.ndarray | None] = [None] * len(examples)
    for start in range(0, len(order), batch_size):
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
