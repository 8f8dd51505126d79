"""tunelab: fine-tune pretrained transformers like a careful scientist."""

__version__ = "0.1.0"


def load_bundle(bundle, base=None, device: str = "cpu"):
    """(model, tokenizer, info) of an exported bundle, on the exact base it was trained on:
    a base whose weights differ from the recorded ones is refused, naming both. See
    `tunelab.stages.export.load`."""
    from tunelab.stages.export.load import load_bundle as load

    return load(bundle, base, device)


def open_image(path):
    """An image as an image lab's model was given it, before its processor: the first frame,
    upright as its EXIF orientation says, a 16-bit grey image scaled to 8 bits, RGB with
    transparency flattened onto white. A processor given the file's own picture refuses RGBA
    and 16-bit images, and turns no photo upright. See `tunelab.modeling.pixels.open_rgb`."""
    from tunelab.modeling.pixels import open_rgb

    return open_rgb(path)
