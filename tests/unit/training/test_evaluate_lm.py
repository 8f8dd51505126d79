"""document_nll: a document's summed NLL, as float64 arithmetic gives it."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from tunelab.training.evaluate_lm import document_nll

VOCAB = 49_152  # SmolLM2's: the size where the layout of the log-softmax showed


class FixedLogits(torch.nn.Module):
    """A stand-in model whose logits for token t at any position are a fixed row of a table."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.randn(64, VOCAB, generator=torch.Generator().manual_seed(0)) * 4

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.table[input_ids])


def test_summed_nll_is_as_accurate_as_one_float32_log_softmax_allows():
    model = FixedLogits()
    g = torch.Generator().manual_seed(1)
    segs = [torch.randint(0, 64, (n,), generator=g).tolist() for n in (97, 60, 12)]
    got = document_nll(model, segs, sequence_length=128, batch_size=3, device="cpu", pad_id=0)
    for seg, nll in zip(segs, got, strict=True):
        logits = model.table[torch.tensor(seg[:-1])].double()
        exact = float(F.cross_entropy(logits, torch.tensor(seg[1:]), reduction="sum"))
        # each token's float32 log-softmax is within ~1e-6 nats; cross_entropy over the
        # (batch, vocabulary, positions) layout was off by ~1e-4 per token, biased one way
        assert abs(nll - exact) < 2e-5 * len(seg), (nll, exact)
