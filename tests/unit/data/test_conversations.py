"""Conversation rows: `messages` and prompt/completion become one list of turns; what cannot be
learned or evaluated is quarantined with its line and reason; the spec refuses what cannot
render turns."""

from __future__ import annotations

import json

import pytest
import yaml

from tunelab.core.data_sections import Fields
from tunelab.core.spec import Spec, SpecError, load_spec, validate_spec
from tunelab.data.conversations import check_conversation, summary
from tunelab.data.loaders import Example, Rejection
from tunelab.data.raw import Record

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
    ex = check({"prompt": "page?", "completion": ANSWER}, PAIRS)  # extraction: the object itself
    assert ex.target == ANSWER and json.loads(ex.messages[-1]["content"]) == ANSWER
    assert check({"prompt": "page?", "completion": ANSWER}, PAIRS, "format").kind == "bad_turn"


def test_sharegpt_turns_are_read_as_role_and_content():
    sharegpt = [
        {"from": "system", "value": "be brief"},
        {"from": "human", "value": "page?"},
        {"from": "gpt", "value": json.dumps(ANSWER)},
    ]
    ex = check({"id": "a", "messages": sharegpt})
    expected = turns(("system", "be brief"), ("user", "page?"), ("assistant", json.dumps(ANSWER)))
    assert isinstance(ex, Example) and ex.messages == expected and ex.target == ANSWER
    pairs = {"prompt": sharegpt[:2], "completion": sharegpt[2:]}
    assert check(pairs, PAIRS).messages == expected
    mixed = [sharegpt[1], {"role": "assistant", "content": json.dumps(ANSWER)}]
    rejected = check({"id": "m", "messages": mixed})  # every turn so, or none
    assert isinstance(rejected, Rejection) and rejected.kind == "bad_turn"
    assert "ShareGPT's from and value are read when every turn has them alone" in rejected.reason


def test_content_given_as_text_parts_is_joined_and_other_parts_are_refused():
    def text(t: str) -> dict:
        return {"type": "text", "text": t}

    chat = [
        {"role": "user", "content": [text("page?"), text(" ls(1)")]},
        {"role": "assistant", "content": [text(json.dumps(ANSWER))]},
    ]
    ex = check({"id": "p", "messages": chat})
    expected = turns(("user", "page? ls(1)"), ("assistant", json.dumps(ANSWER)))
    assert isinstance(ex, Example) and ex.messages == expected and ex.target == ANSWER
    image = {"type": "image_url", "image_url": {"url": "x.png"}}
    for part, words in (
        (image, "messages[0].content[1] is a 'image_url' part: only text parts"),
        ({**text("x"), "cache_control": {}}, "messages[0].content[1] is a 'text' part"),
        ({"type": "text", "text": 3}, "messages[0].content[1].text must be a string"),
    ):
        bad = [{"role": "user", "content": [text("q"), part]}, chat[1]]
        rejected = check({"id": "b", "messages": bad})
        assert isinstance(rejected, Rejection) and rejected.kind == "bad_turn"
        assert words in rejected.reason


def test_an_answers_weight_0_is_kept_and_1_is_the_default():
    """OpenAI's fine-tuning format weighs each assistant turn 0 or 1; 0 is stored, 1 is every
    answer's default, so the same conversation written either way is the same version."""
    chat = turns(("user", "hi"), ("assistant", "hello"), ("user", "page?"), ("assistant", "{}"))
    weighed = [chat[0], {**chat[1], "weight": 0}, chat[2], {**chat[3], "weight": 1}]
    ex = check({"id": "a", "messages": weighed})
    assert ex.messages == [chat[0], {**chat[1], "weight": 0}, chat[2], chat[3]]
    assert summary([ex])["answers_weighted_0"] == 1
    same = [chat[0], {**chat[1], "weight": 0}, chat[2], chat[3]]
    assert check({"id": "a", "messages": same}).hashed() == ex.hashed()
    assert check({"id": "a", "messages": chat}).hashed() != ex.hashed()
    as_floats = [chat[0], {**chat[1], "weight": 0.0}, chat[2], {**chat[3], "weight": 1.0}]
    assert check({"id": "a", "messages": as_floats}).hashed() == ex.hashed()  # a dataframe's
    for at, weight, words in (
        (0, 0, "messages[0] has a weight: only an assistant turn's answer carries a loss"),
        (1, 2, "messages[1].weight must be 0 (no loss on this answer) or 1, got 2"),
        (1, True, "got True"),
        (1, "0", "got '0'"),
        (1, 0.5, "got 0.5"),
        (1, None, "got None"),
    ):
        bad = [*chat[:at], {**chat[at], "weight": weight}, *chat[at + 1 :]]
        rejected = check({"id": "b", "messages": bad})
        assert isinstance(rejected, Rejection) and rejected.kind == "bad_turn", weight
        assert words in rejected.reason


