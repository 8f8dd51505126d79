"""The model card's words: what a guardrail that regressed says of its interval."""

from __future__ import annotations


def test_a_regressed_line_says_whether_its_interval_counts_the_seeds():
    from tunelab.stages.export.card import _regressed_line

    r = {"metric": "bits_per_byte", "on": "news.jsonl", "scope": "overall", "status": "broken"}
    r |= {"delta": -0.0653, "low": -0.0723, "high": -0.0586}
    assert _regressed_line(r | {"seeds": False}) == (
        "bits_per_byte on news.jsonl rose by 0.0653 against the reference (0.0586 to 0.0723, "
        "one seed): broken."
    )
    assert "(0.0586 to 0.0723, over the seeds): broken." in _regressed_line(r | {"seeds": True})
    assert "(0.0586 to 0.0723): broken." in _regressed_line(r)  # a bundle exported before
