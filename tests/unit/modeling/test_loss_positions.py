"""Where the loss is, found on the host: the same rows, in the same order, as the boolean
selection on the device that it replaces, and so the same loss and gradients up to the rounding
of the output layer's product over a differently sized set of rows (on the CPU measured, the
same bits; bench/README.md, "The causal loss's selections")."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tunelab.modeling.loss_positions import target_index, target_logits
from tunelab.modeling.model import load_causal
from tunelab.training.step import make_batch, summed_loss

CPU = torch.device("cpu")


def _boolean_selection(labels: torch.Tensor, logits: torch.Tensor):
    """What the loss selected before: the logits at t where the token at t + 1 is a target."""
    targets = labels[:, 1:]
    keep = F.pad(targets != -100, (0, 1), value=False)
    return logits[keep], targets[targets != -100]


def test_the_positions_select_what_a_boolean_mask_selects() -> None:
    labels = torch.tensor(
        [
            [-100, -100, 5, 6, 7, -100],  # three targets, then padding
            [-100, 8, -100, 9, -100, -100],  # two, apart
            [-100, -100, -100, -100, -100, -100],  # none (every target cut away)
        ]
    )
    index = target_index(labels)
    assert index["logits_to_keep"].tolist() == [[1, 2, 3], [0, 2, 0], [0, 0, 0]]
    assert index["targets"].tolist() == [5, 6, 7, 8, 9]
    logits = torch.randn(3, 6, 11)
    kept = logits.gather(1, index["logits_to_keep"][..., None].expand(-1, -1, 11))
    expected_logits, expected_targets = _boolean_selection(labels, logits)
    assert torch.equal(target_logits(kept, index), expected_logits)
    assert torch.equal(index["targets"], expected_targets)


def test_a_batch_without_targets_selects_nothing() -> None:
    index = target_index(torch.full((2, 4), -100))
    assert index["logits_to_keep"].shape == (2, 1)
    assert len(index["target_slots"]) == 0 and len(index["targets"]) == 0
    assert target_logits(torch.randn(2, 1, 7), index).shape == (0, 7)


@pytest.mark.parametrize("packing", [False, True], ids=["padded", "packed"])
def test_the_loss_and_gradients_are_the_boolean_selections(tiny_llama, render_pages, packing):
    rows = [("short", '{"a": 1}'), ("a much longer page " * 5, '{"b": 22}'), ("mid " * 9, "{}")]
    spec, examples = render_pages(rows)
    torch.manual_seed(0)
    model = load_causal(spec, tiny_llama, CPU).train()
    batch = make_batch(examples, 0, CPU, packing=packing)

    def grads(loss_fn):
        torch.manual_seed(1)  # the same dropout masks, if the model has any
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    def boolean():
        keep = F.pad(batch["labels"][:, 1:] != -100, (0, 1), value=False)
        extra = {"position_ids": batch["position_ids"], "use_cache": False} if packing else {}
        mask = {} if packing else {"attention_mask": batch["attention_mask"]}
        out = model(input_ids=batch["input_ids"], logits_to_keep=keep, **mask, **extra)
        logits, targets = out.logits, batch["labels"][:, 1:]
        return F.cross_entropy(logits.float(), targets[targets != -100], reduction="sum")

    new_loss, new = grads(lambda: summed_loss(model, batch))
    old_loss, old = grads(boolean)
    # not asserted to the bit: a BLAS may block a product of more rows differently
    torch.testing.assert_close(new_loss, old_loss, rtol=1e-6, atol=0.0)
    for a, b in zip(new, old, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
