"""Stage 2, `tunelab data`: load, validate (quarantine), clean, split, deduplicate, version.

`build_data` is the entry point; each step is its own module (formats and loaders, cleaning,
split, dedup, version, usable) so a newcomer finds a step by its name. `build_data` is
imported on first use: `tunelab.data.usable` (the check `run` makes before loading a model)
stays light, without the deduplication's numerical libraries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunelab.data.raw import DataError

if TYPE_CHECKING:
    from tunelab.data.pipeline import build_data

__all__ = ["DataError", "build_data"]


def __getattr__(name: str) -> Any:
    if name == "build_data":
        from tunelab.data.pipeline import build_data

        return build_data
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
