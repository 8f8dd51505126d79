"""Conversation rows: `messages` and prompt/completion become one list of turns; what cannot be
learned or evaluated is quarantined with its line and reason; the spec refuses what cannot
render turns."""

from __future__ import annotations

import json

import pytest

from tunelab.core.data_sections import Fields
from tunelab.core.spec import Spec
from tunelab.data.conversations import check_conversation, summary
from tunelab.data.formats import Record
from tunelab.data.loaders import Example, Rejection

MESSAGES = Fields(messages="messages", id="id")
PAIRS = Fields(prompt="prompt", completion="completion")
ANSWER = {"name": "ls", "section": "1"}


def check(values: dict, fields: Fields = MESSAGES, task: str = "extraction"):
    return check_conversation(Record("chats.jsonl", 7, values), fields, None, None, task)


def turns(*pairs: tuple[str, str]) -> list[dict]:
    return [{"role": r, "content": c} for r, c in pairs]


def test_a_multi_turn_conversation_keeps_its_turns_and_answers_with_the_last():
    chat = turns(
        ("system", "be brief"),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "page?"),
        ("assistant", json.dumps(ANSWER)),
    )
    ex = check({"id": "a", "messages": chat})
    assert isinstance(ex, Example) and ex.id == "a" and ex.messages == chat
    assert ex.target == ANSWER  # extraction: the last answer's JSON object
    assert ex.text.startswith("system: be brief\n\nuser: hi")
    assert "messages" in ex.to_row() and chat in ex.hashed()
    assert summary([ex])["roles"] == {"user": 2, "assistant": 2, "system": 1}


def test_prompt_and_completion_as_strings_or_turns():
    ex = check({"prompt": "page?", "completion": "ls"}, PAIRS, "format")
    assert ex.messages == turns(("user", "page?"), ("assistant", "ls")) and ex.target == "ls"
    ex = check(
        {"prompt": turns(("system", "s"), ("user", "q")), "completion": turns(("assistant", "a"))},
        PAIRS,
        "format",
    )
    assert [t["role"] for t in ex.messages] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    "values, kind, words",
    [
        ({"messages": turns(("user", "hi"))}, "no_final_answer", "ends on a 'user' turn"),
        ({"messages": turns(("assistant", "{}"))}, "no_prompt", "follows no other turn"),
        ({"messages": "hello"}, "bad_turn", "must be a list of turns"),
        ({"messages": []}, "bad_turn", "got an empty list"),
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": []}]},
            "bad_turn",
            "messages[0] has ['tool_calls']",
        ),
        ({"messages": [{"role": "user", "content": 3}]}, "bad_turn", "content must be a string"),
        ({"messages": turns(("user", "q"), ("assistant", " "))}, "empty_answer", "is empty"),
        ({"messages": turns(("user", "q"), ("assistant", "no json"))}, "bad_target", "JSON"),
        ({"text": "x"}, "missing_field", "messages"),
    ],
)
def test_what_cannot_be_learned_is_quarantined_with_its_line(values, kind, words):
    rejected = check({"id": "r", **values})
    assert isinstance(rejected, Rejection) and rejected.kind == kind and rejected.line == 7
    assert words in rejected.reason


def spec(**data_fields) -> dict:
    return {
        "task": {"type": "format", "regex": ".+"},
        "data": {"sources": [{"type": "jsonl", "path": "c.jsonl"}], "fields": data_fields},
        "model": {"path": "m", "template": "chat"},
    }


def test_the_spec_refuses_what_cannot_render_turns():
    Spec(**spec(messages="messages"))  # a format task on chat: fine
    with pytest.raises(ValueError, match="set template: chat"):
        Spec(**{**spec(messages="messages"), "model": {"path": "m"}})
    with pytest.raises(ValueError, match="not task classification"):
        Spec(**{**spec(messages="messages"), "task": {"type": "classification"}})
    with pytest.raises(ValueError, match="need both fields"):
        Spec(**spec(prompt="p"))
    with pytest.raises(ValueError, match="not both"):
        Spec(**spec(messages="m", prompt="p", completion="c"))
    with pytest.raises(ValueError, match="cleaning rules apply to a text column"):
        Spec(
            **{
                **spec(messages="m"),
                "data": {**spec(messages="m")["data"], "cleaning": [{"rule": "whitespace"}]},
            }
        )
