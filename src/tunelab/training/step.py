"""One training step, the only one: `run` takes it, `size` measures it, `check` verifies it.

A step sees one global batch as microbatches. Each microbatch's loss is the *sum* of its
losses (per example for a classifier, per target token for a causal LM) divided by the same
count over the whole global batch (`denominator`), then backward; the gradients accumulate.
Then clipping, the optimizer step, the scheduler step and the gradients set to None. So the
accumulated gradient equals the gradient of one large batch even when microbatches hold
different numbers of target tokens.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tunelab.modeling.classifier_inputs import Encoded, collate
from tunelab.modeling.loss_positions import IGNORE, target_logits
from tunelab.modeling.packing import Packed, collate_packed
from tunelab.modeling.pixels import Pixels, collate_pixels
from tunelab.modeling.render import Rendered, collate_causal, collate_causal_packed

LOSS_NORMALISATION = (
    "sum of losses (per example, or per target token for a causal LM) / the same count over "
    "the whole accumulated global batch; a mixture of experts adds its router's "
    "load-balancing loss (each sparse layer's, averaged over the layers) × its coefficient "
    "once per target token, logged apart as balance_loss (loss is the task's alone)"
)
Example = Encoded | Rendered | Packed | Pixels


def autocast(device: torch.device, precision: str):
    """bf16 autocast when the spec asks for it (weights stay in the model's dtype), else a
    no-op context."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def loss_weight(example: Example) -> int:
    """How many terms an example adds to the loss: 1, or its target tokens."""
    return example.loss_tokens if isinstance(example, Rendered | Packed) else 1


def make_batch(
    micro: Sequence[Example], pad_id: int, device: torch.device, packing: bool = False
) -> dict:
    """A microbatch's tensors; `packing` (causal-LM examples): one padding-free row."""
    if isinstance(micro[0], Pixels):
        return collate_pixels(list(micro), device)
    if isinstance(micro[0], Packed):
        return collate_packed(list(micro), device)
    if isinstance(micro[0], Rendered):
        if packing:
            return collate_causal_packed(list(micro), device)
        return collate_causal(list(micro), pad_id, device)
    return collate(list(micro), pad_id, device)


def summed_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Sum (not mean) of the losses in a microbatch, what the gradient is taken of: the task's
    and a mixture of experts' load balancing (`summed_losses`)."""
    task, balance = summed_losses(model, batch)
    return task if balance is None else task + balance


def summed_losses(
    model: torch.nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The task's summed loss in a microbatch (the caller divides by the global count), and a
    mixture of experts' load-balancing term summed the same way (`balance_sum`; None for any
    other model).

    A causal LM's logits at position t predict the token at t + 1. Only the positions whose
    next token is a target are projected onto the vocabulary, where the model can be told so
    (`logits_to_keep`, transformers' `slice_logits_to_keep`, at the positions the collate found
    on the host: `modeling.loss_positions`, so the device never waits for a count): the same
    loss and gradients, without the logits of the prompt and the padding (for SmolLM2's
    49,152-word vocabulary, most of a step's activation memory; bench/README.md, "loss-only
    logits")."""
    labels = batch["labels"]
    if labels.dim() == 1:  # one class per example
        logits = forward(model, batch).logits.float()
        return F.cross_entropy(logits, labels, reduction="sum"), None
    if labels.is_floating_point():  # task multilabel: a 0/1 target per label, one sigmoid each
        logits = forward(model, batch).logits.float()
        # an example's loss is its labels' mean binary cross-entropy (as BCEWithLogitsLoss)
        loss = F.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
        return loss / labels.size(1), None
    targets = labels[:, 1:]
    if keeps_logits(model):
        out = forward(model, batch, logits_to_keep=batch["logits_to_keep"])
        routed = getattr(out, "router_logits", None)
        kept = target_logits(out.logits, batch)  # (targets, vocabulary)
        del out  # the rows around the targets' logits go now, before the loss's own copies
        loss = F.cross_entropy(kept.float(), batch["targets"], reduction="sum")
    else:
        out = forward(model, batch)
        routed = getattr(out, "router_logits", None)
        shifted = out.logits[:, :-1].float().reshape(-1, out.logits.size(-1))
        loss = F.cross_entropy(shifted, targets.reshape(-1), ignore_index=IGNORE, reduction="sum")
    return loss, balance_sum(model, routed, batch, (targets != IGNORE).sum())


def balance_sum(
    model: torch.nn.Module, routed, batch: dict[str, torch.Tensor], targets: torch.Tensor
) -> torch.Tensor | None:
    """A mixture of experts' load-balancing loss × its coefficient, once per target token (as
    the losses are summed): each sparse layer's Switch Transformer loss (E × Σᵢ fᵢ·Pᵢ, eqs. 4-6;
    transformers' `load_balancing_loss_func` given that layer alone), averaged over the layers.
    transformers pools every layer's routing before it measures the balance, which reads two
    layers that split the experts between them (one on experts 0 and 1, the other on 2 and 3)
    as balanced: a run whose weight was raised to even its routing found exactly that split.
    Balanced, each layer's loss is the experts per token. None without router logits."""
    config = _config(model)
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    if not routed or not experts:
        return None
    from transformers.models.qwen2_moe.modeling_qwen2_moe import load_balancing_loss_func

    mask = None if "position_ids" in batch else batch.get("attention_mask")  # as `forward`
    per_token = config.num_experts_per_tok
    layers = [load_balancing_loss_func((g,), experts, per_token, mask) for g in routed]
    coef = getattr(config, "router_aux_loss_coef", 0.0)
    return coef * torch.stack(layers).float().mean() * targets


def keeps_logits(model: torch.nn.Module) -> bool:
    """The transformers model inside `model` (a PEFT or DDP wrapper is looked through) takes
    `logits_to_keep` as positions per row: its module slices with `slice_logits_to_keep`."""
    inner = _unwrapped(model)
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    return any(  # the class's own module, or its base's (FSDP2 subclasses it)
        getattr(sys.modules.get(cls.__module__), "slice_logits_to_keep", None) is not None
        for cls in type(inner).__mro__
    )


def forward(model: torch.nn.Module, batch: dict[str, torch.Tensor], **extra):
    """The model's outputs on a training batch. Packed sequences with restarting
    `position_ids` (`modeling.packing`, boundaries `mask`) go in with neither an attention mask
    nor a cache: only then does transformers build the block-diagonal causal mask from the
    restarts (`masking_utils._preprocess_mask_arguments`). Anything else goes in with its
    attention mask; images go in as their pixels. `extra`: e.g. `logits_to_keep`."""
    if "pixel_values" in batch:
        return model(pixel_values=batch["pixel_values"], **extra)
    if "position_ids" in batch:
        return model(
            input_ids=batch["input_ids"],
            position_ids=batch["position_ids"],
            use_cache=False,
            **extra,
        )
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **extra)


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a `torch.compile` or DDP wrapper (FSDP2 and PEFT models are their own
    modules)."""
    model = getattr(model, "_orig_mod", model)
    return getattr(model, "module", model)


def _config(model: torch.nn.Module):
    """The transformers config inside a DDP, FSDP or PEFT wrapper."""
    return getattr(_unwrapped(model), "config", None)


def backward(
    model: torch.nn.Module, batch: dict, denominator: float, device: torch.device, precision: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Forward, summed loss / `denominator`, backward: one microbatch's share of the gradient.
    Returns that share of the task's loss and of the balancing term (None but for a mixture of
    experts) as 0-d tensors on the device (read by no one here: reading them would make the
    host wait for the device)."""
    with autocast(device, precision):
        task, balance = summed_losses(model, batch)
        loss = (task if balance is None else task + balance) / denominator
    loss.backward()
    return (task / denominator).detach().float(), _share(balance, denominator)


def _share(balance: torch.Tensor | None, denominator: float) -> torch.Tensor | None:
    return None if balance is None else (balance / denominator).detach().float()


def train_mode(model: torch.nn.Module) -> torch.nn.Module:
    """Training mode, except batch normalisation whose weights are frozen (a LoRA on a
    convolutional network): its running statistics stay as the base has them. They are buffers
    an adapter does not save, so statistics moved by training would give the trained model one
    output in this process and another once reloaded on the base."""
    model.train()
    for module in model.modules():
        if is_batch_norm(module) and not trains(module):
            module.eval()
    return model


def is_batch_norm(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm)


def trains(module: torch.nn.Module) -> bool:
    """Whether any of `module`'s own weights train (its children's not counted)."""
    return any(p.requires_grad for p in module.parameters(recurse=False))


def make_optimizer(
    model: torch.nn.Module, lr: float, weight_decay: float
) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    """AdamW over the trainable parameters, with torch's fused kernel (one pass over each
    tensor, as transformers' Trainer's `adamw_torch_fused`) wherever every parameter is a
    floating CPU or CUDA tensor: on a CPU it steps 22.7M parameters in 8.3 ms against 89 ms for
    the default loop (bench/README.md, "the optimizer")."""
    params = [p for p in model.parameters() if p.requires_grad]
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return params, torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused or None)


