"""`tunelab inspect`'s format findings on generative rows: targets the task's own schema or
regex refuses (blocking: training would teach answers the metric counts invalid), and a
conversation's earlier assistant turns that carry the loss in a form the format refuses (a
warning: an earlier turn may be meant to be free text)."""

from __future__ import annotations

from tunelab.modeling.render import Renderer
from tunelab.stages.inspect.findings import row_finding


def format_findings(renderer: Renderer, rows: list[dict]) -> list[dict]:
    """Targets that the task's own schema or regex refuses (or that scoring cannot read): the
    model would learn answers its metric counts invalid."""
    from tunelab.tasks.targets import has_targets, off_format, row_name, unscorable

    task, schema = renderer.task, renderer.schema
    if not has_targets(task):
        return []
    bad = []
    for row in rows:
        why = unscorable(task, row.get("target")) or off_format(task, schema, row.get("target"))
        if why:
            bad.append((row, why))
    rule = "task.regex" if getattr(task, "regex", None) else "task.json_schema"
    if task.type == "extraction":  # a field task.required names may be optional in the schema
        rule = "task.json_schema or task.required"
    out = _earlier_answers(renderer, rows, rule)
    if not bad:
        return out
    row, why = bad[0]
    return [
        row_finding(
            "target_not_in_format",
            [r["id"] for r, _ in bad],
            f"targets that {rule} refuses, so training teaches answers the metric counts "
            f"invalid (e.g. {row_name(row)}: {why}); fix the rows or the format",
        ),
        *out,
    ]


def _earlier_answers(renderer: Renderer, rows: list[dict], rule: str) -> list[dict]:
    """Conversations whose earlier assistant turns carry the loss (`model.loss_on_turns: all`,
    weight not 0) in a form the task's format refuses: the model learns them beside the final
    answers the metric scores. A warning: an earlier turn may be meant to be free text."""
    from tunelab.data.conversations import target_or_why
    from tunelab.tasks.targets import off_format, row_name

    if renderer.last_turn_only:
        return []
    task, schema, bad = renderer.task, renderer.schema, []
    for row in rows:
        turns = row.get("messages") or []
        for i, turn in enumerate(turns[:-1]):
            if turn["role"] != "assistant" or turn.get("weight") == 0:
                continue
            target, why = target_or_why(turn["content"], task.type)
            if target is None:
                why = f"not a JSON object ({why})"
            else:
                why = off_format(task, schema, target)
            if why and _kept(renderer, row, i):
                bad.append((row, i, why))
                break
    if not bad:
        return []
    row, i, why = bad[0]
    return [
        row_finding(
            "earlier_answer_not_in_format",
            [r["id"] for r, _, _ in bad],
            f"conversations whose earlier assistant turns carry the loss in a form {rule} "
            f"refuses (e.g. {row_name(row)}, turn {i}: {why}); the model learns them beside "
            "the answers the metric scores. If only the last answer should teach, set "
            "model.loss_on_turns: last, or weight 0 on those turns",
        )
    ]


def _kept(renderer: Renderer, row: dict, i: int) -> bool:
    """Whether turn `i` of a conversation is still there once the oldest turns after the
    system's are dropped to fit `model.max_length` (a dropped answer teaches nothing)."""
    first = 1 if row["messages"][0]["role"] == "system" else 0
    return not first <= i < first + renderer.render(row).turns_cut
