"""Scored documents (task pretrain) in compare: the paired bootstrap recomputes the ratio
metric on resampled documents, reported as a reduction (less is better), per source too."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunelab.stages.compare.pairs import make_arms, right
from tunelab.tasks import get_task


def docs(nll: list[float], source: list[str]) -> dict[str, dict]:
    return {
        f"d{i}": {"id": f"d{i}", "source": s, "nll": n, "bytes": 20, "tokens": 8}
        for i, (n, s) in enumerate(zip(nll, source, strict=True))
    }


def test_the_paired_interval_is_a_reduction_of_the_ratio():
    sources = ["x", "y"] * 10
    ref = docs([14.0 + (i % 3) for i in range(20)], sources)
    run = docs([13.0 + (i % 3) for i in range(20)], sources)  # 1 nat less on every document
    pair = make_arms([ref], [run], [], ("ref", "run"))
    boot = pair.interval("bits_per_byte")
    reduction = 20 / (math.log(2) * 20 * 20)  # 20 nats over 400 bytes
    assert boot["delta"] == pytest.approx(reduction) and boot["low"] > 0
    assert pair.interval("bits_per_byte", "x")["delta"] == pytest.approx(reduction)
    a, b = right(pair, "bits_per_byte")
    assert np.all(b > a)  # every document better: each one is a flip the run fixed
    assert get_task("pretrain").lower_is_better >= {"bits_per_byte", "loss", "perplexity"}


def test_unknown_source_in_a_guardrail_is_named():
    pair = make_arms([docs([1.0], ["x"])], [docs([1.0], ["x"])], [], ("a", "b"))
    with pytest.raises(Exception, match="source 'code'"):
        pair.interval("bits_per_byte", "code")
