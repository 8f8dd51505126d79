"""One image: decoded in full with Pillow, checked, and hashed three ways.

`decode_image` opens an image's bytes and loads every pixel (a header that parses says little:
a file cut short fails only when its pixels are read). Pillow's decompression-bomb limit,
`Image.MAX_IMAGE_PIXELS`, is set to `data.images.max_pixels` while it decodes (and put back
after), and its warning (over the limit) is an error like its error (over twice the limit): an
image over the limit is refused, never decoded. A problem is a `BadImage` whose kind says what
the quarantine says:

- image_empty: no bytes at all, or a picture of width or height 0;
- image_unreadable: not an image Pillow can identify, or pixels that cannot be decoded;
- image_truncated: a known format cut short (its header, or its pixel data);
- image_too_large: more pixels than `data.images.max_pixels`;
- image_unsupported: an image, but not PNG, JPEG, WebP or GIF (BMP, TIFF, ICO...).

An accepted image gives an `ImageInfo`: its size, Pillow mode and format, and three hashes:
`bytes_sha256` (the file: what the version id covers and the name it is stored under),
`pixels_sha256` (the decoded picture in RGBA with its size: the same picture re-encoded
losslessly hashes the same) and `dhash` (a 64-bit difference hash for near-duplicates:
`near_images`). A GIF or an animated WebP is its first frame; every image is the picture it
shows (`picture`: upright as its EXIF orientation says, 16-bit grey scaled to 8 bits), whose
size the row records.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

FORMATS = {"PNG": "png", "JPEG": "jpg", "MPO": "jpg", "WEBP": "webp", "GIF": "gif"}
"""The formats accepted (Pillow's names) and the extension each is stored under. MPO is the
JPEG that many cameras write (a JPEG with a second picture after it)."""
EXIF_ORIENTATION = 0x0112
"""The EXIF tag that says how a camera held the picture (1: upright as stored)."""
SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
"""Pillow's modes for a 16-bit grey PNG (`I` in older releases): scaled to 8 bits, not clipped."""
DHASH_SIZE = 8
"""The difference hash compares DHASH_SIZE + 1 columns by DHASH_SIZE rows: 64 bits."""
_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": "PNG",
    b"\xff\xd8\xff": "JPEG",
    b"GIF87a": "GIF",
    b"GIF89a": "GIF",
}


@dataclass(frozen=True)
class ImageInfo:
    """An accepted image: what a data version's row says of it (`Example.to_row`)."""

    file: str
    """Where it was read from: the image file as shown (relative to the lab), or the row of
    a saved dataset that held its bytes."""
    format: str
    mode: str
    width: int
    height: int
    bytes_sha256: str
    pixels_sha256: str
    dhash: str
    """16 hex digits: the 64-bit difference hash."""

    @property
    def stored(self) -> str:
        """Its path in the data version folder: content-addressed by its bytes."""
        return f"images/{self.bytes_sha256}.{FORMATS[self.format]}"


@dataclass(frozen=True)
class BadImage:
    """Why an image was refused: a quarantine kind and the reason in words."""

    kind: str
    reason: str


@contextmanager
def pixel_limit(max_pixels: int | None) -> Iterator[None]:
    """Pillow's decompression-bomb limit set to `max_pixels` (the lab's
    `data.images.max_pixels`) while images are opened, and put back after; None keeps Pillow's
    own. Every stage that opens a lab's images opens them under the limit they were accepted
    under: one that raised it had its images refused by Pillow's default after `tunelab data`
    kept them."""
    from PIL import Image

    before = Image.MAX_IMAGE_PIXELS
    if max_pixels is not None:
        Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = before


def picture(image):
    """The picture an opened image shows, as every stage reads it: its first frame, turned
    upright as its EXIF orientation says (a phone stores a portrait photo sideways with a
    tag, which transformers' own `load_image` applies too), and a 16-bit grey image scaled
    to 8 bits (Pillow's conversions clip it at 255: white). Loads the pixels."""
    from PIL import Image, ImageOps

    image.seek(0)
    image.load()
    if image.getexif().get(EXIF_ORIENTATION, 1) != 1:
        image = ImageOps.exif_transpose(image)
    if image.mode in SIXTEEN_BIT:
        values = np.asarray(image).astype(np.int64)
        image = Image.fromarray((np.clip(values, 0, 65535) >> 8).astype(np.uint8), mode="L")
    return image


