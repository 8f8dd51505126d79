"""tunelab: fine-tune pretrained transformers like a careful scientist."""

__version__ = "0.1.0"
