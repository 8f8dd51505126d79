"""`tasks.metrics_of`: the metrics of predictions already made, the evaluation's own for all of
them (so that `final` can score the test rows without a copy in validation the same way)."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.spec import validate_spec
from tunelab.tasks import metrics_of, score, score_outputs
from tunelab.tasks.multilabel import score_probabilities

BASE = {"data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]}, "model": {"path": "m"}}
LABELS = ["a", "b", "c"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def task(**raw):
    return validate_spec({**BASE, "task": raw}).task


def test_classification_and_multilabel_as_their_evaluation_scores_them():
    predictions = [
        {"id": str(i), "gold": g, "predicted": p}
        for i, (g, p) in enumerate(zip("aabbcca", "abbbcaa", strict=True))
    ]
    assert metrics_of(task(type="classification"), predictions, LABELS) == score(
        "classification", predictions, LABELS
    )
    rng = np.random.default_rng(0)
    gold = [sorted(set(rng.choice(LABELS, 2))) for _ in range(20)]
    made, metrics = score_probabilities(
        [str(i) for i in range(20)], gold, rng.random((20, 3)), LABELS, 0.5
    )
    again = metrics_of(task(type="multilabel"), made, LABELS)
    for name in ("micro_f1", "macro_f1", "subset_accuracy"):
        assert again[name] == pytest.approx(metrics[name]), name


@pytest.mark.parametrize(
    ("spec", "outputs"),
    [
        (
            {"type": "extraction", "required": ["name"], "json_schema": SCHEMA},
            ['{"name": "x"}', '{"name": "y"}', "not json", '{"other": 1}'],
        ),
        (
            {"type": "format", "regex": "ANSWER: \\d+"},
            ["ANSWER: 1", "ANSWER: 3", "no", "ANSWER: 4"],
        ),
    ],
)
def test_generative_outputs_as_score_outputs_scored_them(spec, outputs):
    targets = [{"name": "x"}, {"name": "x"}, {"name": "z"}, {"name": "w"}]
    if spec["type"] == "format":
        targets = ["ANSWER: 1", "ANSWER: 2", "ANSWER: 3", "ANSWER: 4"]
    the_task = task(**spec)
    predictions = [
        {"id": str(i), "target": t, "output": o}
        for i, (t, o) in enumerate(zip(targets, outputs, strict=True))
    ]
    schema = spec.get("json_schema")
    metrics = score_outputs(the_task, schema, predictions)  # scores each prediction in place
    assert metrics_of(the_task, predictions, []) == metrics
    counted = (  # by hand: which outputs parse, and which are the answer
        {"json_valid": 0.75, "exact_match": 0.25}
        if spec["type"] == "extraction"
        else {"format_valid": 0.75, "exact_match": 0.5}
    )
    assert {k: metrics[k] for k in counted} == counted
    assert metrics_of(the_task, predictions[:2], []) != metrics  # a subset: its own rows
