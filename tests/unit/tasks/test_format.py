"""Format scoring (regex and JSON Schema) on hand-made model outputs."""

from __future__ import annotations

import pytest

from tunelab.tasks import format as format_task

DATE = r"\d{4}-\d{2}-\d{2}"
SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["pos", "neg"]}, "score": {"type": "number"}},
    "required": ["label"],
    "additionalProperties": False,
}


def by_regex(output: str, target: str = "2024-05-01") -> dict:
    return format_task.score_example(output, target, None, DATE)


def by_schema(output: str, target=None) -> dict:
    target = {"label": "pos", "score": 0.5} if target is None else target
    return format_task.score_example(output, target, SCHEMA, None)


def test_regex_match_and_exact():
    assert by_regex(" 2024-05-01\n") == {"format_valid": True, "exact_match": True, "error": None}


def test_regex_must_match_the_whole_answer():
    r = by_regex("Date: 2024-05-01")
    assert (r["format_valid"], r["exact_match"]) == (False, False)
    assert r["error"] == r"does not match the regex \d{4}-\d{2}-\d{2}"  # as written, unescaped
    assert by_regex("2024-05-012")["format_valid"] is False


def test_regex_valid_but_wrong_answer():
    r = by_regex("2024-05-02")
    assert (r["format_valid"], r["exact_match"], r["error"]) == (True, False, "differs from target")


def test_regex_exact_ignores_whitespace_layout_only():
    r = format_task.score_example("Name:  Ada\n", "Name: Ada", None, r"Name:\s+\w+")
    assert (r["format_valid"], r["exact_match"]) == (True, True)
    assert format_task.score_example("Name: ada", "Name: Ada", None, r".*")["exact_match"] is False


def test_an_answer_the_regex_refuses_is_never_exactly_right_though_its_words_are():
    regex, target = r"Label: (positive|negative)\nReason: [^\n]+\.", "Label: positive\nReason: ok."
    for layout in ("Label: positive Reason: ok.", "Label: positive\r\nReason: ok."):
        r = format_task.score_example(layout, target, None, regex)
        assert (r["format_valid"], r["exact_match"]) == (False, False), layout
        assert r["error"].startswith("does not match the regex")
    assert format_task.score_example(target, target, None, regex)["exact_match"] is True


def test_schema_pass_and_exact_regardless_of_layout_and_key_order():
    r = by_schema('\n{"score": 0.50,\n  "label": "pos"}')
    assert r == {"format_valid": True, "exact_match": True, "error": None}
    # a target given as JSON text is parsed the same way
    assert by_schema('{"label": "pos"}', target='{ "label" : "pos" }')["exact_match"] is True


def test_schema_valid_but_wrong_answer():
    r = by_schema('{"label": "neg", "score": 0.5}')
    assert (r["format_valid"], r["exact_match"], r["error"]) == (True, False, "differs from target")


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ('{"label": "neutral", "score": 0.5}', "schema: 'neutral' is not one of ['pos', 'neg']"),
        ('{"label": "pos", "score": "high"}', "schema: 'high' is not of type 'number' at score"),
        ('{"score": 0.5}', "schema: 'label' is a required property"),
        ('{"label": "pos", "score": 0.5, "why": "x"}', "schema: Additional properties"),
        ("label: pos", "not JSON: Expecting value at char 0"),
        ('{"label": "pos", "score": 0.5} Done.', "not JSON: Extra data at char 31"),
    ],
)
def test_schema_failures(output, reason):
    r = by_schema(output)
    assert (r["format_valid"], r["exact_match"]) == (False, False)
    assert r["error"].startswith(reason)


def test_schema_of_non_object_values():
    schema = {"type": "array", "items": {"type": "integer"}}
    assert format_task.score_example("[1, 2]", [1, 2], schema, None)["exact_match"] is True
    assert format_task.score_example("[1, 2.5]", [1, 2], schema, None)["format_valid"] is False


def test_render_target():
    assert format_task.render_target("2024-05-01") == "2024-05-01"
    assert format_task.render_target({"label": "pos", "note": "né"}) == (
        '{"label": "pos", "note": "né"}'
    )
    assert format_task.render_target([1, 2]) == "[1, 2]"


def test_format_description_errors():
    with pytest.raises(ValueError, match="got neither"):
        format_task.score_example("x", "x", None, None)
    with pytest.raises(ValueError, match="not both"):
        format_task.score_example("x", "x", SCHEMA, DATE)
    with pytest.raises(
        ValueError, match=r"invalid regex '\(ab': missing \), unterminated subpattern"
    ):
        format_task.score_example("x", "x", None, "(ab")
    with pytest.raises(ValueError, match="invalid JSON Schema at type: 5 is not valid"):
        format_task.score_example("1", 1, {"type": 5}, None)
    with pytest.raises(ValueError, match="schema-mode target is not JSON"):
        format_task.score_example('"pos"', "pos", {"type": "string"}, None)


def test_metrics_hand_computed():
    per = [by_regex("2024-05-01"), by_regex("2024-05-02"), by_regex("May 1st")]
    m = format_task.metrics(per)
    assert m == {"format_valid": 2 / 3, "exact_match": 1 / 3, "n": 3}
    assert format_task.overall_metrics <= m.keys()
    with pytest.raises(ValueError, match="no examples"):
        format_task.metrics([])
