"""Rows' content digests computed together, on worker processes, equal each row's own."""

from __future__ import annotations

from tunelab.data import batches
from tunelab.data.example import Example, compute_digests


def rows() -> list[Example]:
    texts = ["Hello  World", "hello world", "Ünïcode\u00a0text", "?!", "a b c"] * 7
    return [Example(f"f:{i}", t, "a", "f", i) for i, t in enumerate(texts)]


def test_digests_computed_together_on_workers_are_each_rows_own(monkeypatch) -> None:
    one_by_one = [ex.content_digest for ex in rows()]
    assert one_by_one[0] == one_by_one[1] != one_by_one[2]  # same once normalised
    monkeypatch.setattr(batches, "BATCH_TEXTS", 4)
    monkeypatch.setattr(batches, "PARALLEL_FROM", 1)
    for workers in (1, 2):
        together = rows()
        compute_digests(together, workers)
        assert [ex._digest for ex in together] == one_by_one
