"""Format adherence: answers that must follow a JSON Schema or a regular expression.

Two numbers matter: does the answer have the required shape (`format_valid`), and
is it the expected answer (`exact_match`). They are kept apart because fine-tuning
for format often fixes the first while the second must not get worse.

Decisions:
- Exactly one of `schema` or `regex` describes the format; both or neither is a
  spec error, as is a regex that does not compile or a schema that is not valid.
- Regex: `re.fullmatch` on the output with surrounding whitespace stripped; a
  match somewhere inside a longer answer does not count.
- Schema: the stripped output must be exactly one JSON value (strict, see
  `jsonout.parse_json`) that validates; any JSON type is allowed if the schema is.
- Exact match: for regex, an answer the regex accepts that equals the target as text
  after stripping and collapsing whitespace (an answer the regex refuses is never
  exactly right, though its words are: in a regex format the layout is the format);
  for schema, as parsed JSON values (`jsonout.values_equal`: key order and layout do
  not matter, strings are whitespace-normalised).
  This module is `tunelab.tasks.format`; import it under another name
  (`from tunelab.tasks import format as format_task`) to keep the builtin.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.tasks.jsonout import (
    NotJSONError,
    compile_schema,
    normalize_text,
    parse_json,
    schema_error,
    values_equal,
)

name = "format"
overall_metrics = frozenset({"format_valid", "exact_match"})
class_metrics: frozenset[str] = frozenset()
default_metric = "format_valid"
group_scope = None
group_key = None
lower_is_better: frozenset[str] = frozenset()
evaluation_imports: tuple[str, ...] = ()


def render_target(target: Any) -> str:
    """The training target text: a string as is, anything else dumped as JSON.

    In schema mode a string target must already be JSON text, since the model is
    trained to produce exactly this text and it is then parsed as JSON.
    """
    if isinstance(target, str):
        return target
    return json.dumps(target, ensure_ascii=False)


def check_format(schema: dict | None, regex: str | None) -> re.Pattern[str] | None:
    """Check the format description; return the compiled regex (None in schema mode).

    Raises ValueError naming what is wrong, so a broken spec fails before any
    generation is spent on it.
    """
    if schema is None and regex is None:
        raise TunelabError("a format task needs a JSON Schema (`schema`) or a `regex`; got neither")
    if schema is not None and regex is not None:
        raise TunelabError("a format task takes a JSON Schema (`schema`) or a `regex`, not both")
    if schema is not None:
        compile_schema(schema)
        return None
    try:
        return re.compile(regex)  # type: ignore[arg-type]
    except (re.error, TypeError) as e:
        raise TunelabError(f"invalid regex {regex!r}: {e}") from None


def score_example(output: str, target: Any, schema: dict | None, regex: str | None) -> dict:
    """Score one generated output: `format_valid`, `exact_match` and `error`.

    `error` is the first problem found (format first, then "differs from target"),
    or None when the answer is well-formed and right.
    """
    pattern = check_format(schema, regex)
    if pattern is not None:
        stripped = output.strip()
        valid = pattern.fullmatch(stripped) is not None
        exact = valid and normalize_text(stripped) == normalize_text(render_target(target))
        error = None if valid else f"does not match the regex {pattern.pattern}"
    else:
        expected = _parsed_target(target)
        try:
            value = parse_json(output)
        except NotJSONError as e:
            return {"format_valid": False, "exact_match": False, "error": str(e)}
        error = schema_error(compile_schema(schema), value)  # type: ignore[arg-type]
        valid = error is None
        exact = values_equal(value, expected)
    if error is None and not exact:
        error = "differs from target"
    return {"format_valid": valid, "exact_match": exact, "error": error}


def metrics(per_example: list[dict]) -> dict[str, Any]:
    """Rates of well-formed and of exactly right answers over scored examples."""
    if not per_example:
        raise TunelabError("no examples to score")
    n = len(per_example)
    return {
        "format_valid": sum(bool(ex["format_valid"]) for ex in per_example) / n,
        "exact_match": sum(bool(ex["exact_match"]) for ex in per_example) / n,
        "n": n,
    }


def _parsed_target(target: Any) -> Any:
    """A schema-mode target as a JSON value; a string target must itself be JSON."""
    if not isinstance(target, str):
        return target
    try:
        return parse_json(target)
    except NotJSONError as e:
        raise TunelabError(f"schema-mode target is not JSON ({e}): {target[:80]!r}") from None
