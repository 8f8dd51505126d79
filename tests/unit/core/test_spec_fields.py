"""Spec fields refused where they are written: a guardrail's source the lab lacks, fewer than
two listed labels."""

from __future__ import annotations

import pytest

from tunelab.core.spec import SpecError, validate_spec

MINIMAL = {"data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]}, "model": {"path": "m"}}


def test_a_guardrail_on_a_source_the_lab_lacks_is_refused_at_its_field():
    """`source: cod` ran and baselined, and compare then said there was no validation document
    of source 'cod', as if the data lacked it."""
    raw = {
        "task": {"type": "pretrain"},
        "data": {
            "sources": [
                {"type": "jsonl", "path": "prose.jsonl"},
                {"type": "jsonl", "path": "c.jsonl", "name": "code"},
            ]
        },
        "model": {"init": "scratch"},
        "method": {"type": "full"},
        "guardrails": [
            {"metric": "bits_per_byte", "scope": "every_source", "source": "cod", "max_drop": 0.02}
        ],
    }
    with pytest.raises(SpecError) as err:
        validate_spec(raw)
    said = str(err.value)
    assert "guardrails.0.source" in said
    assert "'cod' is not a source of this lab; its sources are ['prose', 'code']" in said
    raw["guardrails"][0]["source"] = "code"
    assert validate_spec(raw).guardrails[0].source == "code"
    raw["guardrails"][0] |= {"scope": "overall", "metric": "exact_match", "source": None}
    with pytest.raises(SpecError, match="'exact_match' is not an overall metric of pretrain"):
        validate_spec(raw)


@pytest.mark.parametrize("task", ["classification", "image_classification"])
@pytest.mark.parametrize("labels", [[], ["sport"]])
def test_fewer_than_two_listed_labels_are_refused_at_the_field(task, labels):
    """`task.labels=[]` read every row's label as unknown, and the data step then asked whether
    data.fields.label named the label field."""
    raw = {**MINIMAL, "task": {"type": task, "labels": labels}}
    with pytest.raises(SpecError, match=r"task\.labels`: \d label\(s\) listed: a classifier needs"):
        validate_spec(raw)
