"""Metrics over resampled examples: the classification metrics of many index rows at once
(what `compare`'s paired bootstrap resamples), and one run's score with its interval (what
`final` reports on the test split).

A row is one resample: `gold` and `pred` shaped (resamples, n) hold label indices, so a metric
of 2,000 resamples is a few array operations instead of 2,000 calls to scikit-learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

RESAMPLES = 2000
"""Resamples of a percentile bootstrap (the same count `compare` draws)."""

UNSEEN_TAIL = 0.025
"""The one-sided tail of the exact bound, the lower tail of the two-sided 95% interval."""


def unseen_share(n: int, tail: float = UNSEEN_TAIL) -> float:
    """The largest share of `n` examples that could go the other way, at 1 - `tail`, when
    none of them did (exact binomial: (1 - p)^n = tail): 60% for 4, about 3.7/n for many."""
    return 1 - tail ** (1 / n)


def worse_share(worse: int, n: int, tail: float = UNSEEN_TAIL) -> float:
    """The largest share of a group that could get worse, at 1 - `tail`, when `worse` of its
    `n` examples did (the exact binomial, Clopper-Pearson, upper bound); `unseen_share` at 0."""
    if worse == 0:
        return unseen_share(n, tail)
    if worse >= n:
        return 1.0
    from scipy.stats import beta  # scipy.stats takes most of a second to import

    return float(beta.ppf(1 - tail, worse + 1, n - worse))


def accuracy_rows(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Accuracy of each row of index arrays shaped (resamples, n)."""
    return (gold == pred).mean(axis=-1)


def class_metric_rows(gold: np.ndarray, pred: np.ndarray, k: int, metric: str) -> np.ndarray:
    """Class k's F1, precision or recall per row (0 where undefined, as sklearn does)."""
    gold, pred = np.atleast_2d(gold), np.atleast_2d(pred)
    tp = ((gold == k) & (pred == k)).sum(-1)
    fp = ((gold != k) & (pred == k)).sum(-1)
    fn = ((gold == k) & (pred != k)).sum(-1)
    if metric == "f1":
        num, denom = 2 * tp, 2 * tp + fp + fn
    elif metric == "precision":
        num, denom = tp, tp + fp
    else:  # recall
        num, denom = tp, tp + fn
    return np.where(denom > 0, num / np.maximum(denom, 1), 0.0)


def macro_f1_rows(gold: np.ndarray, pred: np.ndarray, n_labels: int) -> np.ndarray:
    """Macro-F1 (labels with no gold and no predictions count 0, as sklearn does) per row."""
    return np.mean([class_metric_rows(gold, pred, k, "f1") for k in range(n_labels)], axis=0)


def score_interval(
    task_spec: Any,
    predictions: list[dict],
    labels: list[str],
    metric: str,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict | None:
    """The interval of one run's `metric` over its examples: how far the score could move on
    another sample of the same size from the same source. A share of examples right (accuracy,
    exact match, JSON validity) takes the exact binomial (Clopper-Pearson) interval of its
    count; any other metric a percentile bootstrap. It counts the examples' noise only, not the
    seeds'. None for fewer than two examples."""
    n = len(predictions)
    if n < 2:
        return None
    right = share_count(task_spec, predictions, labels, metric)
    if right is not None:
        return _exact(metric, right, n, level)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    values = _resampled(task_spec, predictions, labels, metric, idx)
    tail = (1 - level) / 2
    low, high = float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))
    out = {
        "metric": metric,
        "low": low,
        "high": high,
        "level": level,
        "resamples": resamples,
        "seed": seed,
        "n": n,
        "counts": "the examples' noise (a percentile bootstrap over them), not the seeds'",
    }
    if low == high and low in (0.0, 1.0) and task_spec.type != "pretrain":
        # every example right (or every one wrong): each resample scores the same, and the
        # percentile interval read "0.0% to 0.0%" over 16 examples, as if the score could not
        # move; the exact binomial bound says how many could go the other way unseen
        bound = unseen_share(n, tail)
        out |= {"low": 0.0, "high": bound} if low == 0 else {"low": 1 - bound, "high": 1.0}
        out["unseen"] = {"examples": n, "bootstrap": [low, high]}
        out["counts"] = (
            f"the examples' noise: every one of the {n} scored alike, so the exact binomial "
            f"bound on the share that could go the other way unseen ({bound:.1%}), not the seeds'"
        )
    return out


def share_count(task_spec, predictions: list[dict], labels: list[str], metric: str) -> int | None:
    """How many examples `metric` counts right, where it is the share of examples right (each
    example alone scores 0 or 1 and the metric is their mean); None for any other metric
    (macro-F1, a ratio over documents, a mean of partial credits)."""
    if task_spec.type == "pretrain":
        return None
    if task_spec.type in ("classification", "image_classification"):
        if metric != "accuracy":
            return None
        return sum(p["gold"] == p["predicted"] for p in predictions)
    from tunelab.tasks import metrics_of

    each = [metrics_of(task_spec, [p], labels).get(metric) for p in predictions]
    if any(v not in (0, 1) for v in each):  # a partial credit, or a metric of the set alone
        return None
    total = metrics_of(task_spec, predictions, labels).get(metric)
    right = int(sum(each))
    return right if total is not None and abs(total - right / len(each)) < 1e-9 else None


def _exact(metric: str, right: int, n: int, level: float) -> dict:
    """The Clopper-Pearson interval of `right` of `n`: exact, never narrower than its level
    (the percentile bootstrap read 15 of 16 as 81.3% to 100%, a higher low end than 16 of 16's
    exact 79.4%, and covered about 86% at some rates where it said 95%)."""
    from scipy.stats import binomtest  # scipy.stats takes most of a second to import

    ci = binomtest(right, n).proportion_ci(level, method="exact")
    out = {
        "metric": metric,
        "low": float(ci.low),
        "high": float(ci.high),
        "level": level,
        "n": n,
        "right": right,
        "method": "exact binomial (Clopper-Pearson)",
        "counts": (
            f"the examples' noise: {right} of {n} right, the exact binomial interval, not the "
            "seeds'"
        ),
    }
    if right in (0, n):  # every example scored alike (the view says so)
        out["unseen"] = {"examples": n}
    return out


def _resampled(task_spec, predictions, labels, metric, idx: np.ndarray) -> np.ndarray:
    """`metric` on each row of resampled indices: vectorised for a single-label classifier,
    the task's own metrics on each resample otherwise (cheap sums for the generative and
    pretrain tasks, counts over multi-hot arrays for multilabel)."""
    if task_spec.type in ("classification", "image_classification"):
        index = {label: i for i, label in enumerate(labels)}
        gold = np.array([index.get(p["gold"], -1) for p in predictions])
        pred = np.array([index.get(p["predicted"], -1) for p in predictions])
        if metric == "accuracy":
            return accuracy_rows(gold[idx], pred[idx])
        return macro_f1_rows(gold[idx], pred[idx], len(labels))
    from tunelab.tasks import metrics_of

    rows = ([predictions[i] for i in row] for row in idx)
    return np.array([metrics_of(task_spec, resample, labels)[metric] for resample in rows])