def decode_image(data: bytes, file: str, max_pixels: int) -> ImageInfo | BadImage:
    """Open and fully decode an image's bytes; `file` is where it came from, as shown."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        return BadImage("image_empty", "the file is empty (0 bytes)")
    with pixel_limit(max_pixels), warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as err:
            return _too_large(err, max_pixels)
        except UnidentifiedImageError:
            return _unopened(data, None)
        except Exception as err:  # a header that starts right and breaks off (OSError...)
            return _unopened(data, err)
        return _decoded(image, data, file, max_pixels)


def _decoded(image, data: bytes, file: str, max_pixels: int) -> ImageInfo | BadImage:
    from PIL import Image

    with image:
        if image.format not in FORMATS:
            return BadImage(
                "image_unsupported",
                f"a {image.format} image; the formats read are PNG, JPEG, WebP and GIF "
                "(convert it, e.g. to PNG)",
            )
        if not image.width or not image.height:
            return BadImage("image_empty", f"a picture of {image.width}x{image.height} pixels")
        try:
            shown = picture(image)
            rgba = shown.convert("RGBA")
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as err:
            return _too_large(err, max_pixels)
        except Exception as err:  # Pillow's decoders raise many kinds on damaged data
            return _undecodable(image.format, err)
        return ImageInfo(
            file=file,
            format=image.format,
            mode=image.mode,
            width=shown.width,
            height=shown.height,
            bytes_sha256=hashlib.sha256(data).hexdigest(),
            pixels_sha256=pixels_sha256(rgba),
            dhash=dhash(rgba),
        )


def _too_large(err: Exception, max_pixels: int) -> BadImage:
    """Pillow's words name its own limit, which for its error is twice the one set (it warns
    past the limit, which tunelab turns into an error, and raises past twice it)."""
    found = re.search(r"Image size \((\d+) pixels\)", str(err))
    size = f"{int(found[1]):,} pixels" if found else "more pixels than allowed"
    return BadImage(
        "image_too_large",
        f"{size}, more than data.images.max_pixels ({max_pixels:,}): the limit against "
        "decompression bombs; raise it if such large images are meant",
    )


def _unopened(data: bytes, err: Exception | None) -> BadImage:
    """A file whose header Pillow cannot read: a known format's start cut short or broken, or
    not an image at all."""
    known = next((fmt for sig, fmt in _SIGNATURES.items() if data.startswith(sig)), None)
    if known is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        known = "WEBP"
    words = f" ({err})" if err is not None and str(err) else ""
    if known:
        return BadImage(
            "image_truncated",
            f"starts as a {known} file but its header is cut short or broken{words}",
        )
    return BadImage("image_unreadable", f"not an image Pillow can identify{words}")


def _undecodable(fmt: str, err: Exception) -> BadImage:
    words = str(err) or type(err).__name__
    if "truncat" in words.lower():
        return BadImage("image_truncated", f"a {fmt} file cut short: {words}")
    return BadImage("image_unreadable", f"the {fmt} pixel data cannot be decoded: {words}")


def pixels_sha256(rgba) -> str:
    """sha256 of the size and the RGBA pixels: the picture, whatever its encoding."""
    digest = hashlib.sha256(f"{rgba.width}x{rgba.height}\n".encode())
    digest.update(rgba.tobytes())
    return digest.hexdigest()


def dhash(rgba, size: int = DHASH_SIZE) -> str:
    """The difference hash: the picture flattened onto white, in grayscale, resized to
    size + 1 columns by `size` rows, one bit per pair of neighbours in a row (1 where the
    right one is brighter), read row by row into a hex number."""
    from PIL import Image

    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    gray = Image.alpha_composite(white, rgba).convert("L")
    small = np.asarray(gray.resize((size + 1, size), Image.Resampling.LANCZOS), dtype=np.int16)
    bits = (small[:, 1:] > small[:, :-1]).flatten()
    value = int("".join("1" if b else "0" for b in bits), 2)
    return f"{value:0{size * size // 4}x}"
