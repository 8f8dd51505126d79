"""`tunelab inspect` on conversations: each turn with its loss, where truncation cut, and the
findings only conversations have.

What the trainer sees of a conversation (`modeling/conversation.py`) is checked on its tokens:
the loss must sit on assistant answers alone (a system or user token that carries it is
blocking), every trained answer must end on the end-of-turn token, and a turn the template
cannot render (a role it does not know, a template that rewrites earlier turns, a final
exchange that cannot fit) is blocking too. Dropping the oldest turns to fit is a warning that
states the rule, and so is a system prompt that validation uses and train never shows.
"""

from __future__ import annotations

from collections import Counter

from tunelab.modeling.render import Rendered, Renderer
from tunelab.stages.inspect.findings import finding, row_finding

TRUNCATION_RULE = (
    "the oldest turns are dropped first, whole, after the system turn; never a part of a turn, "
    "never the final answer"
)
REJECTED = {
    "unknown_role": "a turn the chat template does not render",
    "template_rewrites": "the chat template cannot render these turns one by one",
    "answer_cannot_fit": "the final exchange cannot fit",
}


def off_answer(r: Rendered) -> bool:
    """A token outside the trained assistant answers carries the loss."""
    trained = [range(t.body, t.end) for t in r.turns if t.loss]
    return any(m and not any(i in span for span in trained) for i, m in enumerate(r.loss_mask))


def unended(r: Rendered, end_id: int | None) -> bool:
    """A trained answer whose last loss token is not the end-of-turn token."""
    for t in r.turns:
        trained = [i for i in range(t.body, t.end) if r.loss_mask[i]]
        if t.loss and (end_id is None or not trained or r.input_ids[trained[-1]] != end_id):
            return True
    return False


def turn_findings(renderer: Renderer, rendered: list[Rendered], rejected: list[dict]) -> list:
    """The findings of the train split's conversations (besides the shared ones: rows with no
    loss token)."""
    out = []
    for kind, what in REJECTED.items():
        rows = [r for r in rejected if r.get("kind") == kind]
        if rows:
            ids = [r["id"] for r in rows]
            out.append(row_finding(kind, ids, f"{what}: {rows[0]['reason']}"))
    on_text = [r.id for r in rendered if off_answer(r)]
    if on_text:
        out.append(
            row_finding(
                "loss_on_prompt",
                on_text,
                "system or user tokens carry the loss (model.loss_on_prompt)",
            )
        )
    no_end = [r.id for r in rendered if unended(r, renderer.template.end_id)]
    if no_end:
        out.append(
            row_finding(
                "eos_not_trained",
                no_end,
                "an assistant answer's end-of-turn token is not in the loss: the model will not "
                "learn to stop",
            )
        )
    cut = [r for r in rendered if r.turns_cut]
    if cut:
        turns = sum(r.turns_cut for r in cut)
        out.append(
            row_finding(
                "turns_dropped",
                [r.id for r in cut],
                f"{turns} turns dropped to fit model.max_length={renderer.max_length} "
                f"({TRUNCATION_RULE})",
            )
        )
    task = renderer.task
    default = (
        type(task).model_fields["instruction"].default if hasattr(task, "instruction") else None
    )
    if rendered and default is not None and task.instruction != default:
        out.append(
            finding(
                "instruction_unused",
                len(rendered),
                None,
                f"task.instruction ({task.instruction!r}) is not used: a conversation's own turns "
                "are its prompt; put the instruction in a system or user turn of the data",
            )
        )
    return out


def system_prompts(rows: list[dict]) -> Counter:
    """How often each system prompt opens the rows' conversations ('' for none)."""
    return Counter(
        r["messages"][0]["content"] if r["messages"][0]["role"] == "system" else ""
        for r in rows
        if r.get("messages")
    )


def system_prompt_finding(train: list[dict], validation: list[dict]) -> list[dict]:
    """A warning when validation opens with system prompts that train never shows."""
    seen = system_prompts(train)
    unseen = {p: n for p, n in system_prompts(validation).items() if p not in seen}
    if not unseen:
        return []
    prompt, _ = max(unseen.items(), key=lambda kv: kv[1])
    shown = repr(prompt[:60]) if prompt else "no system prompt"
    return [
        finding(
            "system_prompt_differs",
            sum(unseen.values()),
            shown,
            "validation conversations open with a system prompt train never shows: the "
            "evaluation measures a prompt the model was not trained under",
        )
    ]


def turn_view(renderer: Renderer, r: Rendered, tokens: list[dict]) -> dict:
    """An example as the trainer sees it: its tokens, and each turn's span and loss."""
    first = r.turns[0]
    kept_from = r.turns[1].start if first.role == "system" and len(r.turns) > 1 else first.start
    return {
        "id": r.id,
        "category": r.category,
        "tokens": tokens,
        "turns": [
            {
                "role": t.role,
                "tokens": t.end - t.start,
                "loss_tokens": sum(r.loss_mask[t.start : t.end]),
            }
            | ({"weight": 0} if t.weight == 0 else {})
            for t in r.turns
        ],
        "prompt_tokens": r.prompt_len,
        "turns_cut": r.turns_cut,
        "text_cut": r.text_cut,
        "cut_at": kept_from if r.turns_cut else None,
        "truncation_rule": TRUNCATION_RULE,
        "eos_trained": r.teaches and not unended(r, renderer.template.end_id),  # no loss: no
        "target": r.target_text,
    }
