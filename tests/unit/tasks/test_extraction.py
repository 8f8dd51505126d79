"""Extraction scoring on hand-made model outputs, with hand-computed expected rates."""

from __future__ import annotations

import pytest

from tunelab.tasks import extraction

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string"},
    },
    "required": ["name", "age"],
}
REQUIRED = ["name", "age"]
TARGET = {"name": "Ada Lovelace", "age": 36, "city": "London"}


def score(output: str, schema: dict | None = SCHEMA, target: dict = TARGET) -> dict:
    return extraction.score_example(output, target, schema, REQUIRED)


def test_all_fields_right():
    r = score('{"name": "Ada Lovelace", "age": 36, "city": "London"}')
    assert r == {
        "json_valid": True,
        "schema_valid": True,
        "fields": {
            "name": {"present": True, "exact": True},
            "age": {"present": True, "exact": True},
        },
        "exact_match": True,
        "error": None,
    }


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ('{"name": "Ada Lovelace", "age"', "not JSON: "),  # truncated
        ('{"name": "Ada Lovelace", "age": 36} Hope this helps!', "not JSON: Extra data"),
        ("{'name': 'Ada Lovelace', 'age': 36}", "not JSON: Expecting property name"),
        ('```json\n{"name": "Ada Lovelace", "age": 36}\n```', "not JSON: "),
        ('{"name": "Ada Lovelace", "age": NaN}', "not JSON: NaN"),
        ('{"name": "Ada Lovelace", "age": 1e400}', "not JSON: 1e400 is out of a number's range"),
        ('{"name": "Ada", "name": "Ada Lovelace", "age": 36}', "not JSON: duplicate key"),
        ('{"name": "Ada\nLovelace", "age": 36}', "not JSON: Invalid control character"),
        ("   ", "not JSON: empty output"),
        ('[{"name": "Ada Lovelace", "age": 36}]', "not a JSON object: got an array"),
        ("36", "not a JSON object: got a number"),
    ],
)
def test_invalid_json(output, reason):
    r = score(output)
    assert r["json_valid"] is False
    assert r["schema_valid"] is False
    assert r["exact_match"] is False
    assert r["fields"] == {f: {"present": False, "exact": False} for f in REQUIRED}
    assert r["error"].startswith(reason)


def test_json_error_names_position():
    # '{"name": "Ada" "age": 36}': the second key starts at char 15, where a comma belongs.
    r = score('{"name": "Ada" "age": 36}')
    assert r["error"] == "not JSON: Expecting ',' delimiter at char 15"


def test_missing_required_field_without_schema():
    r = score('{"name": "Ada Lovelace"}', schema=None)
    assert r["json_valid"] is True
    assert r["schema_valid"] is True  # no schema: nothing to violate
    assert r["fields"]["name"] == {"present": True, "exact": True}
    assert r["fields"]["age"] == {"present": False, "exact": False}
    assert r["exact_match"] is False
    assert r["error"] == "missing field age"


def test_missing_required_field_fails_the_schema():
    r = score('{"name": "Ada Lovelace"}')
    assert r["json_valid"] is True
    assert r["schema_valid"] is False
    assert r["fields"]["age"]["present"] is False
    assert r["error"] == "schema: 'age' is a required property"


def test_wrong_value_in_one_field():
    r = score('{"name": "Ada Lovelace", "age": 37}')
    assert (r["json_valid"], r["schema_valid"], r["exact_match"]) == (True, True, False)
    assert r["fields"]["name"] == {"present": True, "exact": True}
    assert r["fields"]["age"] == {"present": True, "exact": False}
    assert r["error"] == "wrong value in field age"


def test_wrong_type_is_json_valid_but_schema_invalid():
    r = score('{"name": "Ada Lovelace", "age": "36"}')
    assert r["json_valid"] is True
    assert r["schema_valid"] is False
    assert r["fields"]["age"] == {"present": True, "exact": False}  # "36" is not 36
    assert r["error"] == "schema: '36' is not of type 'integer' at age"


def test_whitespace_and_number_form_do_not_matter():
    # whitespace around and inside the object, and escaped newline/tab inside the string
    r = score('\n  {"age": 36.0,\n "name": "  Ada\\n\\tLovelace "}  \n')
    assert r["exact_match"] is True
    assert r["schema_valid"] is True
    assert r["error"] is None


def test_case_and_booleans_do_matter():
    assert score('{"name": "ada lovelace", "age": 36}')["fields"]["name"]["exact"] is False
    r = extraction.score_example('{"ok": 1}', {"ok": True}, None, ["ok"])
    assert r["fields"]["ok"] == {"present": True, "exact": False}


