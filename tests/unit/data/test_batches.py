"""A long map over texts says how far it has come, inside `batches.reporting`."""

from __future__ import annotations

import numpy as np

from tunelab.data import batches


def _lengths(texts: list[str]) -> np.ndarray:
    return np.array([[len(t)] for t in texts], dtype=np.int64)


def test_a_long_map_says_how_far_it_has_come_and_only_where_asked(monkeypatch):
    """A million rows' near duplicates took minutes under one line, `finding duplicates`."""
    monkeypatch.setattr(batches, "REPORT_EVERY_S", 0.0)
    texts = ["ab"] * 5000
    said: list[str] = []
    with batches.reporting(said.append):
        out = batches.map_batches(_lengths, texts, (), 1, np.int64, workers=1)
    assert out[:, 0].tolist() == [2] * 5000
    assert said == ["2,048 of 5,000 texts", "4,096 of 5,000 texts", "5,000 of 5,000 texts"]
    said.clear()
    batches.map_batches(_lengths, texts, (), 1, np.int64, workers=1)  # outside: nothing said
    assert said == []
