"""An image lab's rows: each record's image read, decoded, checked and staged for its version.

The sources are those of text labs plus `image_folder` (one sub-folder of images per label):
a JSONL, CSV or Parquet file names each image in its image column (`data.fields.image`) by a
path relative to the lab (the rules of a source path apply to it: `paths.locate_file`), and a
saved Hugging Face dataset holds it in a `datasets.Image` column (its bytes). A record passes
the checks every row passes (fields present, label, split, id and group: `loaders`), then its
image is read and fully decoded (`images.decode_image`); a bad one goes to quarantine with the
row's file and line, a kind, and the image file in the reason.

Each accepted image's bytes are staged, content-addressed (`images/<sha256>.<ext>`), in a
temporary folder beside the data versions (`staged_images`): a new version takes the ones its
kept rows use, and the folder is removed when `tunelab data` ends, so memory holds no image.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.spec import DataSpec, Fields, Spec
from tunelab.core.store import Store
from tunelab.data.images import BadImage, decode_image
from tunelab.data.loaders import Example, check_keys, check_present
from tunelab.data.paths import PlaceError, locate_file
from tunelab.data.raw import DataError, Record, Rejection
from tunelab.data.split import Splits

IMAGE_SOURCES = ("image_folder", "jsonl", "csv", "tsv", "parquet", "hf_dataset")


def check_image_spec(spec: Spec) -> None:
    """The data section fits the task: an image lab reads image sources and has no text to
    clean, and a text lab reads no image folder. Refusals name the spec field."""
    data = spec.data
    for i, source in enumerate(data.sources):
        if spec.images and source.type not in IMAGE_SOURCES:
            raise DataError(
                f"data.sources[{i}].type: a {source.type} source holds texts, and task "
                f"image_classification reads images: from {', '.join(IMAGE_SOURCES)} (a folder "
                "of label sub-folders of images is type: image_folder)"
            )
        if not spec.images and source.type == "image_folder":
            raise DataError(
                f"data.sources[{i}].type: an image_folder source holds images, and task "
                f"{spec.task.type} reads texts; set task.type: image_classification, or use "
                "type: folder for a folder of text files"
            )
    if spec.images and data.cleaning:
        raise DataError(
            "data.cleaning: cleaning rules edit texts, and an image lab has none; remove "
            "data.cleaning"
        )
    if spec.images and data.eval_from:
        raise DataError(
            "data.eval_from: keeping validation and test from an earlier version is not there "
            "yet for image labs (issue 26); remove data.eval_from"
        )


@contextmanager
def staged_images(store: Store) -> Iterator[Path]:
    """A temporary folder beside the data versions for the accepted images' bytes, removed at
    the end (a killed command leaves it as a `.*.tmp` leftover that `tunelab fsck` names)."""
    root = store.data_dir("staging").parent
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".images-", suffix=".tmp"))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def image_summary(splits: Splits, data: DataSpec, staging: Path) -> dict[str, Any]:
    """What a version records of its images: the files kept (one per distinct content), their
    bytes and formats, the pixel limit they were read under and the Pillow that read them."""
    import PIL

    kept = {ex.image.stored: ex.image for rows in splits.values() for ex in rows if ex.image}
    return {
        "files": len(kept),
        "bytes": sum((staging / name).stat().st_size for name in kept),
        "formats": dict(sorted(Counter(image.format for image in kept.values()).items())),
        "max_pixels": data.images.max_pixels,
        "pillow": PIL.__version__,
    }


@dataclass
class ImageIntake:
    """Turns an image source's records into examples (`loaders.load_sources`'s `check`)."""

    lab: Path
    fields: Fields
    labels: list[str] | None
    allow_outside: bool
    max_pixels: int
    staging: Path
    """Where each accepted image's bytes are put, under its name in a version (`stored`)."""

    @classmethod
    def of(cls, spec: Spec, lab: Path, staging: Path) -> ImageIntake:
        data = spec.data
        return cls(
            Path(lab),
            data.fields,
            spec.task.labels,
            data.allow_outside_lab,
            data.images.max_pixels,
            staging,
        )

    def check(self, rec: Record, split: str | None) -> Example | Rejection:
        """The row's checks, then its image's: read, decoded, staged."""
        fields = self.fields
        absent = check_present(rec, fields, [fields.image, fields.label], split)
        if absent is not None:
            return absent
        keys = check_keys(rec, fields, self.labels, split, generative=False)
        if isinstance(keys, Rejection):
            return keys
        read = self._read(rec, rec.values[fields.image])
        if isinstance(read, Rejection):
            return read
        data, shown = read
        image = decode_image(data, shown, self.max_pixels)
        if isinstance(image, BadImage):
            where = "" if shown == rec.file else f"{shown}: "
            return Rejection(rec.file, rec.line, image.kind, where + image.reason)
        staged = self.staging / image.stored
        if not staged.exists():
            staged.parent.mkdir(exist_ok=True)
            staged.write_bytes(data)
        return Example(
            keys.id,
            "",
            keys.label,
            rec.file,
            rec.line,
            group=keys.group,
            split=keys.split,
            image=image,
        )

    def _read(self, rec: Record, value: Any) -> tuple[bytes, str] | Rejection:
        """The image's bytes and where they came from (as shown), from a path or from a
        `datasets.Image` value ({"bytes": ..., "path": ...})."""
        origin = rec.file if rec.line is None else f"{rec.file}:{rec.line}"
        if isinstance(value, dict) and isinstance(value.get("bytes"), bytes):
            return value["bytes"], origin
        if isinstance(value, dict) and isinstance(value.get("path"), str):
            value = value["path"]  # an Image column whose files were not embedded
        if isinstance(value, bytes):
            return value, origin
        if not isinstance(value, str):
            return Rejection(
                rec.file,
                rec.line,
                "bad_image_type",
                f"{self.fields.image} must be a path (a string) or an image's bytes, got "
                f"{type(value).__name__}",
            )
        if not value.strip():
            return Rejection(rec.file, rec.line, "image_missing", "the image path is empty")
        try:
            data = locate_file(value, self.lab, self.allow_outside, self.fields.image).read_bytes()
        except PlaceError as err:
            return Rejection(rec.file, rec.line, f"image_{err.kind}", str(err))
        except DataError as err:
            return Rejection(rec.file, rec.line, "image_missing", str(err))
        except OSError as err:
            reason = f"{value}: cannot be read ({err.strerror or err})"
            return Rejection(rec.file, rec.line, "image_unreadable", reason)
        return data, _shown(value, self.lab)


def _shown(given: str, lab: Path) -> str:
    """The image file as the row names it; an absolute path inside the lab relative to it."""
    path = Path(given)
    if not path.is_absolute():
        return given
    for root in (lab, lab.resolve()):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return given
