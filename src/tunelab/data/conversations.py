"""Conversations as data: `messages` rows, or prompt/completion rows, checked into examples.

Most chat and instruction data is kept as conversations: a list of turns `{role, content}`
(the `messages` format of the common fine-tuning APIs and of Hugging Face datasets), or a
prompt and a completion, each a string or a list of turns. Both become one list of turns here.
A turn holds a non-empty string `role` and a string `content`, nothing else (a key the chat
template might read, such as `tool_calls`, is refused rather than silently dropped); which
roles the template knows is `tunelab inspect`'s question, since only the template can say.
An assistant turn may also hold `weight`, 0 or 1, as in OpenAI's fine-tuning format: 0 keeps
the turn in the conversation and takes the loss off it. A turn keeps `weight: 0`; 1, the
default, is not stored, so the same conversation written either way is the same version.
A conversation whose every turn is `{from, value}` (ShareGPT's form, kept by many public chat
datasets) is read as `{role, content}`, `human` as `user` and `gpt` as `assistant` (other
roles as they are); `tunelab data` says how many rows were read so.

The answer is the last turn, which must be the assistant's: a conversation that ends on a user
(or any other) turn has nothing to learn or to evaluate and is quarantined, naming its last
role. For task extraction the answer must be a JSON object (it becomes the target the fields
are scored against); for task format it is the target string. The example's `text` is the
turns flattened (`role: content`, a blank line between turns), for cleaning and lengths; the
turns themselves are kept in `messages` and hashed into the version. Duplicates and conflicts
compare the prompt, the turns before the answer (`content.key_text`), as they compare any
generative row's input: the same prompt with two answers is a conflict.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tunelab.core.data_sections import Fields
from tunelab.data.content import flatten
from tunelab.data.loaders import (
    LONE_SURROGATE,
    Example,
    Rejection,
    _encodable,
    check_keys,
    check_present,
)
from tunelab.data.raw import Record

ASSISTANT = "assistant"
SHAREGPT_KEYS = {"from", "value"}
TURN_KEYS = {"role", "content", "weight"}
SHAREGPT_ROLES = {"human": "user", "gpt": ASSISTANT}
"""ShareGPT's speakers that have another name in `{role, content}` turns."""
ANSWERING = {ASSISTANT, "gpt", "model", "bot", "chatbot"}
"""Roles (in lower case) that other formats give the answering side: a last turn of one of them
is said to want the name 'assistant' (Gemini's contents say 'model'), not to end on no answer."""


class ConversationCheck:
    """The row check (`loaders.RowCheck`) of a conversation source; `sharegpt` counts the rows
    read from ShareGPT's `{from, value}` turns, `parts` those with a turn's content given as
    text parts (joined)."""

    def __init__(self, fields: Fields, labels: list[str] | None, task_type: str):
        self.fields, self.labels, self.task_type = fields, labels, task_type
        self.sharegpt = 0
        self.parts = 0

    def __call__(self, rec: Record, split: str | None) -> Example | Rejection:
        checked = check_conversation(rec, self.fields, self.labels, split, self.task_type)
        f = self.fields
        content = [f.messages] if f.messages else [f.prompt, f.completion]
        if isinstance(checked, Example):
            raw = [rec.values.get(name) for name in content]
            self.sharegpt += any(is_sharegpt(value) for value in raw)
            self.parts += any(
                isinstance(turn, dict) and isinstance(turn.get("content"), list)
                for value in raw
                if isinstance(value, list)
                for turn in value
            )
        return checked


