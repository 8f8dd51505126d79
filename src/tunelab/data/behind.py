"""Is a data version the one the spec and its sources would make today?

`run` trains on the store's current data version. After an edit of `data.*` in the spec, or of
a source file, without a new `tunelab data`, it trained on the old version in silence, while
its record kept the edited spec (and the diff against its parent read "data: data.split.seed
0 -> 7" of data that had not changed). `behind` names what differs; `run` prints and records
it, and goes on: the version it trains on is whole and named in its record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunelab.data.cleaning import rule_settings
from tunelab.data.version import settings_of

COMPARED = ("sources", "fields", "split", "dedup", "max_chars", "long_text", "eval_from", "engine")
"""The settings of a version that the spec's `data` section sets (its `settings`)."""


def behind(spec: Any, lab: Path, manifest: dict) -> list[str]:
    """What the spec's data section or its sources say that data version `manifest` was not
    made from: `data.split` for a setting, `data.sources[0] (docs.jsonl): its content changed`
    for a source. Empty when the version is the spec's."""
    made = manifest.get("settings") or {}
    sources = made.get("source_sha256") or []
    now = settings_of(spec.data, [], [{"sha256": None}] * len(spec.data.sources), spec.images)
    differ = [f"data.{key}" for key in COMPARED if now.get(key) != made.get(key)]
    if spec.images and now.get("images") != made.get("images"):
        differ.append("data.images")
    if rule_settings(spec.data.cleaning) != manifest.get("rules", []):
        differ.append("data.cleaning")
    declared = None if spec.task.generative else getattr(spec.task, "labels", None)
    if declared and list(declared) != manifest.get("labels"):  # a version keeps its labels only
        differ.append("task.labels")
    if differ or len(sources) != len(spec.data.sources):
        return differ or ["data.sources"]
    return _changed_sources(spec, lab, sources)


def _changed_sources(spec: Any, lab: Path, hashes: list[str]) -> list[str]:
    """Each source whose content is not the one the version hashed (or that no longer reads)."""
    from tunelab.core.errors import TunelabError
    from tunelab.data.paths import locate

    out = []
    for i, (source, made) in enumerate(zip(spec.data.sources, hashes, strict=True)):
        try:
            where = locate(source, i, lab, spec.data.allow_outside_lab)
        except TunelabError as err:
            out.append(f"data.sources[{i}] ({source.path}): cannot be read now ({err})")
            continue
        if where.sha256() != made:
            out.append(f"data.sources[{i}] ({where.shown}): its content changed")
    return out


def behind_words(version: str, differ: list[str]) -> str:
    """The warning `run` prints and records."""
    return (
        f"data version {version} was not made from what the spec and its sources say now "
        f"({'; '.join(differ)}): this run trains on {version} as it is. Run `tunelab data` to "
        "make the version they describe, then train on it."
    )
