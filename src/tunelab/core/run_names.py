"""What may name a run: the run's name (part of its folder's name, so it may hold nothing a path
could misread) and its id, `r003-NAME`."""

from __future__ import annotations

import re

from tunelab.core.errors import StoreError


class RunNameError(StoreError):
    """A run name that cannot be part of a folder name safely."""


RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
"""A run name: 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` or `-`, and
(checked beside it) without `..`."""
RUN_ID = re.compile(r"r\d+-" + RUN_NAME.pattern)
"""A run id: `r`, its number, `-` and its name (`r003-lora`). Checked as a name, the id of a
run named with 60 to 64 characters was refused by every command that reads it (`compare` of the
whole lab among them), though the run had trained."""


def check_run_name(name: str, given: str | None = None) -> str:
    """`name` if it can name a run's folder, else RunNameError (`given`: as the user typed it)."""
    said, at_most, folder, example = f"run name {name!r}", 64, "NAME", "lora-r16"
    if given is not None:  # a baseline's: its method, then -NAME
        said, at_most = f"--name {given!r} (run {name!r})", 64 - len(name) + len(given)
        folder, example = name.removesuffix(given) + "NAME", "again"
    if not RUN_NAME.fullmatch(name) or ".." in name:
        raise RunNameError(
            f"{said} is not allowed: a run name becomes part of its folder's name "
            f"(.tunelab/runs/r003-{folder}), so it is 1 to {at_most} letters, digits, '.', '_' "
            f"or '-', does not start with '.' or '-' and has no '..'; e.g. --name {example}."
        )
    if LIKE_AN_ID.match(name):
        raise RunNameError(
            f"{said} reads as a run id: commands name a run by its id (r009-NAME) or "
            f"its number (r009), so `{name.split('-')[0]}` would name run "
            f"{name.split('-')[0]}, not this one; give a name that does not start with r and "
            f"digits, e.g. --name {example}."
        )
    return name


LIKE_AN_ID = re.compile(r"r\d+(-|$)")
"""A name that a command would read as a run's number (`r003`, `r003-lora`)."""
