"""The checks of a source as a whole, not row by row (`loaders.check_record` is the rows').

Before any row is read: every source of already split data brings its split, a folder source
is given no column settings it cannot have, and no two sources are shown alike in example ids.
After a source is read: labels written as numbers among string labels are quarantined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunelab.core.spec import Fields, Source
from tunelab.data.paths import Located
from tunelab.data.raw import DataError

if TYPE_CHECKING:
    from tunelab.data.loaders import Example, Loaded


def check_source(source: Source, i: int, fields: Fields, needs_split: bool) -> None:
    """`needs_split`: the data comes already split and this source brings no split itself."""
    if needs_split and source.split is None and fields.split is None:
        raise DataError(
            f"data.sources[{i}].split: other sources are already split; give this one a "
            "split too (train, validation or test), or name a split column in data.fields.split"
        )
    folder = source.type in ("folder", "image_folder")
    if folder and (fields.group or (fields.split and source.split is None)):
        raise DataError(
            f"data.sources[{i}]: a {source.type} source has no columns, so data.fields.group and "
            "data.fields.split cannot apply to it (set data.sources[i].split instead)"
        )


def check_shown_apart(located: list[Located]) -> None:
    """Two sources shown alike would give their rows the same ids (two folders named `data`
    outside the lab): refused, naming both, before any row is read."""
    first: dict[str, int] = {}
    for i, where in enumerate(located):
        j = first.setdefault(where.shown, i)
        if j != i:
            raise DataError(
                f"data.sources[{j}] and data.sources[{i}] are both shown as {where.shown!r} in "
                "example ids; give them distinct names (data.sources[i].name)"
            )


def quarantine_numbers(out: Loaded, numbers: list[Example]) -> None:
    """Labels that are numbers in a source whose labels are mostly words (a `3` among
    `"sport"` and `"tech"`): a slip far more often than a class, and a class of its own if
    let through. Each goes to the quarantine with its line. A source whose labels are mostly
    numbers keeps them (as strings), a `"1"` among `1`s being the same class."""
    drop = {id(ex) for ex in numbers}
    out.examples = [ex for ex in out.examples if id(ex) not in drop]
    out.rejections += [
        ex.reject(
            "label_type",
            f"label {ex.label} is a number while most labels of {ex.file} are words; "
            f'write it as the string "{ex.label}" if it is a class',
        )
        for ex in numbers
    ]
