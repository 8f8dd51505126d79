"""Where a causal LM's loss is, found on the host while the batch is built.

Only the positions whose next token is a target are projected onto the vocabulary
(`training.step.summed_loss`). Selecting them on the device with a boolean mask
(`hidden[mask]`, `targets[targets != -100]`, and the backward of the first) makes the host
wait for the device three times a microbatch on a GPU: the number of selected rows is data,
and torch reads it back before it can size the result. The collate knows the labels on the
host, so it says where the targets are there, and the device only gathers:

- `logits_to_keep` (batch, width): each row's target positions, left-aligned and padded with
  position 0 to the longest row's count (transformers' integer form of `logits_to_keep`, one
  `take_along_dim`);
- `target_slots` (targets,): where each target's logits sit in those rows flattened, in the
  order a boolean mask would give them (row by row);
- `targets` (targets,): the token each of them predicts.

The gathered logits are the same rows in the same order as the boolean selection's
(tests/unit/modeling/test_loss_positions.py); the output layer's product now runs over the
padded rows, so a BLAS may block it, and round it, differently. On the Intel Xeon measured, each
microbatch's loss came out the same bits, while the output layer's weight gradient, which now
also sums the padding slots' zero rows, changed in its last bits (bench/README.md, "The causal
loss's selections")."""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE = -100
"""The label of a position no loss is taken on (off the loss mask, padding): the
`ignore_index` F.cross_entropy skips by default."""


def target_index(labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """The three tensors above for a host `labels` (batch, positions), IGNORE off the loss."""
    targets = F.pad(labels[:, 1:], (0, 1), value=IGNORE)  # the token each position predicts
    mask = targets != IGNORE
    counts = mask.sum(dim=1)
    width = max(int(counts.max()), 1) if len(counts) else 1
    rows, positions = mask.nonzero(as_tuple=True)  # row by row, as `hidden[mask]` orders them
    slot = torch.arange(len(rows)) - (torch.cumsum(counts, 0) - counts)[rows]
    keep = torch.zeros((labels.size(0), width), dtype=torch.long)
    keep[rows, slot] = positions
    return {"logits_to_keep": keep, "target_slots": rows * width + slot, "targets": targets[mask]}


def target_logits(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(targets, vocabulary): the logits a model gave for `batch["logits_to_keep"]`, at the
    targets, in `batch["targets"]`'s order."""
    return logits.flatten(0, 1).index_select(0, batch["target_slots"])
