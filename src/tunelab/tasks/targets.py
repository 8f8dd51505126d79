"""A generative lab's own answers, checked against its task before a model is spent on them.

Scoring reads each row's target: extraction compares the required fields of a JSON object, a
format lab's schema mode parses its target as JSON. A target without them stops the scoring,
after the generation (or the training) before it has run; `require_scorable` finds such
validation rows first, and a schema that is not one (a regex that does not compile is refused
with the spec, at its line). A target that the task's own format refuses (`off_format`) is an
answer the metric counts invalid: a validation one is refused with the unscorable ones (a
perfect model would lose on it), a train one (or a train target that could not be scored)
teaches such answers: `tunelab inspect` and `run` find those.
"""

from __future__ import annotations

from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.tasks import extraction, load_schema
from tunelab.tasks import format as format_task
from tunelab.tasks.jsonout import NotJSONError, parse_json

SHOWN = 3
"""Rows named in a refusal; the count covers the rest."""


def has_targets(task_spec: Any) -> bool:
    """The tasks whose rows carry an answer scored against the task's format."""
    return task_spec.type in ("extraction", "format")


def unscorable(task_spec: Any, target: Any) -> str | None:
    """Why scoring cannot read `target` at all, or None."""
    if task_spec.type == "extraction":
        if not isinstance(target, dict):
            return f"is not a JSON object (got {type(target).__name__})"
        missing = [f for f in task_spec.required if f not in target]
        if missing:
            return f"lacks the required field(s) {', '.join(missing)} (task.required)"
    elif task_spec.type == "format" and task_spec.json_schema and isinstance(target, str):
        try:  # a string target is the JSON text the model learns (any other is a value)
            parse_json(target)
        except NotJSONError as err:
            return f"is not the JSON that task.json_schema asks for ({err})"
    return None


def off_format(task_spec: Any, schema: dict | None, target: Any) -> str | None:
    """Why the task's own format refuses a scorable `target` as an answer, or None."""
    if task_spec.type == "extraction":
        text = extraction.render_target(target, schema)
        score = extraction.score_example(text, target, schema, task_spec.required)
        return None if score["schema_valid"] else score["error"]
    text = format_task.render_target(target)
    score = format_task.score_example(text, target, schema, task_spec.regex)
    return None if score["format_valid"] else score["error"]


def refuse_unscorable(task_spec: Any, rows: list[dict], split: str) -> None:
    """Refuse `rows` of `split` when any target cannot be scored, naming the first few."""
    bad = [(r, why) for r in rows if (why := unscorable(task_spec, r.get("target")))]
    _refuse(bad, split, "that scoring cannot read", "Fix those rows (or the task's fields)")


def refuse_off_format(task_spec: Any, schema: dict | None, rows: list[dict], split: str) -> None:
    """Refuse `rows` of `split` when the task's own format refuses a (scorable) target: an
    answer equal to it would be counted invalid, and the format's rate could never reach 100%."""
    bad = [(r, why) for r in rows if (why := off_format(task_spec, schema, r.get("target")))]
    rule = "task.regex" if getattr(task_spec, "regex", None) else "task.json_schema"
    _refuse(
        bad,
        split,
        f"that {rule} refuses, so an answer equal to it would be counted invalid",
        "Fix those rows or the format",
    )


def _refuse(bad: list[tuple[dict, str]], split: str, what: str, fix: str) -> None:
    if not bad:
        return
    named = "; ".join(f"{row_name(r)}: target {why}" for r, why in bad[:SHOWN])
    more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    raise TunelabError(
        f"{len(bad)} {split} row(s) have a target {what}: {named}{more}. "
        f"{fix} and run `tunelab data` again."
    )


def row_name(row: dict) -> str:
    """A row's id, with the file and line it came from when the id is not already those."""
    origin = row.get("origin")
    return row["id"] if origin in (None, row["id"]) else f"{row['id']} ({origin})"


def require_scorable(lab) -> None:
    """A generative lab's format, and its validation targets, can be scored, each one an answer
    the format accepts (train targets are trained on, not scored: a bad one is `tunelab
    inspect`'s `target_not_in_format`)."""
    task = lab.spec.task
    if not has_targets(task):
        return
    schema = load_schema(task, lab.path)  # checked; the spec compiled the regex already
    rows = lab.store.read_split(lab.data_version, "validation")
    refuse_unscorable(task, rows, "validation")
    refuse_off_format(task, schema, rows, "validation")
