"""tunelab: fine-tune pretrained transformers like a careful scientist."""

__version__ = "0.1.0"


def load_bundle(bundle, base=None, device: str = "cpu"):
    """(model, tokenizer, info) of an exported bundle, on the exact base it was trained on:
    a base whose weights differ from the recorded ones is refused, naming both. See
    `tunelab.stages.export.load`."""
    from tunelab.stages.export.load import load_bundle as load

    return load(bundle, base, device)
