"""The training items of `tunelab check`: train_loop, update and loss, from one real loop.

`train.train` runs UPDATE_STEPS optimizer steps on one global batch of the slice (the spec's
microbatch, at most 2 accumulation steps), so the same two steps show that the loop runs,
that exactly the tensors the method trains move (`watch_updates`), and that the loss goes down
on the batch they have overfit: on its first microbatch, in eval mode before and after (dropout
cannot blur it), as the check's older separate overfit of one microbatch measured it.
"""

from __future__ import annotations

import hashlib
import math
from contextlib import contextmanager

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from tunelab.core.spec import Budget, FullMethod
from tunelab.stages.check.record import item
from tunelab.stages.check.reload import loss_and_logits
from tunelab.training.loop import train
from tunelab.training.step import Example, autocast, loss_weight, make_batch

UPDATE_STEPS = 2
"""Two because LoRA's B starts at zero, so A gets no gradient at step 1."""


def intended_trainable(name: str, method) -> bool:
    """What the method trains: everything (full), else LoRA weights and modules_to_save copies."""
    return isinstance(method, FullMethod) or ".lora_" in name or ".modules_to_save." in name


def check_cfg(ctx: dict, examples: int, steps: int):
    """The spec's optimizer, lr, weight decay, clipping and precision; a constant schedule, no
    warmup; the spec's microbatch (at most the slice) with at most 2 accumulation steps."""
    cfg = ctx["lab"].spec.training
    micro = min(cfg.microbatch, examples)
    return cfg.model_copy(
        update={
            "budget": Budget(steps=steps),
            "schedule": "constant",
            "warmup_steps": 0,
            "microbatch": micro,
            "global_batch": micro * min(cfg.accumulation, 2),
        }
    )


def training_step(ctx: dict) -> list[dict]:
    """The loss on the first microbatch, UPDATE_STEPS steps of `train.train` on the global
    batch that holds it (an optimizer step hook takes the digests after each step), the loss
    again; the three items."""
    lab, model = ctx["lab"], ctx["model"]
    cfg = check_cfg(ctx, len(ctx["examples"]), UPDATE_STEPS)
    ctx["cfg"] = cfg.model_dump(mode="json")
    batch = ctx["examples"][: cfg.global_batch]
    micro = batch[: cfg.microbatch]
    before = eval_loss(ctx, micro)
    with watch_updates(model) as (grads, snapshots):
        record = train(model, batch, cfg, lab.device, ctx["renderer"].pad_id)
    after = eval_loss(ctx, micro, keep=True)  # its forward is also the evaluation's first
    losses = [h["loss"] for h in record["history"]]
    loop = (
        f"{record['steps']} steps of {record['global_batch']} examples = {record['microbatch']} "
        f"× {record['accumulation']} accumulation, {record['tokens']} {record['unit']}, losses "
        + ", ".join(f"{x:.4f}" for x in losses)
    )
    return [
        item(
            "train_loop",
            len(losses) == UPDATE_STEPS and all(map(math.isfinite, losses)),
            loop,
            losses=losses,
        ),
        update_item(model, lab.spec.method, grads, snapshots, reported_untrainable(ctx)),
        loss_item(before, after, losses, len(micro), len(batch), ctx.get("start_lost")),
    ]


def reported_untrainable(ctx: dict) -> set[str]:
    """The tensors the method froze because no gradient can reach them (the trainable report's
    `untrainable`, `modeling.scratch.untrainable`): held to bit-identical, as frozen ones."""
    return set(((ctx.get("trainable") or {}).get("untrainable") or {}).get("tensors", []))


def update_item(
    model: torch.nn.Module,
    method,
    grads: dict,
    snapshots: list[dict],
    dead: set[str] = frozenset(),
) -> dict:
    """By parameter name: every tensor the method trains got a nonzero gradient and changed;
    every other tensor (`dead` ones too) is bit-identical."""
    first_change, no_grad, stuck, moved = {}, [], [], []
    for name, p in model.named_parameters():
        start = snapshots[0][name]
        steps = [k for k in range(1, len(snapshots)) if snapshots[k].get(name, start) != start]
        if name in dead or not intended_trainable(name, method):
            moved += [name] if steps else []
        elif not grads.get(name):
            no_grad.append(name + ("" if p.requires_grad else " (requires_grad is False)"))
        elif steps:
            first_change[name] = steps[0]
        else:
            stuck.append(name)
    problems = [
        f"{what}: {_some(names)}"
        for what, names in (
            ("trainable but no gradient reached them", no_grad),
            (
                "trainable, with a gradient, but unchanged (update below the dtype's resolution?)",
                stuck,
            ),
            ("frozen but changed", moved),
        )
        if names
    ]
    late = sorted(n for n, k in first_change.items() if k > 1)
    frozen = len(snapshots[0]) - len(first_change)
    detail = "; ".join(problems) or (
        f"all {len(first_change)} trainable tensors changed, {frozen} frozen ones are "
        "bit-identical"
        + (f"; {len(late)} first changed at step 2 (LoRA A: B starts at zero)" if late else "")
    )
    return item(
        "update",
        not problems and len(snapshots) == UPDATE_STEPS + 1,
        detail,
        no_gradient=no_grad,
        unchanged=stuck,
        frozen_changed=moved,
        changed_at_step_2=late,
    )


