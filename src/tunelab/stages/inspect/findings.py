"""A finding of `tunelab inspect`: what is wrong with the examples, and whether it blocks.

Blocking findings stop `tunelab run` unless it is given a recorded reason; the others are
warnings. Every module of this package makes its findings here, so one list says which codes
block.
"""

from __future__ import annotations

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


def finding(code: str, count: int, example: str | None, message: str) -> dict:
    return {
        "code": code,
        "blocking": code in BLOCKING,
        "count": count,
        "example": example,
        "message": message,
    }
