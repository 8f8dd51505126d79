"""A lab's own targets checked against its task: what scoring cannot read, what the format
refuses, and a schema or regex that is not one."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tunelab.core.errors import TunelabError
from tunelab.tasks import load_schema
from tunelab.tasks.targets import off_format, refuse_off_format, refuse_unscorable, unscorable

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "section": {"type": "string"}},
    "required": ["name"],
}
EXTRACTION = SimpleNamespace(type="extraction", required=["name", "section"], json_schema=SCHEMA)
BY_REGEX = SimpleNamespace(type="format", json_schema=None, regex=r"ANSWER: -?\d+")
BY_SCHEMA = SimpleNamespace(type="format", json_schema=SCHEMA, regex=None)


def test_extraction_targets_scoring_cannot_read():
    assert unscorable(EXTRACTION, {"name": "ls", "section": "1"}) is None
    assert "section" in unscorable(EXTRACTION, {"name": "ls"})
    assert "not a JSON object" in unscorable(EXTRACTION, "ls(1)")


def test_a_schema_mode_format_target_must_be_json():
    assert unscorable(BY_SCHEMA, '{"name": "ls"}') is None
    assert unscorable(BY_SCHEMA, {"name": "ls"}) is None  # a value, dumped as JSON to train
    assert "task.json_schema" in unscorable(BY_SCHEMA, "name: ls")
    assert unscorable(BY_REGEX, "anything") is None  # a regex reads any text


def test_targets_the_format_itself_refuses():
    assert off_format(EXTRACTION, SCHEMA, {"name": "ls", "section": "1"}) is None
    assert "not of type 'string'" in off_format(EXTRACTION, SCHEMA, {"name": "ls", "section": 1})
    assert off_format(BY_REGEX, None, "ANSWER: -4") is None
    assert "does not match the regex" in off_format(BY_REGEX, None, "answer 4")
    assert "is a required property" in off_format(BY_SCHEMA, SCHEMA, '{"section": "1"}')


def test_a_refusal_names_the_rows_their_origin_and_the_count():
    rows = [
        {"id": f"p{i}", "origin": f"pages.jsonl:{i + 1}", "target": {"name": "x"}} for i in range(5)
    ]
    rows.append({"id": "ok", "origin": "pages.jsonl:9", "target": {"name": "x", "section": "1"}})
    with pytest.raises(TunelabError) as err:
        refuse_unscorable(EXTRACTION, rows, "validation")
    said = str(err.value)
    assert said.startswith("5 validation row(s) have a target that scoring cannot read")
    assert "p0 (pages.jsonl:1): target lacks the required field(s) section" in said
    assert "and 2 more" in said and "ok" not in said
    refuse_unscorable(EXTRACTION, rows[-1:], "validation")  # nothing to refuse


def test_a_schema_that_is_not_one_is_refused_naming_its_file(tmp_path):
    (tmp_path / "schema.json").write_text(json.dumps({"type": "objec"}))
    task = SimpleNamespace(json_schema="schema.json")
    with pytest.raises(TunelabError) as err:
        load_schema(task, tmp_path)
    assert f"task.json_schema ({tmp_path / 'schema.json'}): invalid JSON Schema" in str(err.value)
    task = SimpleNamespace(json_schema={"type": "object", "required": "name"})  # inline
    with pytest.raises(TunelabError, match=r"^task.json_schema: invalid JSON Schema at required"):
        load_schema(task, tmp_path)
    assert load_schema(SimpleNamespace(json_schema=SCHEMA), tmp_path) == SCHEMA


def test_task_required_may_not_name_a_key_no_answer_could_hold(tmp_path):
    """A key the schema forbids, or a path into an object, had every row blamed for it; a key
    the schema allows without naming it stays the user's to require."""

    def required(*fields, schema=SCHEMA):
        return SimpleNamespace(type="extraction", required=list(fields), json_schema=schema)

    assert load_schema(required("name", "section"), tmp_path) == SCHEMA
    assert load_schema(required("name", "vendor"), tmp_path)  # additionalProperties: allowed
    closed = {**SCHEMA, "additionalProperties": False}
    with pytest.raises(TunelabError, match="additionalProperties: false forbids any other key"):
        load_schema(required("vendor", schema=closed), tmp_path)
    by_ref = {"$ref": "#/$defs/page", "$defs": {"page": closed}}  # its properties behind a $ref
    with pytest.raises(TunelabError, match="'vendor' is not among"):
        load_schema(required("vendor", schema=by_ref), tmp_path)
    for allowed in (  # a key closed schemas still admit
        {**closed, "patternProperties": {"^vendor$": {"type": "string"}}},
        {**closed, "allOf": [{"properties": {"vendor": {}}}]},
    ):
        assert load_schema(required("vendor", schema=allowed), tmp_path)
    nested = {"properties": {"customer": {"properties": {"name": {}}}}}
    with pytest.raises(TunelabError, match=r"'customer.name' is a path into `customer`"):
        load_schema(required("customer.name", schema=nested), tmp_path)
    assert load_schema(required("anything", schema={"type": "object"}), tmp_path)  # no properties


def test_validation_targets_the_format_refuses_are_refused_naming_the_rule():
    rows = [{"id": "a", "origin": "rows.jsonl:1", "target": "ANSWER: 4"}]
    refuse_off_format(BY_REGEX, None, rows, "validation")  # nothing to refuse
    rows.append({"id": "b", "origin": "rows.jsonl:2", "target": "ANSWER:\n4"})
    with pytest.raises(TunelabError) as err:
        refuse_off_format(BY_REGEX, None, rows, "validation")
    said = str(err.value)
    assert said.startswith("1 validation row(s) have a target that task.regex refuses")
    assert "b (rows.jsonl:2): target does not match the regex" in said and "a (" not in said
