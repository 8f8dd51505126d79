"""What a pretrain lab's evaluation windows see: whether validation is scored at positions
the model never trained at (`inspect` and `run` warn; `compare` repeats it beside a verdict)."""

from __future__ import annotations

from tunelab.core.lab import Lab
from tunelab.modeling.render import Renderer
from tunelab.stages.inspect.findings import finding


def scored_past_training(lab: Lab, version: str, renderer: Renderer) -> list[dict]:
    """Task pretrain on a model built from scratch, trained on shorter sequences
    (`task.sequence_length`) than the windows validation is scored in (`model.max_length`):
    every position past the trained length is one the model never trained at, so bits per
    byte there measures how it extrapolates as well, and position variants differ most there
    (a NoPE layer "won" on 56 of 65 documents by degrading less past position 128, and lost
    scored at the trained length). A base pretrained at the window's length is not warned."""
    trained, window = renderer.pack_length, renderer.max_length
    spec = lab.spec
    if spec.task.type != "pretrain" or spec.model.init != "scratch" or trained >= window:
        return []
    from tunelab.modeling.packing import segments

    validation = lab.store.read_split(version, "validation")
    longer = [i for i, seg in segments(renderer.tokenizer, validation) if len(seg) - 1 > trained]
    if not longer:
        return []
    message = (
        f"the model trains on sequences of {trained} tokens (task.sequence_length) and "
        f"validation is scored in windows of {window} (model.max_length): {len(longer)} of "
        f"{len(validation)} validation documents are scored at positions it never trained at, "
        "so bits per byte also measures how it extrapolates past its training length (position "
        f"variants differ most there); set model.max_length={trained} to score at the trained "
        f"length, or task.sequence_length={window} to train at the window"
    )
    return [finding("scored_past_trained_length", len(longer), longer[0], message)]