def _some(names: list[str], shown: int = 3) -> str:
    """`74 tensors, e.g. a, b, c (all in the check's record)`: a LoRA's every A matrix is 36
    names, a screenful each."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{len(names)} tensors, e.g. {', '.join(names[:shown])} (all in the check's record)"


FIT = 0.05
"""A starting loss below this (a head fitted from a probe to the slice itself) may leave no fall
to show: where it did not fall, the loss item is not checked, and says what the steps did."""


def loss_item(
    before: float,
    after: float,
    losses: list[float],
    micro: int,
    batch: int,
    start_lost: dict | None = None,
) -> dict:
    """Whether the steps lowered the microbatch's loss. Not checked where no fall can show: a
    loss fitted already, or a probe's head whose start dropout undoes (`start_lost`, the
    head_init item's warning: the steps train from a loss far above the fitted one)."""
    finite = all(map(math.isfinite, [before, after, *losses]))
    detail = (
        f"one microbatch of {micro} overfit for {UPDATE_STEPS} steps (in the global batch of "
        f"{batch}): loss {before:.4f} -> {after:.4f} (eval mode, before and after)"
    )
    if start_lost and finite and after >= before:
        return item(
            "loss",
            False,
            f"not checked: the head starts from a probe whose start does not survive training mode "
            f"(head_init's warning), so the steps trained from losses of "
            f"{', '.join(f'{x:.4f}' for x in losses)}, not from the fitted "
            f"{before:.4f}, and a rise says nothing of the wiring; {detail}",
            before=before,
            after=after,
            not_checked=True,
        )
    if finite and before < FIT and after >= before:  # fitted already: no fall to show
        rose = after > before + 1e-6 * abs(before)
        return item(
            "loss",
            False,
            f"not checked: the loss starts at {before:.4f}, fitted already (a head from a probe "
            f"on these rows), so no fall can show; {detail}"
            + ("; a rise that undoes the fit (lr too high?)" if rose and after > FIT else ""),
            before=before,
            after=after,
            not_checked=True,
        )
    if not finite:
        detail = "a loss is not finite: " + detail
    elif after > before + 1e-6 * abs(before):
        detail = "the loss went up: " + detail + " (lr too high?)"
    elif after >= before:
        detail = "the loss did not move: " + detail + " (lr too low, or no gradient path?)"
    return item("loss", finite and after < before, detail, before=before, after=after)


def eval_loss(ctx: dict, micro: list[Example], keep: bool = False) -> float:
    """The normalised loss of one microbatch in eval mode (no dropout). With `keep`, the summed
    loss and logits of that forward pass are left in `ctx["trained_forward"]`: the same pass
    the evaluation step's reference makes next on the same microbatch of the same model, so it
    is made once (`reload.reference_outputs`)."""
    lab, model = ctx["lab"], ctx["model"]
    batch = make_batch(micro, ctx["renderer"].pad_id, lab.device)
    model.eval()
    with torch.no_grad(), autocast(lab.device, lab.spec.training.precision):
        summed, logits = loss_and_logits(model, batch)
    if keep:
        ctx["trained_forward"] = (summed, logits)
    return float(summed / sum(loss_weight(e) for e in micro))


def digests(model: torch.nn.Module, only: set[str] | None = None) -> dict[str, str]:
    """Every parameter's bytes (those named in `only`, if given), hashed on the host: exact,
    and light on memory (sha256 of the buffer itself, no copy on a CPU: a fraction of a second
    for 135M float32 weights)."""
    out = {}
    for name, p in model.named_parameters():
        if only is not None and name not in only:
            continue
        raw = p.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy()
        out[name] = hashlib.sha256(raw).hexdigest()
    return out


@contextmanager
def watch_updates(model: torch.nn.Module):
    """While the block runs, record which parameters receive a non-zero gradient and digests
    after each optimizer step: of the tensors that require a gradient at every step (which step
    first moved them), of the others once more when the block ends (a frozen tensor is compared
    before and after, not hashed at every step). The check's only hooks: a per-parameter
    gradient hook, and torch's global optimizer-step hook (the optimizer is made inside
    `train`, which has no hooks of its own), both removed when the block ends."""
    grads: dict[str, bool] = {}
    snapshots = [digests(model)]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}

    def observe(name):
        def hook(p):
            grads[name] = grads.get(name, False) or bool(p.grad.ne(0).any())

        return hook

    handles = [
        p.register_post_accumulate_grad_hook(observe(n))
        for n, p in model.named_parameters()
        if p.requires_grad
    ]
    handles.append(
        register_optimizer_step_post_hook(lambda *_: snapshots.append(digests(model, trainable)))
    )
    try:
        yield grads, snapshots
    finally:
        for h in handles:
            h.remove()
    frozen = set(snapshots[0]) - trainable
    if len(snapshots) > 1 and frozen:
        snapshots[-1] |= digests(model, frozen)