@dataclass(frozen=True)
class StepResult:
    """What one step did, as 0-d tensors on the device: the loop reads them once per step, in
    one transfer with the other ranks' (`World.step_totals`), never per microbatch."""

    loss: torch.Tensor
    """This process's share of the global batch's normalised loss (the sum of its
    microbatches' shares)."""
    grad_norm: torch.Tensor | None
    """Before clipping; None without `max_grad_norm`."""
    tokens: torch.Tensor
    """Non-pad tokens the step's forward passes saw (an image lab: images)."""
    balance: torch.Tensor | None = None
    """A mixture of experts' share of its load-balancing term, normalised as `loss` is and
    trained on beside it; None for any other model."""


def _accumulating(model: torch.nn.Module, last: bool):
    """Several processes combine gradients once per step, after the last microbatch: DDP's
    `no_sync` before it; FSDP2 reduce-scatters only when gradient sync is on."""
    sync = getattr(model, "set_requires_gradient_sync", None)
    if sync is not None:
        sync(last)
        return nullcontext()
    no_sync = getattr(model, "no_sync", None)
    return no_sync() if no_sync is not None and not last else nullcontext()


def inputs_seen(batch: dict[str, torch.Tensor]) -> torch.Tensor | int:
    """What a microbatch counts toward tokens/s: its non-pad tokens (summed on the device), or
    its images."""
    if "pixel_values" in batch:
        return batch["pixel_values"].shape[0]
    return batch["attention_mask"].sum()


def _norm(total: torch.Tensor) -> torch.Tensor:
    """The clipped gradients' norm as a plain tensor (FSDP2 returns it as a DTensor)."""
    full = getattr(total, "full_tensor", None)
    return (full() if full is not None else total).detach().float()


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    batches: Sequence[dict],
    denominator: float,
    device: torch.device,
    precision: str,
    max_grad_norm: float | None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> StepResult:
    """One optimizer step over `batches` (the microbatches of one global batch), with no read
    from the device: the loss and the token count stay there as tensors."""
    loss = torch.zeros((), device=device)
    balance = None
    tokens = torch.zeros((), dtype=torch.long, device=device)
    for i, batch in enumerate(batches):
        with _accumulating(model, last=i == len(batches) - 1):
            task, balanced = backward(model, batch, denominator, device, precision)
        loss += task
        if balanced is not None:
            balance = balanced if balance is None else balance + balanced
        tokens += inputs_seen(batch)
    grad_norm = None
    if max_grad_norm is not None:
        grad_norm = _norm(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return StepResult(loss, grad_norm, tokens, balance)
