"""Bits per byte: computed by hand on a fixed text it equals tunelab's; several documents sum
their nats and bytes before dividing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tunelab.core.scratch import Arch, Bpe
from tunelab.modeling.bpe import train_bpe
from tunelab.modeling.scratch import build_scratch, scratch_config
from tunelab.tasks import pretrain
from tunelab.training.evaluate_lm import score_documents, windows

TEXT = "Le café coûte 3 €, the tea costs less."  # multi-byte characters on purpose


@pytest.fixture(scope="module")
def setup():
    tokenizer = train_bpe([TEXT, "the tea", "coffee costs more than tea"] * 5, Bpe(vocab_size=290))
    arch = Arch(hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
    special = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 0}
    config = scratch_config(arch, len(tokenizer), 64, special)
    return tokenizer, build_scratch(config, 0, torch.float32)


def test_bits_per_byte_by_hand_equals_tunelab(setup):
    tokenizer, model = setup
    ids = [tokenizer.eos_token_id] + tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits, -1)
    nats = -sum(float(logp[t, ids[t + 1]]) for t in range(len(ids) - 1))
    n_bytes = len(TEXT.encode("utf-8"))
    assert n_bytes > len(TEXT)  # é, û and € take more than one byte each
    by_hand = nats / (math.log(2) * n_bytes)

    row = {"id": "t", "text": TEXT, "source": "prose"}
    predictions, metrics = score_documents(model, tokenizer, [row], 64, 8, torch.device("cpu"), 1)
    assert predictions[0]["bytes"] == n_bytes and predictions[0]["tokens"] == len(ids) - 1
    assert metrics["bits_per_byte"] == pytest.approx(by_hand, rel=1e-5)
    assert metrics["loss"] == pytest.approx(nats / (len(ids) - 1), rel=1e-5)
    assert metrics["perplexity"] == pytest.approx(math.exp(nats / (len(ids) - 1)), rel=1e-5)
    assert metrics["per_source"]["prose"]["bits_per_byte"] == pytest.approx(by_hand, rel=1e-5)


def test_a_long_document_is_scored_in_windows_that_cover_every_token(setup):
    tokenizer, model = setup
    segment = list(range(11))
    parts = windows(segment, 4)
    assert [t for _, t in parts] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    assert all(len(i) == len(t) for i, t in parts)
    row = {"id": "t", "text": TEXT * 3, "source": "prose"}
    (short,), _ = score_documents(model, tokenizer, [row], 8, 4, torch.device("cpu"), 1)
    (whole,), _ = score_documents(model, tokenizer, [row], 64, 4, torch.device("cpu"), 1)
    assert short["tokens"] == whole["tokens"] and short["nll"] != whole["nll"]


def test_several_documents_sum_before_they_divide():
    preds = [
        {"id": "a", "source": "x", "nll": 10.0, "bytes": 10, "tokens": 5},
        {"id": "b", "source": "y", "nll": 30.0, "bytes": 40, "tokens": 10},
    ]
    m = pretrain.metrics(preds)
    assert m["bits_per_byte"] == pytest.approx(40 / (math.log(2) * 50))  # not a mean of ratios
    assert m["loss"] == pytest.approx(40 / 15)
    assert set(m["per_source"]) == {"x", "y"} and m["n"] == 2


def test_cross_entropy_matches_the_log_softmax_sum_used_above():
    logits = torch.randn(1, 5, 7)
    targets = torch.tensor([[1, 2, 3, 4, -100]])
    summed = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="none")
    logp = torch.log_softmax(logits, -1)[0]
    assert float(summed.sum()) == pytest.approx(
        -sum(float(logp[t, targets[0, t]]) for t in range(4))
    )
