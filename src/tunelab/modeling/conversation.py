"""Conversations -> tokens: every turn rendered by the model's own chat template, the loss on
the assistant's answers and never on system or user text.

The template is applied to the first i turns, and turn i's text is what that adds to the first
i - 1: a template must render a conversation as a growing prefix (one that rewrites an earlier
turn when a later one comes, e.g. by dropping old reasoning, is refused, naming the turn). An
assistant turn is split where the template's generation prompt ends (`add_generation_prompt`):
its header is prompt, its content and end-of-turn token carry the loss (every assistant turn,
or the last only: `model.loss_on_turns`); what the template writes after the end token (a
newline) does not. An answer the data weighs 0 (`weight`, as in OpenAI's fine-tuning format)
carries none. This needs no `{% generation %}` markers in the template, whose absence
makes other trainers' assistant masks train on every token without a word.

A turn whose content the template does not print (a role it does not know and drops) is
refused for that row, naming the role: nothing the data holds is left out in silence.

**Tokens**: everything before the final answer's content is tokenised as one string, as a
server tokenises the conversation it renders; the final answer apart, as the model generates
it after that prompt. Each piece's tokens are found by the tokenizer's offsets (a token that
straddles two pieces is the earlier one's: an earlier answer that begins with blank lines can
lose its first newline to its header's).

**Truncation**: a conversation longer than `model.max_length` loses its oldest turns first,
whole (never part of a turn, never the final answer): the system turn stays, the turns after it
go one by one, and an assistant turn left first goes with them, until the rest fits. When the
system turn and the final exchange alone do not fit, the row is refused with that reason.
Evaluation renders the turns before the final answer with the generation prompt, cut the same
way, and generates the answer.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

ASSISTANT = "assistant"


class TurnError(ValueError):
    """A conversation that cannot be rendered for training; `kind` names the finding."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Turn:
    """One turn's place among a rendered conversation's tokens."""

    role: str
    start: int
    """Its first token (the template's header for it)."""
    body: int
    """Its first content token."""
    end: int
    """One past its last token."""
    loss: bool
    weight: int = 1
    """The data's weight of an assistant answer (`weight` 0: in the prompt, no loss)."""


@dataclass(frozen=True)
class Conversation:
    input_ids: list[int]
    loss_mask: list[int]
    turns: tuple[Turn, ...]
    prompt_len: int
    """Tokens before the final answer's content: the prompt evaluation generates from."""
    turns_cut: int
    """Turns dropped (the oldest first) to fit `max_length`."""
    tokens_cut: int


def render_conversation(
    tokenizer: PreTrainedTokenizerBase,
    turns: list[dict],
    max_length: int,
    end_id: int | None,
    last_only: bool = False,
    with_target: bool = True,
) -> Conversation:
    """The conversation's tokens and loss mask (with_target), or the prompt before its final
    answer (not with_target: evaluation), its oldest turns dropped until it fits."""
    shown = turns if with_target else turns[:-1]
    full = _tokens(tokenizer, shown, end_id, last_only, with_target)
    kept, dropped = shown, 0
    tokens = full
    first = 1 if shown[0]["role"] == "system" else 0
    final = _final_exchange(shown, with_target)
    while len(tokens.input_ids) > max_length:
        if first + dropped >= final:
            raise TurnError(
                "answer_cannot_fit",
                f"the final exchange needs {len(tokens.input_ids)} tokens with the turns kept, "
                f"more than model.max_length={max_length}: raise it, or shorten the turns",
            )
        dropped += 1
        while first + dropped < final and shown[first + dropped]["role"] == ASSISTANT:
            dropped += 1  # a conversation never starts on the assistant
        kept = shown[:first] + shown[first + dropped :]
        tokens = _tokens(tokenizer, kept, end_id, last_only, with_target)
    return Conversation(
        tokens.input_ids,
        tokens.loss_mask,
        tokens.turns,
        tokens.prompt_len,
        turns_cut=dropped,
        tokens_cut=len(full.input_ids) - len(tokens.input_ids),
    )


def _final_exchange(turns: list[dict], with_target: bool) -> int:
    """Where the final exchange starts: the last user (non-assistant) turn before the answer."""
    i = len(turns) - 1 if with_target else len(turns)
    while i > 0 and turns[i - 1]["role"] == ASSISTANT:
        i -= 1
    return max(i - 1, 0)


