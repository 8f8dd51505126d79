"""Gradient accumulation must give the gradient of one large batch.

With microbatches holding different numbers of target tokens, train.py's normalisation (each
microbatch's summed loss over the target tokens of the whole accumulated batch) matches one
batch of k x microbatch; a per-microbatch mean divided by k does not: the bug of
transformers #34263, LLaMA-Factory #7443 and axolotl #1100.
"""

from __future__ import annotations

from copy import deepcopy

import pytest
import torch

from tunelab.core.spec import ModelSpec, TrainingSpec
from tunelab.modeling.model import load_causal, load_tokenizer
from tunelab.modeling.render import make_template, render_example
from tunelab.training.loop import train
from tunelab.training.step import loss_weight, make_batch, summed_loss

CPU = torch.device("cpu")
TARGETS = [
    "1",
    "ls",
    '{"name": "printf", "section": "3", "summary": "formatted output conversion"}',
    '{"name": "ls", "section": "1", "summary": "list directory contents and the files in it"}',
]


@pytest.fixture(scope="module")
def model_and_examples(tiny_llama):
    spec = ModelSpec(path=str(tiny_llama), max_length=192, template="chat")
    tokenizer = load_tokenizer(spec, tiny_llama)
    template = make_template(tokenizer, "chat", "Extract the fields as JSON.")
    examples = [
        render_example(tokenizer, template, {"id": str(i), "text": f"page {i} text"}, t, 192)
        for i, t in enumerate(TARGETS)
    ]
    torch.manual_seed(0)
    model = load_causal(spec, tiny_llama, CPU).eval()  # no dropout: one function, two ways
    return model, examples


def gradients(model, parts, denominators):
    model.zero_grad(set_to_none=True)
    for part, denominator in zip(parts, denominators, strict=True):
        (summed_loss(model, make_batch(part, 0, CPU)) / denominator).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def test_targets_are_clearly_unequal(model_and_examples):
    _, examples = model_and_examples
    short, long = examples[:2], examples[2:]
    assert sum(map(loss_weight, long)) > 4 * sum(map(loss_weight, short))


def test_accumulation_with_train_normalisation_equals_one_batch(model_and_examples):
    model, examples = model_and_examples
    total = sum(loss_weight(e) for e in examples)
    one = gradients(model, [examples], [total])
    accumulated = gradients(model, [examples[:2], examples[2:]], [total, total])
    for a, b in zip(accumulated, one, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_per_microbatch_mean_differs_from_one_batch(model_and_examples):
    model, examples = model_and_examples
    total = sum(loss_weight(e) for e in examples)
    one = gradients(model, [examples], [total])
    micro = [examples[:2], examples[2:]]
    mean = gradients(model, micro, [2 * sum(loss_weight(e) for e in m) for m in micro])
    diff = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(mean, one, strict=True)))
    norm = torch.sqrt(sum((b**2).sum() for b in one))
    assert diff / norm > 1e-2  # far beyond float noise: the short targets weigh too much
    with pytest.raises(AssertionError):
        for a, b in zip(mean, one, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def _trained(model, examples, microbatch: int) -> dict[str, torch.Tensor]:
    """`train()` itself: 3 steps of the whole set as one global batch, in `microbatch`es."""
    copy = deepcopy(model)
    cfg = TrainingSpec(
        lr=1e-3,
        global_batch=len(examples),
        microbatch=microbatch,
        budget={"steps": 3},
        schedule="constant",
        warmup_steps=0,
        max_grad_norm=None,
    )
    train(copy, examples, cfg, CPU, pad_id=0)
    return {n: p.detach().clone() for n, p in copy.named_parameters()}


def test_train_with_unequal_microbatches_ends_where_one_batch_does(model_and_examples):
    model, examples = model_and_examples
    one = _trained(model, examples, microbatch=4)
    accumulated = _trained(model, examples, microbatch=1)  # 4 microbatches, 1 to 30+ tokens
    moved = max(float((one[n] - p.detach()).abs().max()) for n, p in model.named_parameters())
    assert moved > 1e-3  # the steps did change the weights
    for name, weight in one.items():
        torch.testing.assert_close(accumulated[name], weight, rtol=1e-4, atol=1e-5, msg=name)


GOLDEN_LLAMA_LOSSES = [5.97027, 5.903172, 5.850626, 5.811183, 5.785096]
"""Per-step losses of the tiny causal LM (CPU, fp32, seed 0), 2 microbatches per step."""


def test_golden_losses_of_a_tiny_causal_lm(model_and_examples):
    model, examples = model_and_examples
    cfg = TrainingSpec(lr=1e-3, global_batch=4, microbatch=2, budget={"steps": 5}, seed=0)
    out = train(deepcopy(model), examples, cfg, CPU, pad_id=0)
    assert [h["loss"] for h in out["history"]] == pytest.approx(GOLDEN_LLAMA_LOSSES, rel=1e-4)
