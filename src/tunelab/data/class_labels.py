"""The class names of a `ClassLabel` label column: in a folder `datasets` saved (its features)
and in a Parquet file it wrote (the features in the schema's metadata, key `huggingface`);
also of a list of them (`List(ClassLabel)`, a multilabel column). `formats._named` puts the
names in place of the integers."""

from __future__ import annotations

import json
from typing import Any


def parquet_class_names(metadata: dict[bytes, bytes] | None, label: str) -> list[str] | None:
    """The names of a `ClassLabel` column `label` in the features `datasets` keeps in a
    Parquet schema's metadata (key `huggingface`), or None."""
    try:
        features = json.loads((metadata or {})[b"huggingface"])["info"]["features"]
        feature = features[label]
    except (KeyError, TypeError, ValueError):
        return None
    if isinstance(feature, dict) and feature.get("_type") in ("List", "Sequence"):
        feature = feature.get("feature")  # a list of ClassLabels: a multilabel column
    if not isinstance(feature, dict) or feature.get("_type") != "ClassLabel":
        return None
    names = feature.get("names")
    return [str(n) for n in names] if isinstance(names, list) and names else None


def class_names(feature: Any) -> list[str] | None:
    """The names of a saved dataset's `ClassLabel` feature, or of the `ClassLabel` a list
    feature holds (`List(ClassLabel)`, `Sequence(ClassLabel)`: a multilabel column)."""
    names = getattr(feature, "names", None)
    if names is None:
        inner = feature[0] if isinstance(feature, list) and feature else None
        names = getattr(getattr(feature, "feature", inner), "names", None)
    return names
