"""A run whose training loss ended higher than it began: it diverged rather than learned.

The share of steps compared at each end (`SHARE`, at least one step) smooths a step's noise. A
run can still read as a weak model in its metrics alone (a probe's head blown up by an extreme
weight, a learning rate too large), so the record keeps the two means and the run's view and
`compare` say it, with what to try."""

from __future__ import annotations

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
