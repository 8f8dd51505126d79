"""A finding of `tunelab inspect`: what is wrong with the examples, and whether it blocks.

Blocking findings stop `tunelab run` unless it is given a recorded reason; the others are
warnings. Every module of this package makes its findings here, so one list says which codes
block.
"""

from __future__ import annotations

from collections.abc import Sequence

BLOCKING = frozenset(
    {
        "target_truncated",
        "eos_not_trained",
        "loss_on_prompt",
        "empty_loss_mask",
        "chat_template_missing",
        "size_shortcut",
        "unknown_role",
        "template_rewrites",
        "answer_cannot_fit",
        "target_not_in_format",
        "special_token_in_answer",
    }
)


LISTED = 1000
"""Row ids a finding lists at most (`rows`); its count covers the rest."""


def finding(
    code: str, count: int, example: str | None, message: str, rows: Sequence[str] = ()
) -> dict:
    """`rows`: the ids of the rows it counts, where it counts rows (the first `LISTED`), so that a
    user fixing the data has every one, not only the example."""
    out = {
        "code": code,
        "blocking": code in BLOCKING,
        "count": count,
        "example": example,
        "message": message,
    }
    return out | ({"rows": list(rows[:LISTED])} if rows else {})


def row_finding(code: str, rows: Sequence[str], message: str) -> dict:
    """A finding that counts `rows` (their ids, at least one): its count, the first as its
    example, and the ids listed."""
    return finding(code, len(rows), rows[0], message, rows)