def _tokens(tokenizer, turns: list[dict], end_id, last_only: bool, with_target: bool):
    """The turns' tokens: everything before the final answer's content tokenised whole, as a
    server tokenises the rendered conversation it is sent; the final answer apart, as the model
    generates it after that prompt. A tokenizer without offsets tokenises each piece apart."""
    parts = pieces(tokenizer, turns, not with_target)
    last_answer = len(parts) - 1 if with_target else None
    ids, spans = _prompt_tokens(tokenizer, parts)
    mask = [0] * len(ids)
    placed = []
    for i, ((role, _, text), (start, content, end)) in enumerate(zip(parts, spans, strict=True)):
        # an answer the data weighs 0 carries no loss (the generation prompt is no turn)
        weighed = i == len(turns) or turns[i].get("weight", 1) == 1
        if i == last_answer:
            body = _ids(tokenizer, text)
            upto = _through_end(body, end_id) if weighed else 0
            ids, end = ids + body, len(ids) + len(body)
            mask += [1] * upto + [0] * (len(body) - upto)
            placed.append(Turn(role, start, content, end, weighed, int(weighed)))
            continue
        trained = role == ASSISTANT and not last_only and weighed
        if trained:  # an earlier answer, inside the prompt: its content through the end token
            upto = _through_end(ids[content:end], end_id)
            mask[content : content + upto] = [1] * upto
        placed.append(Turn(role, start, content, end, trained, int(weighed)))
    prompt_len = placed[-1].body if with_target else len(ids)
    return Conversation(ids, mask, tuple(placed), prompt_len, 0, 0)


def _prompt_tokens(tokenizer, parts: list[tuple[str, str, str]]):
    """The pieces up to the final answer's content (its header, or the generation prompt) as
    one string's tokens, and each piece's (start, content, end) among them: a token belongs
    to the piece its first character is in (where the header's last character and the body's
    first merge into one token, that token is the header's)."""
    texts = [h + b for _, h, b in parts[:-1]] + [parts[-1][1]]
    if not tokenizer.is_fast:  # no offsets: each piece apart
        ids, spans = [], []
        for (_, header, _), text in zip(parts, texts, strict=True):
            start = len(ids)
            ids += _ids(tokenizer, header)
            content = len(ids)
            ids += _ids(tokenizer, text[len(header) :])
            spans.append((start, content, len(ids)))
        return ids, spans
    out = tokenizer("".join(texts), add_special_tokens=False, return_offsets_mapping=True)
    starts = [a for a, _ in out["offset_mapping"]]
    spans, at = [], 0
    for (_, header, _), text in zip(parts, texts, strict=True):
        bounds = (at, at + len(header), at + len(text))
        spans.append(tuple(bisect_left(starts, c) for c in bounds))
        at += len(text)
    return list(out["input_ids"]), spans


def _through_end(body: list[int], end_id: int | None) -> int:
    """Tokens of an assistant turn's body that carry the loss: its content and the end token
    (what the template writes after the end token does not); all of it without one."""
    if end_id is not None and end_id in body:
        return body.index(end_id) + 1
    return len(body)


def pieces(
    tokenizer: PreTrainedTokenizerBase, turns: list[dict], generation: bool = False
) -> list[tuple[str, str, str]]:
    """Each turn as (role, header text, body text), and with `generation` a last piece, the
    generation prompt (role assistant, header only). A non-assistant turn is all header."""
    out = []
    before = ""
    for i, turn in enumerate(turns):
        text = _chat(tokenizer, turns[: i + 1], False, i)
        if not text.startswith(before):
            raise TurnError(
                "template_rewrites",
                f"the chat template renders turn {i} ({turn['role']}) by changing the turns "
                "before it, so no turn can be masked on its own; use a template that renders "
                "a conversation as a growing prefix",
            )
        if turn["content"].strip() and turn["content"].strip() not in text[len(before) :]:
            fix = (
                "this template has no system turn: fold the system prompt into the first user "
                "turn, or use a model whose template prints one"
                if turn["role"] == "system"
                else "map it to system, user or assistant"
            )
            raise TurnError(
                "unknown_role",
                f"turn {i}'s role {turn['role']!r}: the chat template does not print its "
                f"content (a role it does not know), so it would be left out in silence; {fix}",
            )
        if turn["role"] == ASSISTANT and i > 0:
            opened = _chat(tokenizer, turns[:i], True, i)
            if not (opened.startswith(before) and text.startswith(opened)):
                raise TurnError(
                    "template_rewrites",
                    f"the chat template's generation prompt for turn {i} is not where the "
                    "assistant's turn starts; the answer cannot be masked from its header",
                )
            out.append((turn["role"], opened[len(before) :], text[len(opened) :]))
        else:
            out.append((turn["role"], text[len(before) :], ""))
        before = text
    if generation:
        opened = _chat(tokenizer, turns, True, len(turns))
        out.append((ASSISTANT, opened[len(before) :], ""))
    return out


def _chat(tokenizer, turns: list[dict], generation: bool, i: int) -> str:
    """The turns rendered by the chat template, as role and content (an answer's `weight` is
    the loss's, not the template's)."""
    from jinja2 import TemplateError

    shown = [{"role": t["role"], "content": t["content"]} for t in turns]
    try:
        return tokenizer.apply_chat_template(
            shown, tokenize=False, add_generation_prompt=generation
        )
    except TemplateError as err:  # the template's own raise_exception, or a jinja error in it
        role = turns[-1]["role"] if turns else "-"
        raise TurnError(
            "unknown_role",
            f"the chat template refuses the turns up to turn {i} ({role}): {err}",
        ) from None


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
