"""What a run's training losses say went wrong: a loss that ended higher than it began (the run
diverged rather than learned), or a head started from a probe whose first loss is already worse
than knowing the labels' frequencies (`start_lost`: the probe's start did not survive training
mode).

The share of steps compared at each end (`SHARE`, at least one step) smooths a step's noise. A
run can still read as a weak model in its metrics alone (a probe's head blown up by an extreme
weight, a learning rate too large), so the record keeps the two means and the run's view and
`compare` say it, with what to try."""

from __future__ import annotations

import math

from tunelab.core.errors import TunelabError

SHARE = 0.1
"""The first and the last tenth of the logged steps are compared."""
LEAST_STEPS = 4
"""Fewer logged steps than this say nothing either way (the check's two steps, say)."""
RISE = 0.1
"""How much higher (a share of the first steps' mean) the last steps' mean must be: a loss
that sits at chance (1.098 for three classes) moves by a percent either way without diverging;
one that diverges doubles (154 to 314, a probe head blown up)."""
LEAST_RISE = 0.1
"""And by at least this much (nats): a loss near 0 moves by its own size without diverging (an
image LoRA from a probe's head fitted to its train split went 0.028 -> 0.047 and scored as its
probe did)."""


def diverged(history: list[dict]) -> dict | None:
    """The first and last steps' mean training loss and the warning, when the last is higher
    by more than `RISE` of the first (and `LEAST_RISE`); else None."""
    losses = [e["loss"] for e in history if isinstance(e.get("loss"), int | float)]
    if len(losses) < LEAST_STEPS:
        return None
    k = max(1, int(len(losses) * SHARE))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    if not (last > first * (1 + RISE) and last - first > LEAST_RISE):
        return None
    return {
        "first": round(first, 4),
        "last": round(last, 4),
        "steps_each": k,
        "message": (
            f"the training loss ended higher than it began ({first:.4f} over the first {k} "
            f"step(s), {last:.4f} over the last {k}): the run diverged rather than learned; try "
            "a smaller training.lr, training.max_grad_norm, or, for a head fitted from a probe, "
            "method.head_init: new"
        ),
    }


class NonFiniteLoss(TunelabError):
    """The training loss stopped being a number: the weights are past saving, so the run
    stops at that step (recorded as failed) rather than train on and hand over NaN weights."""

    resumable = False
    """Resuming would reach the same step with the same settings (`ledger.recording`)."""


def non_finite(step: int, loss: float, history: list[dict], lr: float, clip) -> NonFiniteLoss:
    """The error for a training loss that is NaN or infinite at `step`, with the loss before
    it (`history`: the steps so far, this one last) and what to try."""
    before = [e["loss"] for e in history[:-1] if math.isfinite(e["loss"])]
    came = f" (after {before[-1]:.4g} at step {step - 1})" if before else ""
    return NonFiniteLoss(
        f"the training loss became {loss} at step {step}{came}: the weights are no longer "
        "numbers, so the run stops here and is recorded as failed (training on would hand over "
        f"a model of NaN); try a smaller training.lr (now {lr:g}), training.max_grad_norm "
        f"(now {clip}), or training.precision: fp32"
    )


def training_changes(model) -> str:
    """What training mode changes in `model`'s forward, in words: dropout (a module with p > 0)
    and batch normalisation on its batches' statistics (a norm whose weights train:
    `step.train_mode` keeps frozen ones on their running statistics)."""
    import torch

    from tunelab.training.step import is_batch_norm, trains

    parts = []
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        parts.append("dropout")
    if any(is_batch_norm(m) and trains(m) for m in model.modules()):
        parts.append("batch normalisation on each batch's own statistics")
    return (
        " and ".join(parts) or "which changes nothing here: no dropout, no batch norm that trains"
    )


def start_lost(
    history: list[dict],
    head_init: dict | None,
    seen: str = "the first training step's loss",
    changes: str = "dropout",
) -> dict | None:
    """For a head started from a linear probe (LP-FT, `method.head_init: probe`): the warning
    when the first logged training loss is above `prior_loss`, a head's that knows only how
    often each label occurs; else None. `seen` names the loss in the message, `changes` what
    training mode changes in the model (`training_changes`).

    The probe is fitted and loaded in evaluation mode; training runs with dropout on (and a
    batch norm whose weights train on each batch's statistics), and the probe's scaler, folded
    into the head, divides each feature by its spread on train. Where the features move more
    than that spread (the tests' tiny BERT under dropout: the probe's loss 0.02, the first
    step's 303; the image demo's EfficientNet fully fine-tuned, its batch norms on batches of
    16: 14.9), the head's start is gone before the first update and the run is LP-FT in name
    only. The classification demo's MiniLM keeps it (its first step 0.0094)."""
    losses = [e["loss"] for e in history if isinstance(e.get("loss"), int | float)]
    prior = (head_init or {}).get("prior_loss")
    if not losses or prior is None or not losses[0] > prior:
        return None
    first, probe = losses[0], head_init["train_loss"]
    return {
        "first": round(first, 4),
        "probe": probe,
        "prior": prior,
        "message": (
            f"the head started from a linear probe (loss {probe:.4f} on train, in evaluation "
            f"mode), but {seen} was {first:.4f}, above the {prior:.4f} "
            "of a head that knows only how often each label occurs: the probe's start does not "
            f"survive training mode ({changes}), so LP-FT is here in name only and the run's "
            "score says its start broke, not what its change is worth (the probe's scaler "
            "magnifies any change in the features it reads); a run with method.head_init: new "
            "says what the probe's head is worth"
        ),
    }