@pytest.mark.parametrize(
    "values, kind, words",
    [
        ({"messages": turns(("user", "hi"))}, "no_final_answer", "ends on a 'user' turn"),
        ({"messages": turns(("assistant", "{}"))}, "no_prompt", "follows no other turn"),
        ({"messages": "hello"}, "bad_turn", "got str (a CSV or TSV cell is text, not turns"),
        (
            {"messages": turns(("User", "q"), ("Assistant", "{}"))},
            "bad_turn",
            "write the roles as system, user and assistant",
        ),
        ({"messages": []}, "bad_turn", "got an empty list"),
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": []}]},
            "bad_turn",
            "messages[0] has ['tool_calls']",
        ),
        ({"messages": [{"role": "user", "content": 3}]}, "bad_turn", "content must be a string"),
        ({"messages": turns(("user", "q"), ("assistant", " "))}, "empty_answer", "is empty"),
        (
            {"messages": turns(("user", " "), ("assistant", "{}"))},
            "empty_prompt",
            "turn 0 (user) is empty",
        ),
        (
            {
                "messages": turns(
                    ("user", "q"), ("assistant", ""), ("user", "q"), ("assistant", "{}")
                )
            },
            "empty_answer",
            "turn 1 (assistant) is empty and carries the loss",
        ),
        (
            {
                "messages": [
                    {"from": "human", "value": "q"},
                    {"from": "gpt", "value": "{}", "loss": 1},
                ]
            },
            "bad_turn",
            "messages[1] has ['loss']: ShareGPT's turns are read with from and value alone",
        ),
        (
            {"messages": [{"from": "human", "value": None}, {"from": "gpt", "value": "{}"}]},
            "bad_turn",
            "messages[0].value must be a string, got NoneType",
        ),
        ({"messages": turns(("user", "q"), ("model", "{}"))}, "bad_turn", "know 'assistant'"),
        (
            {"messages": [{"from": "human", "value": "q"}, {"from": "GPT", "value": "{}"}]},
            "bad_turn",
            "the last turn's role is 'GPT'",
        ),
        ({"messages": turns(("user", "q"), ("assistant", "no json"))}, "bad_target", "JSON"),
        # read as strictly as a model's answer is scored, and said why
        (
            {"messages": turns(("user", "q"), ("assistant", '{"a": 1, "a": 2}'))},
            "bad_target",
            "duplicate key 'a'",
        ),
        ({"messages": turns(("user", "q"), ("assistant", '{"a": NaN}'))}, "bad_target", "NaN"),
        (
            {"messages": turns(("user", "q"), ("assistant", '```json\n{"a": 1}\n```'))},
            "bad_target",
            "a Markdown fence",
        ),
        (
            {"messages": turns(("user", "q"), ("assistant", '{"a": 1} Done.'))},
            "bad_target",
            "Extra data",
        ),
        (
            {"messages": turns(("user", "q"), ("assistant", "[1]"))},
            "bad_target",
            "an array, not an object",
        ),
        ({"text": "x"}, "missing_field", "messages"),
    ],
)
def test_what_cannot_be_learned_is_quarantined_with_its_line(values, kind, words):
    rejected = check({"id": "r", **values})
    assert isinstance(rejected, Rejection) and rejected.kind == kind and rejected.line == 7
    assert words in rejected.reason


def test_empty_system_turns_and_empty_context_answers_are_kept():
    system = turns(("system", ""), ("user", "q"), ("assistant", "{}"))
    assert isinstance(check({"id": "s", "messages": system}), Example)  # no system prompt
    context = turns(("user", "q"), ("assistant", ""), ("user", "q"), ("assistant", "{}"))
    context[1]["weight"] = 0  # in the conversation, not learned
    assert isinstance(check({"id": "c", "messages": context}), Example)
    asked = turns(("user", ""), ("assistant", "hi"), ("user", "q"), ("assistant", "{}"))
    asked[1]["weight"] = 0  # nothing is learned as the reply to the empty question
    assert isinstance(check({"id": "q", "messages": asked}), Example)
    parts = [{"type": "text", "text": "{}"}]  # ShareGPT's value as text parts, as before
    shared = [{"from": "human", "value": "q"}, {"from": "gpt", "value": parts}]
    assert check({"id": "p", "messages": shared}).messages[-1]["content"] == "{}"


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


def test_a_written_spec_naming_text_or_target_beside_conversations_is_refused(tmp_path):
    """`text` and `target` are not read where the rows are conversations: a user's file that
    names them is refused at their line; a run's record, which writes every default out, is
    not."""
    for unread in ("text", "target"):
        raw = spec(messages="messages", **{unread: unread})
        with pytest.raises(SpecError, match=f"`{unread}` would not be read: delete it"):
            validate_spec(raw, written=True)
        validate_spec(raw)  # as a record's spec
    with pytest.raises(SpecError, match="`text` would not be read"):
        validate_spec(spec(prompt="p", completion="c", text="question"), written=True)
    recorded = validate_spec(spec(messages="messages"), written=True).to_dict()
    assert recorded["data"]["fields"]["text"] == "text"  # the default, written out
    validate_spec(recorded)  # as a run reads its record back
    (tmp_path / "tunelab.yaml").write_text(yaml.safe_dump(spec(messages="messages", text="text")))
    with pytest.raises(SpecError, match=r"line \d+, field `data.fields.text`"):
        load_spec(tmp_path / "tunelab.yaml")
    with pytest.raises(ValueError, match="cleaning rules apply to a text column"):
        Spec(
            **{
                **spec(messages="m"),
                "data": {**spec(messages="m")["data"], "cleaning": [{"rule": "whitespace"}]},
            }
        )
