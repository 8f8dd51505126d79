"""What a sentence-embedding base was trained to be read as, against what a classifier reads.

A base saved by `sentence-transformers` (all-MiniLM-L6-v2, the demos' encoder) says in its
`modules.json` and `1_Pooling/config.json` how its embeddings are made: for most, the mean of
the last hidden states. A sequence classifier built on it (`AutoModelForSequenceClassification`)
reads the `[CLS]` token through the pooler instead, features the contrastive training did not
shape. On a 300-row BBC News lab a linear probe scored 95.5% on the mean-pooled embeddings and
81.8% on the classifier head's own input, and LP-FT runs stayed at the latter
(EXPERIMENTS.md, 2026-12-05, second session). `pooling_note` says so once per run, so a
fine-tune that ends below the probe baseline is read for what it is.
"""

from __future__ import annotations

import json
from pathlib import Path

MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weighted_mean",
    "pooling_mode_lasttoken": "last_token",
}


def trained_pooling(folder: Path) -> list[str] | None:
    """The pooling modes a sentence-transformers folder declares (`modules.json`'s Pooling
    module), or None for any other folder or one that cannot be read."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        pooling = next(m for m in modules if str(m.get("type", "")).endswith(".Pooling"))
        config = json.loads((folder / pooling["path"] / "config.json").read_text("utf-8"))
    except (OSError, ValueError, StopIteration, TypeError, KeyError, AttributeError):
        return None
    return [name for key, name in MODES.items() if config.get(key)] or None


def pooling_note(folder: Path) -> str | None:
    """A note when a classifier on `folder` reads features the base was not trained to give."""
    modes = trained_pooling(folder)
    if modes is None or "cls" in modes:
        return None
    return (
        f"this base was trained to be read {' + '.join(modes)}-pooled ({folder.name}/modules.json, "
        "1_Pooling); a sequence classifier reads its [CLS] token through the pooler, features "
        "its embedding training did not shape: a fine-tune may start, and end, below the probe "
        "baseline (which reads the mean-pooled embeddings)"
    )
