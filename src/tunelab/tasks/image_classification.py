"""Image classification: the metrics and guardrail groups of text classification, on images.

An example is an image and one label (`tunelab.data.images` reads and hashes it); a prediction
is a label, scored exactly as `classification` scores one, so the hypothesis and guardrails
name the same metrics (accuracy, macro_f1; per class f1, precision, recall). The model side is
`modeling.image_model` and `modeling.pixels`.
"""

from __future__ import annotations

from tunelab.tasks.classification import (
    class_metrics,
    default_metric,
    evaluation_imports,
    group_key,
    group_scope,
    lower_is_better,
    metrics,
    overall_metrics,
)

name = "image_classification"

__all__ = [
    "class_metrics",
    "default_metric",
    "evaluation_imports",
    "group_key",
    "group_scope",
    "lower_is_better",
    "metrics",
    "name",
    "overall_metrics",
]
