"""Stage 2, `tunelab data`: load, validate (quarantine), clean, split, deduplicate, version.

`build_data` is the entry point; each step is its own module (loaders, cleaning, split,
dedup, version) so a newcomer finds a step by its name.
"""

from tunelab.data.loaders import DataError
from tunelab.data.pipeline import build_data

__all__ = ["DataError", "build_data"]
