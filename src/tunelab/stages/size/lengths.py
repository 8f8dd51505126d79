"""The lengths `tunelab size` measures at, read off the rendered train split: the sequence
length (the 95th percentile, or the one given) and, for a causal LM, the target tokens per
sequence (the 95th percentile of what the examples hold, at most that length). The targets
matter because only target positions are projected onto the vocabulary (`summed_loss`): an
extraction prompt of 300 tokens with a 30-token answer makes a tenth of the logits a sequence
whose second half is its answer would."""

from __future__ import annotations

import math

import numpy as np

from tunelab.core.errors import TunelabError


def representative_length(lengths: list[int], percentile: float = 95) -> int:
    """The p95 of the rendered token lengths (at least 2: a causal loss needs a next token)."""
    if not lengths:
        raise TunelabError("no rendered training examples: nothing to size")
    return max(2, math.ceil(float(np.percentile(np.array(lengths), percentile))))


def measured_lengths(train_set: list, seq_len: int | None, max_length: int) -> dict:
    """`seq_len` and `target_tokens` as the size record keeps them (each with its value, where
    it came from, p50 and max; no targets for a classifier, whose examples have none)."""
    lengths = [len(e.input_ids) for e in train_set]
    seq = seq_len or min(representative_length(lengths), max_length)
    out = {
        "seq_len": {
            "value": seq,
            "source": "given" if seq_len else f"p95 of {len(lengths)} rendered train examples",
            "p50": math.ceil(float(np.percentile(lengths, 50))),  # as inspect rounds it
            "p95": representative_length(lengths),  # rounded up, as the default length
            "max": max(lengths),
        },
        "target_tokens": None,
    }
    # the positions a causal example learns (a packed sequence's labels say which)
    counts = [e.loss_tokens for e in train_set if hasattr(e, "loss_tokens")]
    if counts:
        out["target_tokens"] = {
            "value": min(representative_length(counts), seq),
            "source": f"p95 of the {len(counts)} examples' target tokens, at most the length",
            "p50": int(np.percentile(counts, 50)),
            "max": max(counts),
        }
    return out