def test_extra_fields_the_schema_allows_do_not_affect_exact_match_and_others_deny_it():
    output = '{"name": "Ada Lovelace", "age": 36, "nickname": "Enchantress of Numbers"}'
    assert score(output)["exact_match"] is True
    strict = {**SCHEMA, "additionalProperties": False}
    r = score(output, schema=strict)  # every required field right, in an answer a consumer rejects
    assert r["exact_match"] is False and r["fields"]["name"]["exact"] is True
    assert r["schema_valid"] is False
    assert r["error"].startswith("schema: Additional properties are not allowed")


def test_render_target_follows_schema_order_then_sorted():
    target = {"zeta": 1, "city": "Zürich", "alpha": 2, "age": 36, "name": "Ada"}
    text = extraction.render_target(target, SCHEMA)
    assert text == '{"name": "Ada", "age": 36, "city": "Zürich", "alpha": 2, "zeta": 1}'
    assert extraction.render_target({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert score(extraction.render_target(TARGET, SCHEMA))["exact_match"] is True


def test_render_target_orders_every_depth_and_follows_a_local_ref():
    item = {"properties": {"sku": {}, "qty": {}}}
    schema = {
        "properties": {
            "customer": {"properties": {"name": {}, "address": {"properties": {"city": {}}}}},
            "items": {"items": {"$ref": "#/$defs/item"}},
        },
        "$defs": {"item": item},
    }
    a = {
        "items": [{"qty": 1, "sku": "x"}],
        "customer": {"address": {"zip": 1, "city": "P"}, "name": "Z"},
    }
    b = {
        "customer": {"name": "Z", "address": {"city": "P", "zip": 1}},
        "items": [{"sku": "x", "qty": 1}],
    }
    text = extraction.render_target(a, schema)
    assert text == extraction.render_target(b, schema)  # equal targets, the same tokens
    assert text == (
        '{"customer": {"name": "Z", "address": {"city": "P", "zip": 1}}, '
        '"items": [{"sku": "x", "qty": 1}]}'
    )
    root_ref = {"$ref": "#/$defs/item", "$defs": {"item": item}}  # the whole schema a $ref
    assert extraction.render_target({"qty": 1, "sku": "x"}, root_ref) == '{"sku": "x", "qty": 1}'


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="invalid JSON Schema"):
        score("{}", schema={"type": "objekt"})
    with pytest.raises(ValueError, match=r"target lacks required field\(s\) \['age'\]"):
        score("{}", target={"name": "Ada"})
    with pytest.raises(ValueError, match="must be a JSON object"):
        extraction.render_target(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no examples"):
        extraction.metrics([], REQUIRED)


def test_metrics_hand_computed():
    outputs = [
        '{"name": "Ada Lovelace", "age": 36}',  # all right
        '{"name": "Ada Lovelace", "age": 37}',  # age wrong
        '{"name": "Ada Lovelace"}',  # age missing -> schema invalid
        '{"name": "Ada Lovelace", "age": 3',  # truncated -> nothing counts
    ]
    m = extraction.metrics([score(o) for o in outputs], REQUIRED)
    assert m["n"] == 4
    assert m["json_valid"] == 0.75  # 3 of 4
    assert m["schema_valid"] == 0.5  # examples 1 and 2
    assert m["exact_match"] == 0.25  # example 1
    # name present in 3, age in 2: (3 + 2) / 8; name exact in 3, age in 1: (3 + 1) / 8
    assert m["field_presence"] == 0.625
    assert m["field_accuracy"] == 0.5
    assert m["per_field"] == {
        "name": {"presence": 0.75, "exact": 0.75, "support": 4},
        "age": {"presence": 0.5, "exact": 0.25, "support": 4},
    }
    assert extraction.overall_metrics <= m.keys()
    assert extraction.class_metrics <= m[extraction.group_key]["name"].keys()


def test_metrics_without_required_fields_are_vacuous():
    per = [
        extraction.score_example("{}", {}, None, []),
        extraction.score_example("x", {}, None, []),
    ]
    m = extraction.metrics(per, [])
    assert (m["json_valid"], m["exact_match"]) == (0.5, 0.5)
    assert (m["field_presence"], m["field_accuracy"], m["per_field"]) == (1.0, 1.0, {})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1} Done.', "text after the JSON object (not JSON: Extra data at char 9)"),
        ('```json\n{"a": 1}\n```', "a Markdown fence around it"),
        ('{"a": 1, "a": 2}', "not JSON: duplicate key 'a'"),
        ('{"a": NaN}', "not JSON: NaN is not valid JSON"),
        ("[1]", "an array, not an object"),
    ],
)
def test_a_training_answer_that_is_no_json_object_says_why(text, why):
    from tunelab.tasks.jsonout import json_object

    assert json_object(text) == (None, why)
    assert json_object('{"a": 1.5e3}') == ({"a": 1500.0}, None)
