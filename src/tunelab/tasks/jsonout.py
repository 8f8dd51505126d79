"""Shared JSON helpers for the generative tasks (extraction, format).

Both tasks must agree on what "valid JSON" means and on when two values are "the
same", or their metrics would not be comparable; so parsing, schema checking and
value comparison live here once. Schema validation is delegated to `jsonschema`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema is imported when a schema is first compiled (70 ms at start-up)
    from jsonschema.protocols import Validator

from tunelab.core.errors import TunelabError

_MAX_MESSAGE = 160


class NotJSONError(ValueError):
    """A model output that is not exactly one JSON value (the message is a short reason)."""


def _reject_constant(name: str) -> Any:
    raise NotJSONError(f"not JSON: {name} is not valid JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused where it is past a float's range (`1e400` read as
    infinity, which `Infinity` written out is refused as)."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise NotJSONError(f"not JSON: {text} is out of a number's range")
    return value


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise NotJSONError(f"not JSON: duplicate key {key!r}")
        obj[key] = value
    return obj


def parse_json(text: str) -> Any:
    """Parse a model output strictly: exactly one JSON value, surrounding whitespace allowed.

    Strict on purpose: a consumer of the model's answer would call `json.loads` on it,
    so prose around the JSON, a Markdown fence, a second value, single quotes, NaN or
    Infinity, and duplicate keys (whose meaning is ambiguous) all make it invalid.
    Raises NotJSONError with a short reason such as
    "not JSON: Expecting ',' delimiter at char 17".
    """
    stripped = text.strip()
    if not stripped:
        raise NotJSONError("not JSON: empty output")
    try:
        return json.loads(
            stripped,
            parse_constant=_reject_constant,
            parse_float=_finite,
            object_pairs_hook=_reject_duplicates,
        )
    except json.JSONDecodeError as e:
        raise NotJSONError(f"not JSON: {e.msg} at char {e.pos}") from None
    except RecursionError:
        raise NotJSONError("not JSON: nested too deeply") from None


def json_object(text: str) -> tuple[dict | None, str | None]:
    """`text` as one JSON object, read as strictly as a model's output is scored
    (`parse_json`), or None and why not: a Markdown fence around it, prose after it, NaN, a
    key written twice, another kind of value."""
    try:
        value = parse_json(text)
    except NotJSONError as err:
        if text.strip().startswith("```"):
            return None, "a Markdown fence around it"
        if "Extra data" in str(err):  # json's words for what follows a whole value
            return None, f"text after the JSON object ({err})"
        return None, str(err)
    if not isinstance(value, dict):
        return None, f"{json_kind(value)}, not an object"
    return value, None


def json_kind(value: Any) -> str:
    """A parsed JSON value's kind, in JSON's words: `an array`, `a string`, `null`..."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return {list: "an array", str: "a string", dict: "an object"}.get(type(value), "a number")


def _short(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."


@lru_cache(maxsize=32)
def _compile(canonical: str) -> Validator:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    schema = json.loads(canonical)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise TunelabError(f"invalid JSON Schema at {where}: {_short(e.message)}") from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def compile_schema(schema: dict) -> Validator:
    """A validator for `schema` (Draft 2020-12 unless its `$schema` says otherwise).

    The schema itself is checked first so that a broken spec fails loudly with what
    is wrong instead of silently scoring every output as invalid. `format` keywords
    are checked (where jsonschema can), since format adherence is what is measured.
    Compiled validators are cached: scoring calls this once per example.
    """
    if not isinstance(schema, dict):
        raise TunelabError(f"a JSON Schema must be a mapping, got {type(schema).__name__}")
    try:
        canonical = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise TunelabError(f"invalid JSON Schema: not JSON-serialisable ({e})") from None
    return _compile(canonical)


def schema_error(validator: Validator, value: Any) -> str | None:
    """The most relevant validation error as a short reason, or None when `value` is valid."""
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"schema: {_short(error.message)}" + (f" at {where}" if where else "")


def normalize_text(text: str) -> str:
    """Strip and collapse whitespace runs to one space: layout is not content."""
    return " ".join(text.split())


def values_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values for exact-match scoring.

    Strings compare after `normalize_text`; numbers compare by value (1 == 1.0);
    booleans are never equal to numbers (unlike Python, where True == 1); objects
    compare key by key and arrays element by element, recursively.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return normalize_text(a) == normalize_text(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    return False
