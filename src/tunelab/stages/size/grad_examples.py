"""The real examples `tunelab size`'s gradient check gives its probe: k × microbatch rows of
the rendered train split, as the probe's JSON arguments carry them."""

from __future__ import annotations

from tunelab.core.errors import TunelabError
from tunelab.modeling.packing import Packed
from tunelab.training.step import loss_weight


def grad_examples(train_set: list, microbatch: int, k: int) -> list[dict]:
    """k x microbatch real examples, ordered by loss weight so the microbatches carry clearly
    unequal numbers of target tokens (the case a per-microbatch mean gets wrong)."""
    pool = sorted(train_set[: max(4 * k * microbatch, k * microbatch)], key=loss_weight)
    step = max(1, len(pool) // (k * microbatch))
    picked = sorted(pool[::step][: k * microbatch], key=loss_weight)
    if len(picked) < k * microbatch:
        raise TunelabError(f"the gradient check needs {k * microbatch} training examples")
    return [_as_args(e) for e in picked]


def _as_args(example) -> dict:
    """A rendered example as the probe's arguments carry it (JSON)."""
    if isinstance(example, Packed):
        fields = ("input_ids", "labels", "position_ids", "real")
    else:
        fields = (
            ("input_ids", "loss_mask") if hasattr(example, "loss_mask") else ("input_ids", "label")
        )
    return {f: getattr(example, f) for f in fields}
