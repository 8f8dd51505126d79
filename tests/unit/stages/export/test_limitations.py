"""A bundle's typical failures show the input the model answered, never the answer."""

from __future__ import annotations

from tunelab.stages.export.limitations import failures

TURNS = [
    {"role": "system", "content": "You index manual pages."},
    {"role": "user", "content": "What is a manual page?"},
    {"role": "assistant", "content": "A page of documentation."},
    {"role": "user", "content": "Index this page: LS(1) ls - list directory contents"},
    {"role": "assistant", "content": '{"name": "ls"}'},
]


def test_a_conversations_failure_shows_the_turn_it_answered_not_its_answer():
    wrong = {"id": "c1", "target": {"name": "ls"}, "output": "{}", "score": {"exact_match": 0}}
    row = {"id": "c1", "text": "\n\n".join(t["content"] for t in TURNS), "messages": TURNS}
    (found,) = failures([wrong], {"c1": row})
    assert found["input"] == "… user: Index this page: LS(1) ls - list directory contents"
    (single,) = failures([wrong], {"c1": {"id": "c1", "messages": TURNS[3:]}})
    assert single["input"] == "user: Index this page: LS(1) ls - list directory contents"


def test_a_single_inputs_failure_shows_its_text_cut():
    wrong = {"id": "p1", "target": {}, "output": "no", "score": {"exact_match": 0}}
    (found,) = failures([wrong], {"p1": {"id": "p1", "text": "x" * 400}})
    assert found["input"] == "x" * 300 + "…" and found["output"] == "no"
