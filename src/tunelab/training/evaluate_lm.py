"""Scoring documents for `task: pretrain`: summed NLL per document, then bits per byte.

Every validation document is scored alone, laid out as in training (`[EOS] + its tokens`,
`modeling.packing`): each of its text tokens is predicted from the tokens before it, in
windows of `model.max_length` tokens, the evaluation's window (a longer document is cut into
consecutive windows, each starting without the context of the one before; a model that trains
on shorter sequences is warned of, `stages.inspect.windows`). Windows are batched longest
first, padded on the right with a causal mask, so padding never reaches a real position. The
UTF-8 bytes are those of the row's text as stored in the data version.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tunelab.modeling.loss_positions import IGNORE
from tunelab.modeling.packing import segments
from tunelab.tasks import pretrain
from tunelab.training.routing import RouteCounts


def windows(segment: list[int], length: int) -> list[tuple[list[int], list[int]]]:
    """(inputs, targets) pairs covering every token after the first, `length` at a time."""
    out = []
    for start in range(0, len(segment) - 1, length):
        targets = segment[start + 1 : start + 1 + length]
        out.append((segment[start : start + len(targets)], targets))
    return out


@torch.no_grad()
def document_nll(
    model: torch.nn.Module,
    segs: list[list[int]],
    sequence_length: int,
    batch_size: int,
    device: torch.device,
    pad_id: int,
    routes: RouteCounts | None = None,
) -> list[float]:
    """The summed NLL (nats) of each segment's text tokens (`[EOS] + tokens`), in order; with
    `routes`, a mixture of experts' routing of the real tokens counted too."""
    jobs = [
        (i, inputs, targets)
        for i, seg in enumerate(segs)
        for inputs, targets in windows(seg, sequence_length)
    ]
    jobs.sort(key=lambda job: -len(job[1]))
    nll = [0.0] * len(segs)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        width = len(chunk[0][1])
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        targets = torch.full_like(ids, IGNORE)
        for row, (_, inputs, tgt) in enumerate(chunk):
            ids[row, : len(inputs)] = torch.tensor(inputs)
            mask[row, : len(inputs)] = 1
            targets[row, : len(tgt)] = torch.tensor(tgt)
        extra = {"output_router_logits": True} if routes else {}
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), **extra)
        if routes:
            routes.add(out.router_logits, mask.flatten().bool().to(device))
        logits = out.logits.float()
        # the vocabulary as the last, contiguous axis: over (batch, vocabulary, positions), its
        # other layout, a CPU's log-softmax summed about 1.3e-4 nats a token low on SmolLM2's
        # 49,152 words, and took 5.7x as long (bench/README.md)
        losses = (
            F.cross_entropy(
                logits.flatten(0, 1),
                targets.flatten().to(device),
                ignore_index=IGNORE,
                reduction="none",
            )
            .view(targets.shape)
            .sum(-1)
        )
        for (i, _, _), loss in zip(chunk, losses.tolist(), strict=True):  # one read a batch
            nll[i] += loss
    return nll


def score_documents(
    model: torch.nn.Module,
    tokenizer,
    rows: list[dict],
    sequence_length: int,
    batch_size: int,
    device: torch.device,
    pad_id: int,
) -> tuple[list[dict], dict]:
    """Per-document predictions (`nll`, `bytes`, `tokens`, `source`, and the document's own
    `bits_per_byte`) and the task's metrics."""
    model.eval()
    segs = [seg for _, seg in segments(tokenizer, rows)]  # tokenized once
    routes = RouteCounts.of(model)
    nll = document_nll(model, segs, sequence_length, batch_size, device, pad_id, routes)
    tokens = [len(seg) - 1 for seg in segs]
    predictions = []
    for row, n, t in zip(rows, nll, tokens, strict=True):
        n_bytes = len(row["text"].encode("utf-8"))
        predictions.append(
            {
                "id": row["id"],
                "source": row.get("source") or "data",
                "nll": n,
                "bytes": n_bytes,
                "tokens": t,
                "bits_per_byte": n / (math.log(2) * n_bytes),
            }
        )
    metrics = pretrain.metrics(predictions)
    if routes:
        metrics["routing"] = routes.summary()
    return predictions, metrics
