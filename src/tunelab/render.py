"""Example -> tokens: the one place that decides what the model sees, for training and evaluation.

Classification encodes the text alone (truncated on the right to `max_length`) with the label
as a class index; microbatches are padded dynamically to their longest member.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Encoded:
    id: str
    input_ids: list[int]
    label: int
    truncated: bool


def encode_classification(
    tokenizer: PreTrainedTokenizerBase,
    examples: list[dict],
    labels: list[str],
    max_length: int,
) -> list[Encoded]:
    index = {label: i for i, label in enumerate(labels)}
    out = []
    ids = tokenizer([e["text"] for e in examples], truncation=False)["input_ids"]
    for example, full in zip(examples, ids, strict=True):
        kept = full if len(full) <= max_length else _truncate(full, max_length, tokenizer)
        out.append(Encoded(example["id"], kept, index[example["label"]], len(full) > max_length))
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
    return {
        "input_ids": input_ids.to(device),
        "attention_mask": attention.to(device),
        "labels": torch.tensor([e.label for e in batch], device=device),
    }
