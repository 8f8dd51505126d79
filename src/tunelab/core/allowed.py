"""The leave a run was given to train past blocking findings (`tunelab run --allow-warnings
"why"`): which findings, and the reason, as compare, the model card and `runs` say it."""

from __future__ import annotations


def trained_past(record: dict) -> dict | None:
    """The blocking findings the run trained past and the reason given (`--allow-warnings`),
    or None when it was given no such leave."""
    why = record.get("warnings_allowed")
    if not why:
        return None
    found = [
        {"code": f["code"], "count": f.get("count"), "example": f.get("example")}
        for f in record.get("findings") or []
        if f.get("blocking")
    ]
    return {"why": why, "findings": found}


def past_words(run_id: str, past: dict) -> str:
    """`r003 trained past blocking findings (target_not_in_format: 1 row, e.g. bad_format):
    "audit"`, as compare and the card say it."""
    named = ", ".join(
        f"{f['code']}: {f['count']} row(s)" + (f", e.g. {f['example']}" if f.get("example") else "")
        for f in past["findings"]
    )
    return (
        f"{run_id} trained past blocking findings ({named or 'none left when it ran'}) with "
        f"--allow-warnings: {past['why']!r}"
    )
