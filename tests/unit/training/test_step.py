"""The causal loss projects only the positions with a target onto the vocabulary: the same loss
and gradients as the whole sequence's logits, on a right-padded batch with prompts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model

from tunelab.modeling.model import load_causal
from tunelab.training.step import keeps_logits, make_batch, summed_loss

CPU = torch.device("cpu")


def _whole_sequence_loss(model, batch):
    """The loss from every position's logits, as it was computed before."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    shifted = logits[:, :-1].reshape(-1, logits.size(-1))
    targets = batch["labels"][:, 1:].reshape(-1)
    return F.cross_entropy(shifted, targets, ignore_index=-100, reduction="sum")


@pytest.mark.parametrize("lora", [False, True], ids=["plain", "peft"])
def test_kept_logits_give_the_whole_sequences_loss_and_gradients(tiny_llama, render_pages, lora):
    rows = [("a short page", '{"name": "ls"}'), ("a much longer page " * 6, '{"name": "cp1"}')]
    spec, examples = render_pages(rows)
    torch.manual_seed(0)
    model = load_causal(spec, tiny_llama, CPU).eval()
    if lora:
        config = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = get_peft_model(model, config)
    assert keeps_logits(model)
    batch = make_batch(examples, 0, CPU)
    assert (batch["labels"] == -100).sum() > batch["labels"].numel() / 2  # prompts and padding

    def grads(loss_fn):
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model, batch)
        loss.backward()
        named = model.named_parameters()
        return loss.detach(), {n: p.grad.clone() for n, p in named if p.grad is not None}

    kept_loss, kept = grads(summed_loss)
    whole_loss, whole = grads(_whole_sequence_loss)
    assert float(kept_loss) == pytest.approx(float(whole_loss), rel=1e-6)
    assert kept.keys() == whole.keys() and kept
    for name, g in whole.items():
        torch.testing.assert_close(kept[name], g, rtol=1e-4, atol=1e-6, msg=name)


def test_a_model_without_the_mask_keeps_every_logit():
    assert not keeps_logits(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_packed_microbatch_gives_the_padded_ones_loss_and_gradients(
    tiny_llama, render_pages, attention
):
    """`training.packing`: the examples end to end in one row, positions restarting, so no
    token sees another example; the same summed loss and gradients as right-padded rows."""
    rows = [("short", '{"a": 1}'), ("a much longer page " * 5, '{"b": 2}'), ("mid " * 9, "{}")]
    spec, examples = render_pages(rows, attention=attention)
    torch.manual_seed(0)
    model = load_causal(spec, tiny_llama, CPU).eval()
    assert model.config._attn_implementation == attention
    padded, packed = make_batch(examples, 0, CPU), make_batch(examples, 0, CPU, packing=True)
    assert packed["input_ids"].shape == (1, sum(len(e.input_ids) for e in examples))
    assert int(packed["attention_mask"].sum()) == int(padded["attention_mask"].sum())
    assert int((packed["labels"] != -100).sum()) == int((padded["labels"] != -100).sum())

    def grads(batch):
        model.zero_grad(set_to_none=True)
        loss = summed_loss(model, batch)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    packed_loss, packed_grads = grads(packed)
    padded_loss, padded_grads = grads(padded)
    assert float(packed_loss) == pytest.approx(float(padded_loss), rel=1e-5)
    for name, g in padded_grads.items():
        torch.testing.assert_close(packed_grads[name], g, rtol=1e-4, atol=1e-5, msg=name)

    # the mask is what keeps examples apart: without restarts the loss differs
    leaky = dict(packed)
    del leaky["position_ids"]
    with torch.no_grad():
        leaked = float(summed_loss(model, leaky))
    assert leaked != pytest.approx(float(padded_loss), rel=1e-4), (leaked, float(padded_loss))
