"""What the data step says of a lab's sources (a mixture, or pretraining on several): the
documents of each in each split, a source missing from a split or with too few validation
documents for a score of its own, and duplicate pairs across sources."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from tunelab.core.store import SPLITS
from tunelab.data.split import Splits


def across_sources(pairs: list[dict]) -> dict[str, int]:
    """Duplicate pairs whose two rows come from different sources, by `a <-> b` whichever side
    each row is on (it counted `a <-> b` and `b <-> a` apart, which read as two things): a
    mixture's weights mean less where one source holds copies of another's rows."""
    found = Counter(
        " <-> ".join(sorted((p["a"]["source"], p["b"]["source"])))
        for p in pairs
        if "source" in p["a"]
    )
    return dict(sorted(found.items()))


def sources_missing(splits: Splits, more_rows: Callable[[str], str]) -> list[str]:
    """Task pretrain scores each source apart (an `every_source` guardrail, the mixture's
    per-source bits per byte): a source with train documents and none in validation or test
    has no score there. `more_rows(split)` says how to give a split rows."""
    counts = source_counts(splits)
    out = []
    for split in ("validation", "test"):
        missing = [s for s in counts["train"] if s and not counts[split].get(s)]
        if missing:
            out.append(
                f"source(s) {missing} have train documents but none in the {split} split: their "
                f"{split} scores cannot be measured (an every_source guardrail leaves them not "
                f"checked); {more_rows(split)}"
            )
    few = {
        s: n for s, n in counts["validation"].items() if s and counts["train"].get(s) and n < FEW
    }
    if few:
        shown = ", ".join(f"{s} {n}" for s, n in sorted(few.items()))
        out.append(
            f"source(s) with fewer than {FEW} validation documents ({shown}): a per-source "
            "score rests on that few, so an every_source guardrail on them can hardly tell a "
            f"change from chance; {more_rows('validation')}"
        )
    return out


FEW = 20
"""Validation documents below which a source's own score is warned of as resting on too few."""


def source_counts(splits: Splits) -> dict[str, dict[str, int]]:
    """Documents per source name in each split."""
    return {
        split: dict(sorted(Counter(ex.source or "" for ex in splits.get(split, [])).items()))
        for split in SPLITS
    }
