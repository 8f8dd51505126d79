"""FSDP2: each rank keeps a shard of every parameter, gradient and AdamW state.

`shard` applies `torch.distributed.fsdp.fully_shard` to every transformer block and then to the
root (the embeddings, the head, and what lies outside the blocks), on an explicit 1-D device
mesh: `cuda` under nccl, `cpu` under gloo (FSDP2 would otherwise move the parameters to the
default device: pytorch issue 132471). Frozen base weights are sharded too; a LoRA run's
adapters and their optimizer state are sharded with the block they belong to.

Gradients are reduce-scattered as a plain SUM (divide factor 1, sum-only collectives) on every
FSDP module, and the loop normalises the loss by the whole global batch's count, so a rank's
shard holds exactly the single-process gradient. Averaging is left out on purpose: gloo's AVG
under FSDP2 has silently summed instead (pytorch issue 162338), and summing is what the global
normalisation needs anyway. `tests/e2e/test_distributed.py` checks the result against one
process.

Mixed precision: under nccl with `training.precision: bf16`, parameters are gathered in bf16
and gradients reduced in fp32 (`MixedPrecisionPolicy`); gloo has no bf16 collectives, so there
they stay fp32 and bf16 comes from autocast alone, as in one process.

After training, `full_trainable` gathers the trained tensors to rank 0 (a full state dict on the
CPU), which loads them into a fresh, unsharded copy of the model to evaluate and save: the
handover is the same as from one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

FROZEN_OUT = {"ignore_frozen_params": True}
"""State-dict options: the trained tensors only (frozen base weights come from the base)."""


def shard(model: torch.nn.Module, device: torch.device, size: int, precision: str) -> dict:
    """Shard `model` in place over `size` ranks; return what the record keeps of it."""
    from collections import Counter

    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    from tunelab.modeling.blocks import blocks

    mesh = init_device_mesh(device.type, (size,))
    bf16_comms = precision == "bf16" and device.type == "cuda"
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16_comms
        else MixedPrecisionPolicy()
    )
    units = blocks(model)
    kinds = Counter(type(u).__name__ for u in units)  # before FSDP renames the classes
    for block in units:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    for module in model.modules():
        if isinstance(module, FSDPModule):  # each unit reduces its own gradients
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
    return {
        "units": " and ".join(f"{n} {kind}" for kind, n in kinds.most_common()) + " + the root"
        if units
        else "the root only (no transformer blocks found)",
        "gradient_reduction": "sum (the loss is normalised by the whole global batch)",
        "collectives_dtype": "bf16 params, fp32 gradients"
        if bf16_comms
        else "fp32" + (" (gloo has no bf16 collectives)" if precision == "bf16" else ""),
    }


def resharded(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with every FSDP unit's parameters sharded again (a no-op in one process). FSDP2
    leaves the root's parameters gathered after a forward (it keeps them for the backward): a
    copy taken then, or written into them, reaches a buffer FSDP throws away, not the shards
    that train and are saved (`training.keep: best` kept the head of the last step)."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    return model


def full_trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trained tensors gathered whole onto rank 0's CPU (every rank must call it; the
    others get an empty dict)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True, **FROZEN_OUT)
    return get_model_state_dict(model, options=options)


def load_trainable(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Load gathered trained tensors into an unsharded copy of the model. A tensor a model ties
    under two names (SmolLM2's input embeddings and output head) comes under both, where
    `named_parameters` lists it once: every name is looked up, the copy lands in the one tensor."""
    params = dict(model.named_parameters(remove_duplicate=False))
    names: dict[int, list[str]] = {}  # a tied tensor's names
    for name, param in params.items():
        names.setdefault(id(param), []).append(name)
    missing = sorted(
        n
        for n, p in model.named_parameters()
        if p.requires_grad and not any(alias in tensors for alias in names[id(p)])
    )
    if missing:
        raise RuntimeError(f"the gathered state lacks trained tensors {missing[:5]}")
    import torch

    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value)
