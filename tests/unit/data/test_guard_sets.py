"""Forgetting sets: read from JSONL or plain text, refused with the file and line, stored in the
data version, and a set that shares text with train is warned about."""

from __future__ import annotations

import json

import pytest

from tunelab.core.errors import TunelabError
from tunelab.core.spec import Guardrail, Spec
from tunelab.data.guard_sets import (
    load_guard_sets,
    overlap_warnings,
    read_text_rows,
    stored_name,
)


def spec_on(*paths: str) -> Spec:
    return Spec(
        guardrails=[{"metric": "bits_per_byte", "on": p, "max_drop": 0.05} for p in paths],
        task={"type": "format", "regex": "[a-z]+"},
        data={"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
        model={"path": "m"},
    )


def test_jsonl_rows_keep_their_ids_or_take_their_line(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "one"}) + "\n\n" + json.dumps({"text": "x"}))
    assert read_text_rows(path) == [{"id": "a", "text": "one"}, {"id": "line3", "text": "x"}]


@pytest.mark.parametrize(
    "line, message",
    [("{not json", "g.jsonl:2: not valid JSON"), ('{"text": ""}', "g.jsonl:2: each row needs")],
)
def test_a_bad_row_is_named_by_file_and_line(tmp_path, line, message):
    path = tmp_path / "g.jsonl"
    path.write_text('{"text": "fine"}\n' + line + "\n")
    with pytest.raises(TunelabError, match=message):
        read_text_rows(path)


def test_plain_text_documents_are_separated_by_blank_lines(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("first para\nstill first\n\n  \nsecond\n\n")
    assert [r["text"] for r in read_text_rows(path)] == ["first para\nstill first", "second"]


def test_a_missing_file_names_the_guardrail_and_where_it_looked(tmp_path):
    with pytest.raises(TunelabError, match=r"guardrails\.0\.on: 'general/x.txt' not found"):
        load_guard_sets(spec_on("general/x.txt"), tmp_path)


def test_two_files_stored_under_one_name_are_refused(tmp_path):
    for name in ("a b.txt", "a_b.txt"):
        (tmp_path / name).write_text("text")
    assert stored_name("a b.txt") == stored_name("a_b.txt") == "a_b"
    with pytest.raises(TunelabError, match="would be stored under one name"):
        load_guard_sets(spec_on("a b.txt", "a_b.txt"), tmp_path)


def test_a_set_that_shares_text_with_train_is_warned_about(tmp_path):
    (tmp_path / "g.txt").write_text("held out\n\nalso trained on")
    (guard,) = load_guard_sets(spec_on("g.txt"), tmp_path)
    assert guard.summary()["documents"] == 2 and guard.file == "guard/g.jsonl"
    (warning,) = overlap_warnings([guard], {"also trained on"})
    assert warning.startswith("1 of 2 documents of the forgetting set g.txt")
    assert overlap_warnings([guard], {"other"}) == []


def test_a_forgetting_guardrail_measures_bits_per_byte_or_loss_overall():
    with pytest.raises(ValueError, match="measures bits_per_byte or loss"):
        Guardrail(metric="exact_match", on="g.txt", max_drop=0.1)
    with pytest.raises(ValueError, match="judged overall"):
        Guardrail(metric="loss", on="g.txt", scope="every_field", max_drop=0.1)


def test_a_text_classifier_lab_cannot_score_a_forgetting_set():
    with pytest.raises(ValueError, match="scores text with a causal language model"):
        Spec(
            guardrails=[{"metric": "bits_per_byte", "on": "g.txt", "max_drop": 0.05}],
            data={"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
            model={"path": "m"},
        )
