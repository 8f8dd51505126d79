"""Classifier inputs: a text -> its tokens, cut on the right to `max_length` (the closing
special token kept), with its label as a class index (or, for task multilabel, a 0/1 per
label); microbatches padded dynamically to their longest member. What a classifier sees, for
training, evaluation, the probe, export and verify (`render.Renderer` holds the tokenizer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from tunelab.modeling.transfer import to_device


@dataclass(frozen=True)
class Encoded:
    id: str
    input_ids: list[int]
    label: int | tuple[float, ...]
    """The class index; for task multilabel, one 0.0/1.0 per label in the lab's order."""
    truncated: bool
    tokens: int | None = None
    """The text's tokens before any cut (what `inspect` reports of a split's lengths)."""


ENCODE_CHUNK = 2048
"""Texts tokenised at once for a classifier: a split's whole token lists, alive together, took
14 GB at 100,000 news articles (inspect, baseline and run alike), where the model reads 128
tokens of each."""


def encode_classification(
    tokenizer: PreTrainedTokenizerBase,
    examples: list[dict],
    labels: list[str],
    max_length: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Encoded]:
    """Each example's text as the classifier reads it, cut to `max_length`, a few thousand at a
    time (`ENCODE_CHUNK`): only the kept tokens of each stay; `progress(done, total)` before
    each chunk."""
    index = {label: i for i, label in enumerate(labels)}
    out = []
    for start in range(0, len(examples), ENCODE_CHUNK):
        if progress is not None:
            progress(start, len(examples))
        chunk = examples[start : start + ENCODE_CHUNK]
        ids = tokenizer([e["text"] for e in chunk], truncation=False)["input_ids"]
        for example, full in zip(chunk, ids, strict=True):
            kept = full if len(full) <= max_length else _truncate(full, max_length, tokenizer)
            if "labels" in example:  # task multilabel: a 0/1 per label, one sigmoid each
                from tunelab.tasks.multilabel import target_vector

                target = target_vector(example["labels"], index)
            else:
                target = index[example["label"]]
            out.append(Encoded(example["id"], kept, target, len(full) > max_length, len(full)))
    return out


def _truncate(ids: list[int], max_length: int, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Cut on the right but keep the closing special token (e.g. [SEP]) when the model has one."""
    last = ids[-1]
    if last in tokenizer.all_special_ids:
        return [*ids[: max_length - 1], last]
    return ids[:max_length]


def collate(batch: list[Encoded], pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Pad a microbatch on the right to its own longest sequence (dynamic padding)."""
    width = max(len(e.input_ids) for e in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, e in enumerate(batch):
        input_ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        attention[row, : len(e.input_ids)] = 1
    labels = torch.tensor([e.label for e in batch])
    return to_device(
        {"input_ids": input_ids, "attention_mask": attention, "labels": labels}, device
    )


def classifier_batch(examples: list, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """A classifier's inputs for a batch, without labels: texts (`Encoded`) padded, or images
    (`pixels.Pixels`) stacked; `model(**batch)` takes either."""
    from tunelab.modeling.pixels import Pixels, collate_pixels

    if isinstance(examples[0], Pixels):
        batch = collate_pixels(examples, device)
    else:
        batch = collate(examples, pad_id, device)
    batch.pop("labels")
    return batch
