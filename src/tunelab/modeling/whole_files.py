"""A base model folder's files read whole before a command records anything: its `config.json`
parses, each `.safetensors` file's header parses and the file holds every byte its header
places (a copy cut short, a file overwritten), and an image lab's base has the
`preprocessor_config.json` its preprocessing comes from. transformers finds each of these too,
but only as the model loads, after `baseline` recorded its majority class, and as an exception
that names neither the field nor what to do. Reading the headers takes milliseconds; the
weights themselves are hashed where a record needs them (`identity`)."""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.errors import TunelabError

MAX_HEADER = 100 * 2**20
"""A safetensors header larger than this is not one (the format caps it at 100 MB)."""


class DamagedModelError(TunelabError):
    """A file of the base model's folder cannot be what it says it is."""


def require_whole(folder: Path, field: str, images: bool = False) -> None:
    """Refuse a folder whose config, weights or (for `images`) preprocessing file is damaged
    or missing, naming the file and what to do."""
    again = f"save the model again with save_pretrained, or point {field} at a whole copy"
    config = folder / "config.json"
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedModelError(f"{config}: not valid JSON ({err}); {again}") from None
    for file in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(file)
        if problem:
            raise DamagedModelError(f"{file}: {problem}; {again}")
    if images and not (folder / "preprocessor_config.json").is_file():
        raise DamagedModelError(
            f"{field}: {folder} has no preprocessor_config.json, so it is not an image model "
            "(an image lab reads its base's resize, crop and normalisation from that file); "
            "point it at an image classifier's folder"
        )


class NotSafetensors(ValueError):
    """A file whose first bytes are not a safetensors header."""


def safetensors_header(file: Path) -> tuple[int, dict]:
    """The header's length and the header itself (tensor name -> dtype, shape, data offsets),
    reading only the header; NotSafetensors saying why it is none."""
    size = file.stat().st_size
    with file.open("rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n <= MAX_HEADER or 8 + n > size:
            raise NotSafetensors(
                f"not a safetensors file (header of {n:,} bytes in a file of {size:,})"
            )
        try:
            return n, json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise NotSafetensors(f"not a safetensors file (its header: {err})") from None


def safetensors_problem(file: Path) -> str | None:
    """What makes `file` not a whole safetensors file, or None: its 8-byte header length, the
    JSON header, and the file's size against the end of its last tensor's bytes."""
    try:
        n, header = safetensors_header(file)
    except NotSafetensors as err:
        return str(err)
    ends = [
        t["data_offsets"][1]
        for k, t in header.items()
        if k != "__metadata__" and isinstance(t, dict) and "data_offsets" in t
    ]
    expected = 8 + n + max(ends, default=0)
    size = file.stat().st_size
    if size != expected:
        return f"cut short or padded: its header places {expected:,} bytes, the file has {size:,}"
    return None
