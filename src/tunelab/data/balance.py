"""Class balance: when the largest class outnumbers the smallest by IMBALANCE_RATIO or more,
an average metric hides the small class; `data` and `inspect` both say so."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

IMBALANCE_RATIO = 10.0


def imbalance(labels: Iterable[str]) -> dict | None:
    """The largest and the smallest class when their ratio reaches IMBALANCE_RATIO."""
    counts = Counter(labels)
    if len(counts) < 2:
        return None
    (big, n_big), (small, n_small) = counts.most_common()[0], counts.most_common()[-1]
    if n_big / n_small < IMBALANCE_RATIO:
        return None
    return {"largest": big, "n_largest": n_big, "smallest": small, "n_smallest": n_small}


def describe(found: dict) -> str:
    ratio = found["n_largest"] / found["n_smallest"]
    return (
        f"{found['largest']} has {found['n_largest']} rows, {found['smallest']} only "
        f"{found['n_smallest']} ({ratio:.0f}:1); watch the per-class guardrails"
    )


def imbalance_warnings(train: list) -> list[str]:
    found = imbalance(ex.label for ex in train)
    return [f"class imbalance in train: {describe(found)}"] if found else []
