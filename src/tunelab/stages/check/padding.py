"""The check's `padding` item: an example's loss is the same alone as padded in a batch beside
a longer one.

Padding is masked from attention and never pooled: a decoder's sequence classifier reads its
last token that is not the config's `pad_token_id`, so a tokenizer whose pad token is not the
config's made that classifier read a padding position, and every prediction depended on the
batch it was in, while every other item passed. The shortest and the longest example of the
train slice go through the model in evaluation mode, each alone and then together (padded
as the run pads its batches); the sums must agree within the precision's rounding.
"""

from __future__ import annotations

import torch

from tunelab.modeling.classifier_inputs import Encoded
from tunelab.modeling.render import Rendered
from tunelab.stages.check.record import item
from tunelab.training.step import autocast, make_batch, summed_losses

TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2}
"""How far the batched loss may be from the separate ones, relative to the loss (at least
1): a batch of another shape takes other kernels, which round otherwise."""


def padding_step(ctx: dict) -> dict:
    lab, model, examples = ctx["lab"], ctx["model"], ctx["examples"]
    padded = [e for e in examples if isinstance(e, Encoded | Rendered)]
    if not padded:  # images, packed documents: `steps_for` leaves the item out for them
        return item("padding", False, "not checked: nothing is padded", not_checked=True)
    short = min(padded, key=lambda e: len(e.input_ids))
    long = max(padded, key=lambda e: len(e.input_ids))
    if len(short.input_ids) == len(long.input_ids):
        return item(
            "padding",
            False,
            f"not checked: every example of the slice is {len(short.input_ids)} tokens long, "
            "so none is padded",
            not_checked=True,
        )
    pad_id, device = ctx["renderer"].pad_id, lab.device
    precision = lab.spec.training.precision
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), autocast(device, precision):
            alone = sum(_loss(model, [e], pad_id, device) for e in (short, long))
            together = _loss(model, [short, long], pad_id, device)
    finally:
        model.train(was_training)
    gap = abs(alone - together)
    allowed = TOLERANCE.get(precision, TOLERANCE["bf16"]) * max(1.0, abs(alone))
    pads = len(long.input_ids) - len(short.input_ids)
    detail = (
        f"the shortest example ({len(short.input_ids)} tokens) and the longest "
        f"({len(long.input_ids)}) give a loss of {alone:.6f} apart and {together:.6f} in one "
        f"batch, the shorter padded with {pads} × token {pad_id}"
    )
    if gap > allowed:
        detail += ": the padding reaches the model, so every prediction depends on its batch" + (
            _cause(model, pad_id)
        )
    return item("padding", gap <= allowed, detail, gap=gap, allowed=allowed)


def _loss(model, examples: list, pad_id: int, device: torch.device) -> float:
    return float(summed_losses(model, make_batch(examples, pad_id, device))[0])


def _cause(model, pad_id: int) -> str:
    """What is known to let padding in: a classifier that pools by another pad id."""
    config_pad = getattr(model.config, "pad_token_id", None)
    if config_pad is not None and config_pad != pad_id:
        return (
            f" (batches are padded with the tokenizer's pad id {pad_id}, but the model's "
            f"config says pad_token_id {config_pad}: a decoder's classifier pools the last token "
            "that is not that id, a padding position here)"
        )
    return " (is the attention mask passed on, and are the positions of padded rows right?)"
