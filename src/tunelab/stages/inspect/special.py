"""`tunelab inspect`'s findings on text that spells the tokenizer's special tokens.

The tokenizer reads `<|im_end|>` written in a row's text as the control token itself, not as
the characters: in an answer it is trained as the end of the answer mid-way (generation then
stops there, so that row can never be scored right, and the model learns to stop early;
blocking), in a prompt it forges the template's structure, a turn or a system block that the
row does not have (a warning: a row about chat templates may mean it). Only the tokens the
tokenizer marks special count; an added token that is not special is text like any other.
"""

from __future__ import annotations

from tunelab.modeling.render import Renderer
from tunelab.stages.inspect.findings import row_finding


def special_strings(tokenizer) -> list[str]:
    """The special tokens' texts, longest first (so `<|im_end|>` is named, not `<|`)."""
    found = set(tokenizer.all_special_tokens)
    found |= {t.content for t in tokenizer.added_tokens_decoder.values() if t.special}
    return sorted((s for s in found if s), key=len, reverse=True)


def special_text_findings(renderer: Renderer, rows: list[dict]) -> list[dict]:
    """Rows whose answers (blocking) or prompts (a warning) spell a special token."""
    specials = special_strings(renderer.tokenizer)
    if not specials:
        return []
    found: dict[bool, list[tuple[str, str, str]]] = {True: [], False: []}
    for row in rows:
        hits = {}  # the first hit of each kind: a row is counted once
        for trained, where, text in _texts(renderer, row):
            token = next((s for s in specials if s in text), None)
            if token is not None:
                hits.setdefault(trained, (row["id"], where, token))
        for trained, hit in hits.items():
            found[trained].append(hit)
    out = []
    for trained, (code, what, why) in WHY.items():
        if found[trained]:
            rid, where, token = found[trained][0]
            said = f"{what} whose text spells a special token (e.g. {rid}, {where}: {token!r}): "
            ids = [hit[0] for hit in found[trained]]
            out.append(row_finding(code, ids, said + why))
    return out


WHY = {
    True: (
        "special_token_in_answer",
        "answers",
        "the tokenizer reads it as that token, so the model is trained to end or restructure "
        "the answer there and generation stops at it; rewrite those strings in the data (or "
        "drop the rows) and run `tunelab data` again",
    ),
    False: (
        "special_token_in_prompt",
        "prompts",
        "the tokenizer reads it as that token, so the model sees template structure (an end of "
        "turn, a new turn) that the row does not have",
    ),
}
"""Per side (trained: an answer), the finding's code, what it names and what it does."""


def _texts(renderer: Renderer, row: dict) -> list[tuple[bool, str, str]]:
    """(trained, where, text) of each piece of a row the tokenizer reads: a conversation's turns
    (an assistant turn is trained unless its weight is 0 or only the last turn teaches), else
    the prompt and the answer."""
    from tunelab.tasks import target_text

    turns = row.get("messages")
    if turns is None:
        prompt = [(False, "the prompt", row.get("text") or "")]
        if row.get("target") is None and not row.get("label"):
            return prompt
        return [*prompt, (True, "the answer", target_text(renderer.task, renderer.schema, row))]
    last = len(turns) - 1
    out = []
    for i, turn in enumerate(turns):
        trained = turn["role"] == "assistant" and turn.get("weight") != 0
        trained = trained and (i == last or not renderer.last_turn_only)
        out.append((trained, f"turn {i} ({turn['role']})", str(turn.get("content") or "")))
    return out
