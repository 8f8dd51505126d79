"""Task image_classification: a valid task with classification's metrics and guardrail groups,
and refused by the commands that load a model until image models are there."""

from __future__ import annotations

import pytest

from tunelab.core.spec import SpecError, validate_spec
from tunelab.tasks import classification, get_task, image_classification

PLAN = {
    "hypothesis": {"behaviour": "tell cats", "metric": "macro_f1", "min_effect": 0.02},
    "guardrails": [{"metric": "recall", "scope": "every_class", "max_drop": 0.05}],
}


def image_spec(task: dict | None = None, **sections) -> object:
    return validate_spec(
        {
            "task": {"type": "image_classification", **(task or {})},
            "data": {"sources": [{"type": "image_folder", "path": "pics"}]},
            "model": {"path": "x"},
            **sections,
        }
    )


def test_the_task_is_registered_with_classifications_metrics() -> None:
    task = get_task("image_classification")
    assert task is image_classification and task.name == "image_classification"
    for name in ("overall_metrics", "class_metrics", "default_metric", "group_scope", "group_key"):
        assert getattr(task, name) == getattr(classification, name)
    assert task.lower_is_better == frozenset()
    scored = task.metrics(["cat", "dog", "cat"], ["cat", "cat", "cat"], ["cat", "dog"])
    assert scored == classification.metrics(
        ["cat", "dog", "cat"], ["cat", "cat", "cat"], ["cat", "dog"]
    )
    assert scored["accuracy"] == pytest.approx(2 / 3)


def test_labels_are_optional_and_kept_in_order_when_given() -> None:
    assert image_spec().task.labels is None
    spec = image_spec({"labels": ["dog", "cat"]}, **PLAN)
    assert spec.task.labels == ["dog", "cat"]
    assert spec.images and spec.model_kind == "image"
    assert spec.data.images.max_pixels == 50_000_000
    assert spec.data.dedup.image_hamming == 6
    assert spec.data.fields.image == "image"
    assert not validate_spec(
        {"data": {"sources": [{"type": "jsonl", "path": "x"}]}, "model": {"path": "x"}}
    ).images


def test_the_plan_names_classification_metrics_and_scopes() -> None:
    with pytest.raises(SpecError, match="not a metric of task image_classification"):
        image_spec(hypothesis={"behaviour": "b", "metric": "exact_match", "min_effect": 0.1})
    with pytest.raises(SpecError, match="every_field"):
        image_spec(guardrails=[{"metric": "f1", "scope": "every_field", "max_drop": 0.1}])


def test_image_settings_are_checked_where_they_are_defined() -> None:
    with pytest.raises(SpecError, match=r"data\.images\.max_pixels"):
        validate_spec(
            {
                "task": {"type": "image_classification"},
                "data": {
                    "sources": [{"type": "image_folder", "path": "p"}],
                    "images": {"max_pixels": 0},
                },
                "model": {"path": "x"},
            }
        )
    with pytest.raises(SpecError, match=r"data\.dedup\.image_hamming"):
        validate_spec(
            {
                "task": {"type": "image_classification"},
                "data": {
                    "sources": [{"type": "image_folder", "path": "p"}],
                    "dedup": {"image_hamming": 65},
                },
                "model": {"path": "x"},
            }
        )


def test_size_refuses_an_image_lab_and_says_what_to_use_instead() -> None:
    with pytest.raises(SpecError) as err:
        image_spec(**PLAN).require_sizable()
    words = str(err.value)
    assert "image_classification" in words and "tunelab check" in words
    assert image_spec(**PLAN).model_kind == "image"
    text = validate_spec(
        {"data": {"sources": [{"type": "jsonl", "path": "x"}]}, "model": {"path": "x"}}
    )
    text.require_sizable()  # a text lab goes on


def test_an_image_lab_takes_no_text_model_kind() -> None:
    with pytest.raises(SpecError, match=r"model\.kind"):
        image_spec(**PLAN, model={"path": "x", "kind": "encoder"})