def is_sharegpt(value) -> bool:
    """Whether `value` is a conversation in ShareGPT's form: turns `{from, value}`, every one."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, dict) and set(t) == SHAREGPT_KEYS for t in value)
    )


def sharegpt_turns(value) -> list[dict] | None:
    """ShareGPT's turns (`is_sharegpt`) as `{role, content}` ones, or None when `value` is not
    in that form."""
    if not is_sharegpt(value):
        return None
    return [
        {"role": SHAREGPT_ROLES.get(t["from"], t["from"]), "content": t["value"]} for t in value
    ]


def conversation_check(fields: Fields, labels: list[str] | None, task_type: str):
    """The row check of a conversation source (`ConversationCheck`)."""
    return ConversationCheck(fields, labels, task_type)


def check_conversation(
    rec: Record, fields: Fields, labels: list[str] | None, split: str | None, task_type: str
) -> Example | Rejection:
    """One row as a conversation example, or the reason it is quarantined."""

    def reject(kind: str, reason: str) -> Rejection:
        return Rejection(rec.file, rec.line, kind, reason)

    content = [fields.messages] if fields.messages else [fields.prompt, fields.completion]
    absent = check_present(rec, fields, content, split)
    if absent is not None:
        return absent
    if fields.messages:
        turns = _turns(rec.values[fields.messages], fields.messages)
    else:
        turns = _turns(rec.values[fields.prompt], fields.prompt, "user")
        completion = rec.values[fields.completion]
        if isinstance(completion, dict) and task_type == "extraction":  # the answer's object
            completion = json.dumps(completion, ensure_ascii=False)
        if isinstance(turns, list):
            more = _turns(completion, fields.completion, ASSISTANT)
            turns = more if isinstance(more, str) else turns + more
    if isinstance(turns, str):
        return reject("bad_turn", turns)
    last = turns[-1]
    if last["role"] != ASSISTANT and last["role"].strip().lower() in ANSWERING:
        return reject(
            "bad_turn",
            f"the last turn's role is {last['role']!r}: roles are read as written and chat "
            "templates know 'assistant' (ShareGPT's 'gpt', in lower case, is read as it); write "
            "the roles as system, user and assistant",
        )
    if last["role"] != ASSISTANT:
        return reject(
            "no_final_answer",
            f"the conversation ends on a {last['role']!r} turn: there is no answer to learn or "
            "to evaluate; end it on the assistant's answer, or leave the row out",
        )
    if len(turns) < 2 or all(t["role"] == ASSISTANT for t in turns):
        return reject("no_prompt", "the assistant's answer follows no other turn: nothing asks")
    answer = last["content"]
    if not answer.strip():
        return reject("empty_answer", "the last assistant turn is empty")
    if why := _empty_turn(turns[:-1]):
        return reject(*why)
    target, why = target_or_why(answer, task_type)
    if target is None:
        return reject(
            "bad_target",
            f"the last assistant turn must be a JSON object for task extraction ({why}), "
            "exactly as the model's answer is scored",
        )
    keys = check_keys(rec, fields, labels, split, generative=True)
    if isinstance(keys, Rejection):
        return keys
    if not _encodable(turns):
        return reject("bad_encoding", LONE_SURROGATE)
    return Example(
        keys.id,
        flatten(turns),
        keys.label,
        rec.file,
        rec.line,
        group=keys.group,
        split=keys.split,
        target=target,
        messages=turns,
    )


def _empty_turn(turns: list[dict]) -> tuple[str, str] | None:
    """The kind and reason of an empty turn before the answer that teaches something wrong: a
    user's (or a prompt's) asks nothing, so its answer is learned as the reply to no input; an
    earlier answer that carries the loss teaches replying with nothing. An empty system turn
    is a choice (no system prompt), and an answer weighed 0 (or a question whose answer is) is
    context alone."""
    for i, turn in enumerate(turns):
        if turn["content"].strip():
            continue
        answer = next((t for t in turns[i + 1 :] if t["role"] == ASSISTANT), None)
        if turn["role"] == "user" and (answer is None or answer.get("weight") != 0):
            return "empty_prompt", (
                f"turn {i} (user) is empty: the answer to it would be learned as a reply to no "
                "question; fill it in or leave the row out"
            )
        if turn["role"] == ASSISTANT and turn.get("weight") != 0:
            return "empty_answer", (
                f"turn {i} (assistant) is empty and carries the loss: the model would learn to "
                "answer with nothing; give it weight 0 if it is context, or leave the row out"
            )
    return None


def _turns(value, field: str, role: str | None = None) -> list[dict] | str:
    """A field's turns (a string is one turn of `role`, where a string is allowed), or why
    the field is not a conversation."""
    if isinstance(value, str) and role is not None:
        return [{"role": role, "content": value}]
    if why := _sharegpt_extra(value, field):
        return why
    value = sharegpt_turns(value) or value
    if not isinstance(value, list) or not value:
        kind = type(value).__name__ if not isinstance(value, list) else "an empty list"
        wanted = "a string or a list of turns" if role else "a list of turns"
        text = (
            " (a CSV or TSV cell is text, not turns: keep conversations in JSONL or Parquet, "
            "whose rows hold lists)"
            if isinstance(value, str)
            else ""
        )
        return f"{field} must be {wanted} ({{role, content}}), got {kind}{text}"
    turns = []
    for i, turn in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(turn, dict):
            return f"{where} must be an object {{role, content}}, got {type(turn).__name__}"
        extra = sorted(set(turn) - TURN_KEYS)
        if extra:
            sharegpt = " (ShareGPT's from and value are read when every turn has them alone)"
            return (
                f"{where} has {extra}: only role, content and an answer's weight are read, and "
                "a key the chat template would use is not dropped silently"
                + (sharegpt if SHAREGPT_KEYS & set(extra) else "")
            )
        if not isinstance(turn.get("role"), str) or not turn["role"].strip():
            return f"{where}.role must be a non-empty string"
        weight = turn.get("weight", 1)
        if "weight" in turn and turn["role"].strip() != ASSISTANT:
            return f"{where} has a weight: only an assistant turn's answer carries a loss to weigh"
        if type(weight) not in (int, float) or weight not in (0, 1):  # 0.0 from a dataframe
            return f"{where}.weight must be 0 (no loss on this answer) or 1, got {weight!r}"
        content = turn.get("content")
        if isinstance(content, list) and content:
            content, why = joined_parts(content, f"{where}.content")
            if why:
                return why
        elif not isinstance(content, str):
            return f"{where}.content must be a string, got {type(content).__name__}"
        kept = {"role": turn["role"].strip(), "content": content}
        if weight == 0:  # 1, every answer's default, is not stored
            kept["weight"] = 0
        turns.append(kept)
    return turns


def _sharegpt_extra(value, field: str) -> str | None:
    """Why turns in ShareGPT's form (each has `from` and `value`) are not read as it: a turn
    with another key or a value that is not text, named by its index and ShareGPT's keys (else
    it would be read as `{role, content}` turns and blamed on turn 0's `from`)."""
    if not isinstance(value, list) or not value or not is_sharegpt_value(value):
        return None
    for i, turn in enumerate(value):
        if extra := sorted(set(turn) - SHAREGPT_KEYS):
            return (
                f"{field}[{i}] has {extra}: ShareGPT's turns are read with from and value "
                "alone (a key the chat template would use is not dropped silently)"
            )
        if not isinstance(turn["from"], str) or not turn["from"].strip():
            return f"{field}[{i}].from must be a non-empty string"
        if not isinstance(turn["value"], str | list):  # text, or text parts (joined below)
            return f"{field}[{i}].value must be a string, got {type(turn['value']).__name__}"
    return None


