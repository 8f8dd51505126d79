"""Structured extraction: text in, one JSON object with named fields out.

Scoring is layered so a regression can be located: is the output JSON at all
(`json_valid`), does it follow the schema (`schema_valid`), are the required fields
there (`field_presence`), are their values right (`field_accuracy`), and is every
required field right at once (`exact_match`). Per-field rates feed the
`every_field` guardrail, the way per-class rates feed `every_class`.

Decisions:
- JSON validity is strict (see `jsonout.parse_json`): the stripped output must be
  exactly one JSON object; an array, a scalar, or JSON wrapped in prose or a
  Markdown fence is invalid, because a downstream parser would reject it too.
- Extra fields the schema allows do not affect `exact_match` (only required fields
  are compared); the schema decides whether they are allowed (`additionalProperties`),
  and an answer the schema refuses (a key it forbids, an optional field of the wrong
  type) is never exact: a consumer validating it would reject it.
- A field is present when its key is in the object (as JSON Schema's `required`),
  even with a null value; a null where the target has a value is then not exact.
- Without a schema, `schema_valid` equals `json_valid`: there is nothing to violate.
"""

from __future__ import annotations

import json
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.tasks.jsonout import (
    NotJSONError,
    compile_schema,
    json_kind,
    parse_json,
    schema_error,
    values_equal,
)

name = "extraction"
overall_metrics = frozenset(
    {"json_valid", "schema_valid", "exact_match", "field_presence", "field_accuracy"}
)
class_metrics = frozenset({"presence", "exact"})
"""Per-field metrics (usable in an `every_field` guardrail)."""
default_metric = "exact_match"
group_scope = "every_field"
group_key = "per_field"
lower_is_better: frozenset[str] = frozenset()
evaluation_imports: tuple[str, ...] = ()


def render_target(target: dict, schema: dict | None = None) -> str:
    """The canonical training target text.

    Keys follow the schema's `properties` order (the order a reader of the schema
    expects and the model should learn), then any other keys sorted, at every depth (a
    nested object by its own properties, an array's items by `items`, a local `$ref`
    followed), so the same target always renders to the same tokens.
    """
    if not isinstance(target, dict):
        raise TunelabError(
            f"an extraction target must be a JSON object, got {type(target).__name__}"
        )
    return json.dumps(_ordered(target, schema or {}, schema or {}), ensure_ascii=False)


def _ordered(value: Any, schema: Any, root: dict) -> Any:
    """`value` with each object's keys in its schema's `properties` order, then sorted."""
    schema = followed(schema, root)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        props = props if isinstance(props, dict) else {}
        keys = [k for k in props if k in value] + sorted(k for k in value if k not in props)
        return {k: _ordered(value[k], props.get(k, {}), root) for k in keys}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [_ordered(v, items, root) for v in value]
    return value


def followed(schema: Any, root: dict, depth: int = 0) -> dict:
    """A schema with its local `$ref` (`#/$defs/item`) followed; {} where there is none to
    follow or it does not resolve (the keys are then sorted)."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/") or depth > 32:
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return followed(node, root, depth + 1) if isinstance(node, dict) else {}


def score_example(
    output: str, target: dict, schema: dict | None, required: list[str]
) -> dict[str, Any]:
    """Score one generated output against its target object.

    Returns `json_valid`, `schema_valid`, `fields` ({field: {"present", "exact"}} for
    each required field), `exact_match` and `error` (the first problem found, in the
    order JSON, object, schema, missing fields, wrong values; None when all is right).
    """
    missing_in_target = [f for f in required if f not in target]
    if missing_in_target:
        raise TunelabError(f"target lacks required field(s) {missing_in_target}: fix the data")
    validator = compile_schema(schema) if schema is not None else None

    error: str | None = None
    obj: dict | None = None
    try:
        value = parse_json(output)
    except NotJSONError as e:
        error = str(e)
    else:
        if isinstance(value, dict):
            obj = value
        else:
            error = f"not a JSON object: got {json_kind(value)}"

    schema_valid = obj is not None
    if obj is not None and validator is not None:
        problem = schema_error(validator, obj)
        if problem is not None:
            schema_valid = False
            error = problem

    fields: dict[str, dict[str, bool]] = {}
    for field in required:
        present = obj is not None and field in obj
        exact = present and values_equal(obj[field], target[field])  # type: ignore[index]
        fields[field] = {"present": present, "exact": exact}
    if error is None and obj is not None:
        missing = [f for f in required if not fields[f]["present"]]
        wrong = [f for f in required if fields[f]["present"] and not fields[f]["exact"]]
        if missing:
            error = f"missing field {', '.join(missing)}"
        elif wrong:
            error = f"wrong value in field {', '.join(wrong)}"

    return {
        "json_valid": obj is not None,
        "schema_valid": schema_valid,
        "fields": fields,
        "exact_match": all(f["exact"] for f in fields.values()) and schema_valid,
        "error": error,
    }


def metrics(per_example: list[dict], required: list[str]) -> dict[str, Any]:
    """Rates over scored examples (from `score_example`), keyed as guardrails name them.

    `field_presence` and `field_accuracy` average over every (example, required field)
    pair, so each field weighs the same in every example. With no required fields
    they are 1.0, as `exact_match` is vacuously true.
    """
    if not per_example:
        raise TunelabError("no examples to score")
    n = len(per_example)

    def rate(key: str) -> float:
        return sum(bool(ex[key]) for ex in per_example) / n

    per_field = {}
    present_total = exact_total = 0
    for field in required:
        present = sum(bool(ex["fields"][field]["present"]) for ex in per_example)
        exact = sum(bool(ex["fields"][field]["exact"]) for ex in per_example)
        present_total += present
        exact_total += exact
        per_field[field] = {"presence": present / n, "exact": exact / n, "support": n}
    pairs = n * len(required)
    return {
        "json_valid": rate("json_valid"),
        "schema_valid": rate("schema_valid"),
        "exact_match": rate("exact_match"),
        "field_presence": present_total / pairs if pairs else 1.0,
        "field_accuracy": exact_total / pairs if pairs else 1.0,
        "per_field": per_field,
        "n": n,
    }
