"""One image decoded and hashed (`data.images`), and the near-duplicate search on its
difference hashes (`data.near_images`). The images are made here with Pillow, a few dozen
pixels each."""

from __future__ import annotations

import hashlib
import io
import itertools

import numpy as np
import pytest
from PIL import Image

from tunelab.data.images import BadImage, ImageInfo, decode_image, pixels_sha256
from tunelab.data.near_images import as_ints, close_pairs, distances

LIMIT = 50_000_000


def picture(seed: int, size: int = 32) -> Image.Image:
    """A smooth random picture: 5x5 random colours blown up, so resizing keeps its shape."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 255, (5, 5, 3), dtype=np.uint8))
    return small.resize((size, size), Image.Resampling.BICUBIC)


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def decoded(data: bytes, max_pixels: int = LIMIT) -> ImageInfo:
    info = decode_image(data, "pics/x", max_pixels)
    assert isinstance(info, ImageInfo), info
    return info


@pytest.mark.parametrize(
    ("fmt", "options", "mode"),
    [
        ("PNG", {}, "RGB"),
        ("JPEG", {"quality": 90}, "RGB"),
        ("WEBP", {"lossless": True}, "RGB"),
        ("GIF", {}, "P"),
    ],
)
def test_each_format_read_is_decoded_with_its_size_mode_and_hashes(fmt, options, mode) -> None:
    data = encoded(picture(0, 24), fmt, **options)
    info = decoded(data)
    assert (info.format, info.mode, info.width, info.height) == (fmt, mode, 24, 24)
    assert info.bytes_sha256 == hashlib.sha256(data).hexdigest()
    assert len(info.pixels_sha256) == 64 and len(info.dhash) == 16
    ext = "jpg" if fmt == "JPEG" else fmt.lower()
    assert info.stored == f"images/{info.bytes_sha256}.{ext}"


def test_a_gif_is_its_first_frame() -> None:
    frames = [picture(1).convert("P"), picture(2).convert("P")]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    animated = decoded(out.getvalue())
    alone = decoded(encoded(frames[0], "GIF"))
    assert animated.pixels_sha256 == alone.pixels_sha256


def test_the_same_picture_re_encoded_losslessly_has_the_same_pixels_hash() -> None:
    image = picture(3)
    png, webp = decoded(encoded(image, "PNG")), decoded(encoded(image, "WEBP", lossless=True))
    assert png.bytes_sha256 != webp.bytes_sha256
    assert png.pixels_sha256 == webp.pixels_sha256
    assert png.dhash == webp.dhash
    lossy = decoded(encoded(image, "JPEG", quality=70))
    assert lossy.pixels_sha256 != png.pixels_sha256


def test_a_resized_jpeg_copy_is_a_few_bits_away_and_other_pictures_are_far() -> None:
    original = decoded(encoded(picture(4), "PNG"))
    copy = decoded(encoded(picture(4).resize((24, 24)), "JPEG", quality=75))
    others = [decoded(encoded(picture(seed), "PNG")) for seed in range(10, 20)]
    hashes = as_ints([original.dhash, copy.dhash] + [o.dhash for o in others])
    near = distances(hashes[:1], hashes[1:2])[0]
    far = distances(np.repeat(hashes[:1], len(others)), hashes[2:])
    assert near <= 3
    assert far.min() > 12


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("empty", b"", "image_empty"),
        ("text", b"just some words, no picture\n", "image_unreadable"),
        ("header cut", encoded(picture(5), "PNG")[:20], "image_truncated"),
        ("pixels cut", encoded(picture(5), "PNG")[:-300], "image_truncated"),
        ("jpeg cut", encoded(picture(5), "JPEG")[:-200], "image_truncated"),
        ("bmp", encoded(picture(5), "BMP"), "image_unsupported"),
        ("tiff", encoded(picture(5), "TIFF"), "image_unsupported"),
    ],
)
def test_bad_images_are_refused_with_their_kind(name, data, kind) -> None:
    bad = decode_image(data, "pics/x", LIMIT)
    assert isinstance(bad, BadImage), name
    assert bad.kind == kind, bad.reason


def test_an_image_over_max_pixels_is_refused_not_decoded_and_the_limit_is_put_back() -> None:
    before = Image.MAX_IMAGE_PIXELS
    data = encoded(picture(6, 40), "PNG")  # 1,600 pixels
    for limit in (1_000, 500):  # over the limit (Pillow's warning), over twice (its error)
        bad = decode_image(data, "pics/x", limit)
        assert isinstance(bad, BadImage) and bad.kind == "image_too_large"
        # the limit set, never Pillow's twice-the-limit for its error ("limit of 1000 pixels")
        assert bad.reason.startswith(f"1,600 pixels, more than data.images.max_pixels ({limit:,})")
        assert str(2 * limit) not in bad.reason
    assert decoded(data, 1_600).width == 40
    assert before == Image.MAX_IMAGE_PIXELS


def test_transparent_pixels_are_hashed_as_they_are() -> None:
    clear = Image.new("RGBA", (8, 8), (255, 0, 0, 0))
    other = Image.new("RGBA", (8, 8), (0, 0, 255, 0))
    a, b = decoded(encoded(clear, "PNG")), decoded(encoded(other, "PNG"))
    assert a.mode == "RGBA"
    assert a.pixels_sha256 != b.pixels_sha256  # hidden colours differ: not the same file
    assert a.dhash == b.dhash  # but the same picture on white


def test_close_pairs_finds_exactly_the_pairs_a_full_comparison_finds() -> None:
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**63, 40, dtype=np.uint64)
    flips = [base[i] ^ np.uint64(int(rng.integers(0, 2**8))) for i in range(20)]
    hashes = np.concatenate([base, np.array(flips, dtype=np.uint64), base[:3]])
    for max_distance in (0, 3, 6, 12):
        expected = []
        for i, j in itertools.combinations(range(len(hashes)), 2):
            d = bin(int(hashes[i]) ^ int(hashes[j])).count("1")
            if d <= max_distance:
                expected.append((i, j, d))
        assert close_pairs(hashes, max_distance) == expected


def test_close_pairs_of_fewer_than_two_hashes_is_empty() -> None:
    assert close_pairs(as_ints([]), 6) == []
    assert close_pairs(as_ints(["ffffffffffffffff"]), 6) == []


def test_sixteen_bit_grey_is_scaled_to_eight_bits_not_clipped_to_white() -> None:
    """Pillow's own conversion of a 16-bit grey PNG clips at 255: twenty different scans were
    one white picture (label conflicts), and a full-range one reached the model 99.6% white."""
    rng = np.random.default_rng(0)
    scans = [rng.integers(1000, 65536, (12, 12), dtype=np.uint16) for _ in range(2)]
    infos = [decoded(encoded(Image.fromarray(s), "PNG")) for s in scans]
    assert infos[0].pixels_sha256 != infos[1].pixels_sha256
    assert infos[0].mode.startswith("I") and (infos[0].width, infos[0].height) == (12, 12)
    ramp = np.linspace(0, 65535, 256).astype(np.uint16).reshape(16, 16)
    eight = (ramp.astype(np.int64) >> 8).astype(np.uint8)
    assert decoded(encoded(Image.fromarray(ramp), "PNG")).pixels_sha256 == pixels_sha256(
        Image.fromarray(eight, mode="L").convert("RGBA")
    )


def test_a_photo_is_read_upright_as_its_exif_orientation_says() -> None:
    """A phone stores a portrait photo sideways with an orientation tag: the row's size and
    hashes are the upright picture's, the same as the picture saved upright without a tag."""
    sideways = picture(3).resize((40, 20))
    exif = Image.Exif()
    exif[0x0112] = 6  # turned 90 degrees clockwise to be seen upright
    tagged = decoded(encoded(sideways, "PNG", exif=exif))
    upright = decoded(encoded(sideways.transpose(Image.Transpose.ROTATE_270), "PNG"))
    assert (tagged.width, tagged.height) == (20, 40)
    assert tagged.pixels_sha256 == upright.pixels_sha256 and tagged.dhash == upright.dhash
