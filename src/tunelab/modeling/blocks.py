"""A model's transformer blocks, and the linear layers inside them.

FSDP shards one block per unit (`training/sharding.py`), `size` estimates per block, and a LoRA
without `method.target_modules` adapts every linear layer of the blocks: attention and MLP, not
the embeddings, a pooler or the head (the choice that learned most at equal budget in
EXPERIMENTS.md; QLoRA, Dettmers et al. 2023, found the same for decoders).
"""

from __future__ import annotations

import torch
from transformers.pytorch_utils import Conv1D


def is_linear(module: torch.nn.Module) -> bool:
    """A linear layer LoRA can adapt: torch's `Linear` (or `Conv1d`), or transformers' `Conv1D`,
    the transposed linear layer of GPT-2 and its kin (PEFT adapts it with `fan_in_fan_out`)."""
    return isinstance(module, torch.nn.Linear | torch.nn.Conv1d | Conv1D)


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks: modules of the model's `_no_split_modules` classes (what
    transformers itself keeps whole when it splits a model), else the items of its longest
    ModuleList of one class."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    found = [m for m in model.modules() if type(m).__name__ in names]
    if found:
        return found
    lists = [
        list(m)
        for m in model.modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) and len({type(c) for c in m}) == 1
    ]
    return max(lists, key=len, default=[])


def block_linears(model: torch.nn.Module) -> list[str]:
    """Full names of the linear layers inside the blocks, in the model's order; for a
    convolutional network whose blocks hold no linear layer (a ResNet, an EfficientNet), their
    convolutions that mix channels (groups of 1: PEFT's LoRA adapts those; a depthwise
    convolution has a few weights per channel and stays as it is)."""
    inside = {id(m) for block in blocks(model) for m in block.modules()}
    named = [(name, m) for name, m in model.named_modules() if id(m) in inside]
    linears = [n for n, m in named if is_linear(m)]
    if linears:
        return linears
    return [n for n, m in named if isinstance(m, torch.nn.Conv2d) and m.groups == 1]
