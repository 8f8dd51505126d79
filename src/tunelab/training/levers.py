"""The speed levers of `training` that the loop applies: threads, compilation, length grouping.

Each is a spec field (`training.threads`, `.compile`, `.group_by_length`; `.packing` is in
`modeling.render.collate_causal_packed`, `model.attention` where the model is loaded, and
`.precision: auto` in `training.precision`), in the `speed` parameter group of the one-change
rule, and measured on and off in bench/README.md ("Speed levers").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def apply_threads(threads: int | None) -> int:
    """Set torch's CPU threads when the spec gives a count; return the count in use."""
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def compiled(model: torch.nn.Module, on: bool) -> torch.nn.Module:
    """The module the steps run through: `torch.compile(model, dynamic=True)` (a wrapper that
    shares the model's parameters; the lengths of padded batches vary, hence dynamic shapes),
    or the model itself. Checkpoints, saving and evaluation keep using the model."""
    return torch.compile(model, dynamic=True) if on else model


def by_length(indices: Sequence[int], examples: Sequence, on: bool) -> list[int]:
    """`indices` longest first when grouping by length (so the first microbatch shows the
    step's peak memory at once), else as they are. Packed sequences are all alike: unchanged."""
    if not on:
        return list(indices)
    return sorted(indices, key=lambda i: -len(examples[i].input_ids))