def is_sharegpt_value(value: list) -> bool:
    """Every turn an object holding ShareGPT's `from` and `value` (maybe with other keys)."""
    return all(isinstance(t, dict) and set(t) >= SHAREGPT_KEYS for t in value)


def joined_parts(parts: list, where: str) -> tuple[str, str | None]:
    """The text of a content given as parts (`[{"type": "text", "text": "..."}, ...]`, the chat
    APIs' form), joined as those APIs join them, and None; or "" and why it cannot be read: a
    part that is not text (an image, audio) or holds another key."""
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or set(part) != {"type", "text"} or part["type"] != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            text_part = '{"type": "text", "text": ...}'
            return "", f"{where}[{j}] is a {kind!r} part: only text parts ({text_part}) are read"
        if not isinstance(part["text"], str):
            return "", f"{where}[{j}].text must be a string"
        texts.append(part["text"])
    return "".join(texts), None


def answer_target(answer: str, task_type: str):
    """The target the task scores: extraction's JSON object (None if the answer is not one),
    or format's string."""
    return target_or_why(answer, task_type)[0]


def target_or_why(answer: str, task_type: str) -> tuple[Any, str | None]:
    """`answer_target`, and why an extraction answer is not a JSON object (`jsonout.json_object`:
    read as a model's output is scored, so a training answer holds nothing a scored one
    could not)."""
    from tunelab.tasks.jsonout import json_object

    return json_object(answer) if task_type == "extraction" else (answer, None)


def summary(examples: list[Example]) -> dict:
    """What `tunelab data` says of kept conversations: how many, turns per conversation, the
    roles and how often each appears, and the answers weighted 0 (no loss)."""
    turns = sorted(len(ex.messages) for ex in examples if ex.messages)
    roles = Counter(t["role"] for ex in examples if ex.messages for t in ex.messages)
    if not turns:
        return {"rows": 0}
    return {
        "rows": len(turns),
        "turns": {"min": turns[0], "p50": turns[len(turns) // 2], "max": turns[-1]},
        "roles": dict(roles.most_common()),
        "answers_weighted_0": sum(
            t.get("weight") == 0 for ex in examples if ex.messages for t in ex.messages
        ),
    }
