"""Exact duplicates: found inside train and across splits, train copies dropped by default."""

from __future__ import annotations

import pytest

from tunelab.core.spec import DedupSpec
from tunelab.data.dedup import DETECTORS, _Rows, deduplicate, held_out_copies, normalise
from tunelab.data.loaders import Example


def ex(id_: str, text: str, label: str = "a") -> Example:
    return Example(id_, text, label, "f", None)


def splits_of(**parts: list[Example]) -> dict[str, list[Example]]:
    return {s: parts.get(s, []) for s in ("train", "validation", "test")}


def kept_ids(result) -> dict[str, list[str]]:
    return {s: [e.id for e in rows] for s, rows in result.splits.items()}


def test_normalisation_ignores_case_unicode_form_and_spacing() -> None:
    assert normalise("  Ｈello\tWORLD \n") == normalise("hello world") == "hello world"
    assert normalise("Straße") == normalise("STRASSE")
    assert normalise("a b") != normalise("ab")


def test_within_train_keeps_the_first_by_id() -> None:
    splits = splits_of(
        train=[
            ex("f:2", "Same text"),
            ex("f:10", "same  TEXT"),
            ex("f:3", "other"),
            ex("f:9", "SAME text"),
        ]
    )
    result = deduplicate(splits, DedupSpec())
    assert kept_ids(result)["train"] == ["f:2", "f:3"]
    assert sorted(result.removed) == ["f:10", "f:9"]
    assert result.counts() == {"train-train": 2}
    assert {(p["a"]["id"], p["b"]["id"]) for p in result.pairs} == {("f:2", "f:9"), ("f:2", "f:10")}


def test_across_splits_the_train_copy_goes_and_eval_copies_stay() -> None:
    splits = splits_of(
        train=[
            ex("t1", "leaked to validation"),
            ex("t2", "leaked to test"),
            ex("t3", "only train"),
        ],
        validation=[ex("v1", "Leaked to validation"), ex("v2", "val and test share this")],
        test=[ex("s1", "leaked to  test"), ex("s2", "VAL and test share this")],
    )
    result = deduplicate(splits, DedupSpec())
    assert kept_ids(result) == {"train": ["t3"], "validation": ["v1", "v2"], "test": ["s1", "s2"]}
    assert sorted(result.removed) == ["t1", "t2"]
    assert result.counts() == {"train-validation": 1, "train-test": 1, "validation-test": 1}
    by_kind = {p["kind"]: p for p in result.pairs}
    assert by_kind["train-validation"]["a"] == {"id": "t1", "split": "train"}
    assert by_kind["train-validation"]["b"] == {"id": "v1", "split": "validation"}
    assert by_kind["validation-test"]["snippet"] == "val and test share this"
    assert by_kind["train-validation"]["action"] == "removed from train: t1"
    assert by_kind["validation-test"]["action"] == "kept: no train copy to remove"


def test_duplicates_only_inside_eval_splits_are_reported_not_removed() -> None:
    splits = splits_of(
        train=[ex("t1", "train text")],
        validation=[ex("v1", "twice in val"), ex("v2", "Twice in val")],
        test=[ex("s1", "secret test text"), ex("s2", "secret  test text")],
    )
    result = deduplicate(splits, DedupSpec())
    assert kept_ids(result) == {"train": ["t1"], "validation": ["v1", "v2"], "test": ["s1", "s2"]}
    assert result.removed == []
    assert result.counts() == {"validation-validation": 1, "test-test": 1}
    test_pair = next(p for p in result.pairs if p["kind"] == "test-test")
    assert test_pair["snippet"] is None  # the sealed split's text is never shown
    sizes = {"train": 1, "validation": 2, "test": 2}
    warning = held_out_copies(result.pairs, sizes)  # the report had counted them, said nothing
    assert warning.startswith(
        "exact copies kept outside train (test-test 1, validation-validation 1 pairs; 1 of "
        "validation's 2 rows (50.0%) and 1 of test's 2 rows (50.0%) repeat a row before them"
    )
    alone = deduplicate(splits_of(train=[ex("t", "x")]), DedupSpec()).pairs
    assert held_out_copies(alone, {"train": 1}) is None


def test_report_policy_removes_nothing() -> None:
    splits = splits_of(train=[ex("t1", "dup"), ex("t2", "dup")], validation=[ex("v1", "DUP")])
    result = deduplicate(splits, DedupSpec(policy="report"))
    assert kept_ids(result) == {"train": ["t1", "t2"], "validation": ["v1"], "test": []}
    assert result.removed == []
    assert result.counts() == {"train-train": 1, "train-validation": 1}
    assert {p["action"] for p in result.pairs} == {"reported only (policy report)"}


def test_exact_off_finds_nothing() -> None:
    splits = splits_of(train=[ex("t1", "dup"), ex("t2", "dup")])
    result = deduplicate(splits, DedupSpec(exact=False))
    assert result.pairs == [] and result.removed == []


def test_long_snippets_are_cut() -> None:
    text = "word " * 100
    splits = splits_of(train=[ex("t1", text), ex("t2", text)])
    [pair] = deduplicate(splits, DedupSpec()).pairs
    assert len(pair["snippet"]) <= 80 and pair["snippet"].endswith("…")


def test_detectors_are_a_registry() -> None:
    assert "exact" in DETECTORS
    clusters = DETECTORS["exact"](splits_of(train=[ex("t1", "x"), ex("t2", "X")]))
    assert [[e.id for _, e in c.members] for c in clusters] == [["t1", "t2"]]
    assert clusters[0].method == "exact"


def test_the_rows_are_each_split_in_id_order_with_its_name() -> None:
    rows = _Rows(
        splits_of(train=[ex("t:10", "x"), ex("t:9", "y")], validation=[], test=[ex("s:1", "z")])
    )
    assert len(rows) == 3
    assert [(split, e.id) for split, e in rows] == [
        ("train", "t:9"),
        ("train", "t:10"),
        ("test", "s:1"),
    ]
    assert rows[2][0] == "test" and rows.examples[0].id == "t:9"
    with pytest.raises(IndexError):
        rows[3]
    with pytest.raises(IndexError):
        rows[-1]  # no caller counts from the end: a negative index is a mistake


def chat(id_: str, system: str, question: str, answer: str) -> Example:
    turns = [
        {"role": "system", "content": system},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]
    flat = "\n\n".join(f"{t['role']}: {t['content']}" for t in turns)
    return Example(id_, flat, "", "f", None, target=answer, messages=turns)


def test_a_question_two_system_prompts_answer_apart_is_two_examples_not_near_copies() -> None:
    question = "which planet is nearest the sun, and how long is a year there in earth days"
    splits = splits_of(
        train=[
            chat("a", "Answer in one word.", question, "Mercury"),
            chat("b", "Answer in French.", question, "Mercure, 88 jours"),  # asked for otherwise
            chat("c", "Answer briefly.", question, "Mercury"),  # the same answer: a copy
        ]
    )
    result = deduplicate(splits, DedupSpec(exact=False))
    assert kept_ids(result)["train"] == ["a", "b"]
    assert [(p["a"]["id"], p["b"]["id"]) for p in result.pairs] == [("a", "c")]
