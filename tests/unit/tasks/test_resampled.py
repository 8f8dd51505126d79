"""`tasks.resampled.score_interval`: one run's score with its interval over its examples (what
`final` reports on the test split)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tunelab.core.spec import validate_spec
from tunelab.tasks import metrics_of, score_outputs
from tunelab.tasks.resampled import _resampled, score_interval

BASE = {"data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]}, "model": {"path": "m"}}
LABELS = ["a", "b", "c"]


def task(**raw):
    return validate_spec({**BASE, "task": raw}).task


def classified(n: int, right: float, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    gold = rng.choice(LABELS, n)
    wrong = rng.choice(LABELS, n)
    keep = rng.random(n) < right
    return [
        {"id": str(i), "gold": g, "predicted": g if k else w}
        for i, (g, w, k) in enumerate(zip(gold, wrong, keep, strict=True))
    ]


@pytest.mark.parametrize("metric", ["accuracy", "macro_f1"])
def test_the_fast_classification_path_scores_each_resample_as_the_task_does(metric):
    predictions = classified(40, 0.7)
    idx = np.random.default_rng(3).integers(0, 40, size=(25, 40))
    fast = _resampled(task(type="classification"), predictions, LABELS, metric, idx)
    slow = [
        metrics_of(task(type="classification"), [predictions[i] for i in row], LABELS)[metric]
        for row in idx
    ]
    assert fast == pytest.approx(slow)


def test_macro_f1_counts_a_label_without_validation_examples_as_sklearn_does():
    """A label no example holds scores F1 0 (sklearn's zero_division=0) in the task's macro-F1
    and in compare's vectorised copy alike: neither was pinned where they could disagree."""
    from sklearn.metrics import f1_score

    gold = ["a", "b"] * 10  # "c" neither held nor predicted: its F1 undefined, read 0
    predicted = ["a", "b"] * 8 + ["b", "b", "a", "a"]
    predictions = [
        {"id": str(i), "gold": g, "predicted": p}
        for i, (g, p) in enumerate(zip(gold, predicted, strict=True))
    ]
    expected = f1_score(gold, predicted, labels=LABELS, average="macro", zero_division=0)
    spec = task(type="classification")
    assert metrics_of(spec, predictions, LABELS)["macro_f1"] == pytest.approx(expected)
    whole = np.arange(len(predictions))[None]
    assert _resampled(spec, predictions, LABELS, "macro_f1", whole)[0] == pytest.approx(expected)
    assert expected < 2 / 3  # the absent label's 0 is in the mean


def test_the_interval_holds_the_score_and_narrows_with_more_examples():
    spec = task(type="classification")
    small, large = classified(50, 0.8), classified(2000, 0.8)
    widths = []
    for predictions in (small, large):
        value = metrics_of(spec, predictions, LABELS)["macro_f1"]
        interval = score_interval(spec, predictions, LABELS, "macro_f1")
        assert interval["low"] < value < interval["high"]
        assert (interval["metric"], interval["n"], interval["level"]) == (
            "macro_f1",
            len(predictions),
            0.95,
        )
        widths.append(interval["high"] - interval["low"])
    # a binomial share's interval shrinks as 1/sqrt(n): 40 times the examples, about 1/6.3
    assert widths[1] < widths[0] / 4
    assert score_interval(spec, small[:1], LABELS, "macro_f1") is None


def test_a_generative_score_is_resampled_by_its_own_metrics():
    spec = task(type="format", regex=r"\d+")
    predictions = [
        {"id": str(i), "output": str(i) if i % 4 else "no", "target": str(i)} for i in range(80)
    ]
    exact = score_outputs(spec, None, predictions)["exact_match"]
    assert exact == pytest.approx(0.75)
    interval = score_interval(spec, predictions, [], "exact_match", resamples=400)
    # the normal approximation of a share of 0.75 over 80: +-1.96 * sqrt(.75 * .25 / 80) = 0.095
    assert interval["low"] == pytest.approx(0.75 - 0.095, abs=0.03)
    assert interval["high"] == pytest.approx(0.75 + 0.095, abs=0.03)


def test_a_metric_that_is_no_share_takes_the_percentiles_of_its_own_resamples():
    """A macro-F1 interval labelled 95% could be a 90% one, and a field accuracy (a mean of
    partial credits) scored its unresampled predictions on every row (zero width): the test
    meant for that branch scored exact_match, which takes the exact binomial interval."""
    spec = task(type="classification")
    predictions = classified(60, 0.7)
    interval = score_interval(spec, predictions, LABELS, "macro_f1", resamples=500, seed=4)
    idx = np.random.default_rng(4).integers(0, 60, size=(500, 60))
    values = _resampled(spec, predictions, LABELS, "macro_f1", idx)
    assert interval["low"] == pytest.approx(np.quantile(values, 0.025))
    assert interval["high"] == pytest.approx(np.quantile(values, 0.975))
    extraction = task(
        type="extraction",
        json_schema={"type": "object", "properties": {"a": {}, "b": {}}},
        required=["a", "b"],
    )
    pages = [  # half the pages with one field of two right: a partial credit of 0.5
        {"id": str(i), "output": json.dumps({"a": 1, "b": i % 2}), "target": {"a": 1, "b": 1}}
        for i in range(40)
    ]
    scored = score_outputs(extraction, None, pages)
    assert scored["field_accuracy"] == pytest.approx(0.75)
    interval = score_interval(extraction, pages, [], "field_accuracy", resamples=400)
    assert "method" not in interval  # not the exact binomial one: a mean of partial credits
    assert interval["low"] < 0.75 < interval["high"] and interval["high"] - interval["low"] > 0.05


@pytest.mark.parametrize(("right", "low", "high"), [(0.0, 0.0, 0.206), (1.0, 0.794, 1.0)])
def test_a_score_every_example_agrees_on_still_has_an_interval(right, low, high):
    """0 of 16 exact matches read "0.0% to 0.0%": every resample scores the same, so the
    percentile interval said the score could not move. The exact binomial bound (at 97.5%,
    1 - 0.025^(1/16) = 20.6%) says how many could go the other way unseen."""
    spec = task(type="format", regex=r"\d+")
    predictions = [
        {"id": str(i), "output": str(i) if right else "no", "target": str(i)} for i in range(16)
    ]
    assert score_outputs(spec, None, predictions)["exact_match"] == right
    interval = score_interval(spec, predictions, [], "exact_match", resamples=200)
    assert (interval["low"], interval["high"]) == pytest.approx((low, high), abs=5e-4)
    assert interval["unseen"] == {"examples": 16}
    assert "exact binomial" in interval["counts"]
    mixed = [*predictions[:15], {"id": "x", "output": "no" if right else "1", "target": "1"}]
    score_outputs(spec, None, mixed)  # one example goes the other way
    assert "unseen" not in score_interval(spec, mixed, [], "exact_match", resamples=200)


def test_a_share_right_takes_the_exact_binomial_interval_which_moves_with_the_count():
    """15 of 16 read 81.3% to 100% on the percentile bootstrap: a higher low end than 16 of
    16's exact 79.4%, and it covered about 86% at some rates where it said 95%. A share of
    examples right takes the Clopper-Pearson interval of its count (scipy's binomtest)."""
    spec = task(type="classification")
    lows = []
    for right in (16, 15, 14):
        predictions = [
            {"id": str(i), "gold": "a", "predicted": "a" if i < right else "b"} for i in range(16)
        ]
        interval = score_interval(spec, predictions, LABELS, "accuracy")
        assert interval["right"] == right and interval["method"].startswith("exact binomial")
        lows.append(interval["low"])
        if right == 15:
            assert (interval["low"], interval["high"]) == pytest.approx((0.6977, 0.9984), abs=1e-4)
    assert lows == sorted(lows, reverse=True)  # one error more, never a higher low end
    f1 = score_interval(spec, classified(50, 0.8), LABELS, "macro_f1")
    assert "right" not in f1 and f1["resamples"] == 2000  # not a share: the bootstrap


def test_the_final_view_says_where_the_bound_comes_from():
    import io

    from rich.console import Console

    from tunelab.views.final import _interval_line

    spec = task(type="format", regex=r"\d+")
    predictions = [{"id": str(i), "output": "no", "target": str(i)} for i in range(16)]
    score_outputs(spec, None, predictions)
    out = io.StringIO()
    Console(file=out, width=300).print(
        _interval_line(score_interval(spec, predictions, [], "exact_match", resamples=50))
    )
    assert out.getvalue().strip() == (
        "exact match 95% interval 0.0% to 20.6% over the 16 test examples (their noise, not the "
        "seeds'; every one scored alike, so the exact binomial bound)"
    )
