"""Task types: target rendering, metrics and guardrail values; a small registry by name.

Each task module names its metrics (`overall_metrics` for the primary metric and `overall`
guardrails, `class_metrics` for the per-class or per-field guardrail scope `group_scope`,
found under `group_key` in its metrics). The functions below are the only place that knows
how each task turns an example into a target text and scores its predictions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from tunelab.core.errors import TunelabError
from tunelab.core.spec_paths import spec_path
from tunelab.tasks import classification, extraction, image_classification, multilabel, pretrain
from tunelab.tasks import format as format_task


class Task(Protocol):
    name: str
    overall_metrics: frozenset[str]
    class_metrics: frozenset[str]
    default_metric: str
    group_scope: str | None
    group_key: str | None
    lower_is_better: frozenset[str]
    """Metrics where less is better (`compare` reports their reductions as gains)."""
    evaluation_imports: tuple[str, ...]
    """Modules its scoring imports when it first runs (lazily, so commands start light): a
    `size` probe imports them before it reads the framework's memory, as a run has by its end
    (sklearn.metrics: 100 MiB of a classifier's process, which a run peaked that far above)."""


TASKS: dict[str, Task] = {
    "classification": classification,
    "multilabel": multilabel,
    "image_classification": image_classification,
    "extraction": extraction,
    "format": format_task,
    "pretrain": pretrain,
}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise TunelabError(f"unknown task type {name!r}; known: {sorted(TASKS)}") from None


def load_schema(task_spec: Any, lab: Path) -> dict | None:
    """The task's JSON Schema: inline in the spec, or a .json file relative to the lab;
    checked against its metaschema, so a schema that is not one fails before any generation."""
    from tunelab.tasks.jsonout import compile_schema

    schema = getattr(task_spec, "json_schema", None)
    if schema is None:
        return None
    where = "task.json_schema"
    if not isinstance(schema, dict):
        path = spec_path(lab, schema)
        if not path.exists():
            raise TunelabError(f"task.json_schema: {schema!r} not found (looked at {path})")
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise TunelabError(f"task.json_schema: {path} is not valid JSON: {err}") from None
        where = f"task.json_schema ({path})"
    try:
        compile_schema(schema)
    except TunelabError as err:
        raise TunelabError(f"{where}: {err}; fix the schema") from None
    if getattr(task_spec, "type", None) == "extraction":
        _required_in(task_spec.required, schema, where)
    return schema


def _required_in(required: list[str], schema: dict, where: str) -> None:
    """Refuse a `task.required` field no answer could hold, where every row's target had been
    blamed for it: a dotted path into an object the schema's properties name, or a key the
    schema forbids (`additionalProperties: false`, no `patternProperties` matching it, no
    `allOf`/`anyOf`/`oneOf` that could add it). A key the schema allows without naming it is
    the user's to require."""
    root = extraction.followed(schema, schema)
    props = root.get("properties")
    if not isinstance(props, dict) or not props:
        return
    patterns = root.get("patternProperties") or {}
    combined = any(k in root for k in ("allOf", "anyOf", "oneOf"))
    for name in required:
        if name in props or any(_matches(p, name) for p in patterns):
            continue
        head = name.split(".")[0]
        if "." in name and head in props:
            raise TunelabError(
                f"task.required: {name!r} is a path into `{head}`: task.required names the "
                f"answer's top-level keys, each scored whole (`{head}` is exact when all of it "
                f"is); write {head!r}"
            )
        if root.get("additionalProperties") is False and not combined:
            raise TunelabError(
                f"task.required: {name!r} is not among the properties of {where} "
                f"({', '.join(props)}), and its additionalProperties: false forbids any other "
                "key, so no answer could hold it; add it to the schema's properties, or take it "
                "out of task.required"
            )


def _matches(pattern: str, name: str) -> bool:
    """Whether a `patternProperties` pattern admits `name`; one Python cannot read (JSON Schema's
    patterns are ECMA's) is taken to admit it: the check refuses only what it is sure of."""
    import re

    try:
        return re.search(pattern, name) is not None
    except re.error:
        return True


def target_text(task_spec: Any, schema: dict | None, example: dict) -> str:
    """What the model is trained to answer for one example."""
    if task_spec.type == "extraction":
        return extraction.render_target(example["target"], schema)
    if task_spec.type == "format":
        return format_task.render_target(example["target"])
    return example["label"]  # classification by a causal LM: the label's own text


def score_outputs(task_spec: Any, schema: dict | None, predictions: list[dict]) -> dict:
    """Score generated outputs in place (each prediction gains `score`); return the metrics."""
    for p in predictions:
        if task_spec.type == "extraction":
            p["score"] = extraction.score_example(
                p["output"], p["target"], schema, task_spec.required
            )
        else:
            p["score"] = format_task.score_example(
                p["output"], p["target"], schema, task_spec.regex
            )
    return metrics_of(task_spec, predictions, [])


def score(task_name: str, predictions: list[dict], labels: list[str]) -> dict:
    """Classification metrics of per-example predictions, by the task's own definitions."""
    gold = [p["gold"] for p in predictions]
    return get_task(task_name).metrics(gold, [p["predicted"] for p in predictions], labels)


def metrics_of(task_spec: Any, predictions: list[dict], labels: list[str]) -> dict:
    """The task's metrics of predictions already made (a generative task's scored in place by
    `score_outputs`): what the evaluation returned for them, and the same for any subset."""
    if task_spec.type == "extraction":
        return extraction.metrics([p["score"] for p in predictions], task_spec.required)
    if task_spec.type == "format":
        return format_task.metrics([p["score"] for p in predictions])
    if task_spec.type == "pretrain":
        return pretrain.metrics(predictions)
    return score(task_spec.type, predictions, labels)
