"""What both peer benchmarks (vs_hf_trainer.py, vs_trl.py) report of one training run's cost,
the same way for each tool: its training seconds, tokens, tokens/s, peak memory and what
training added to it; and one tool's medians against the other's."""

from __future__ import annotations


def cost(result: dict) -> dict:
    """A run's cost columns, from what its subprocess measured (`seconds` of training,
    `tokens` trained, the peak and starting resident memory in MiB)."""
    return {
        "train_s": result["seconds"],
        "tokens": result["tokens"],
        "tok_s": result["tokens"] / result["seconds"],
        "peak_mb": result["peak_mb"],
        "delta_mb": result["peak_mb"] - result["rss_start_mb"],
    }


def cost_ratios(mine: dict, theirs: dict) -> dict:
    """tunelab's tokens/s and memory over the peer's (medians); the memory training added has no
    ratio when the peer's did not grow."""
    return {
        "tok_s": mine["tok_s"] / theirs["tok_s"],
        "peak_mb": mine["peak_mb"] / theirs["peak_mb"],
        "delta_mb": mine["delta_mb"] / theirs["delta_mb"] if theirs["delta_mb"] > 0 else None,
    }
