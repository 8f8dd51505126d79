"""Names and values as MLflow takes them: the spec as params, a metrics record as numbers, keys
in the characters MLflow accepts, a record's time in milliseconds.

Fitted the same way every time, so that a second `track` compares like with like.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from datetime import datetime

from tunelab.core.param_groups import flatten as dotted

PARAM_LENGTH, TAG_LENGTH, KEY_LENGTH = 6000, 8000, 250  # MLflow's limits


def flatten(spec: dict) -> dict[str, str]:
    """A spec as MLflow params: its dotted keys as a run's diff reads them (`training.lr`,
    `param_groups.flatten`), lists and non-strings as JSON (`[\"query\", \"value\"]`, `true`,
    `null`), each cut to MLflow's 6,000 characters."""
    out = {}
    for key, value in dotted(spec).items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out[name(key)] = text[:PARAM_LENGTH]
    return out


def scalars(metrics: dict, prefix: str = "") -> dict[str, float]:
    """The numbers of a metrics record, nested keys joined by `/` (lists and text left out),
    each key one level (`part`)."""
    out: dict[str, float] = {}
    fitted = Counter(_fitted(str(k)) for k in metrics)
    for key, value in metrics.items():
        level = part(str(key), fitted[_fitted(str(key))] > 1)
        path = f"{prefix}/{level}" if prefix else level
        if isinstance(value, dict):
            out |= scalars(value, path)
        elif number(value):
            out[path] = float(value)
    return out


_UNSAFE = re.compile(r"[^\w.\- :/]")


def name(text: str) -> str:
    """A metric, param or tag key MLflow accepts: letters, digits, `_ - . : /` and spaces;
    anything else (a class label such as `food & drink`) becomes `_`."""
    return _UNSAFE.sub("_", text)[:KEY_LENGTH] or "_"


_UNSAFE_PART = re.compile(r"[^\w.\- :]")


def part(key: str, shared: bool = False) -> str:
    """One level of a metric's key: its characters fitted (`name`, and a `/` too: a label `a/b`
    made two levels); where another key of its level fits alike (`shared`: `R&D` and `R+D`
    both `R_D`, the second had overwritten the first in silence), the first 6 hex digits of
    its sha256 added. A label fitted alone keeps the key a lab tracked before had."""
    fitted = _fitted(key)
    if not shared:
        return fitted[:KEY_LENGTH]
    return f"{fitted[: KEY_LENGTH - 7]}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def _fitted(key: str) -> str:
    return _UNSAFE_PART.sub("_", key) or "_"


def millis(when: str | None) -> int | None:
    """An ISO 8601 time of a record in milliseconds since the epoch (None stays None)."""
    if not when:
        return None
    return int(datetime.fromisoformat(when).timestamp() * 1000)


def number(value) -> bool:
    """A number MLflow can hold as a metric (a bool is not one here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
