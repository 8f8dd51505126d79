"""Paired statistics over per-example predictions: bootstrap intervals and McNemar's test.

Both compare two systems on the *same* examples, which is what removes the example-to-example
noise that an unpaired comparison keeps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import binomtest

MetricFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def accuracy_rows(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Accuracy of each row of index arrays shaped (resamples, n)."""
    return (gold == pred).mean(axis=-1)


def macro_f1_rows(gold: np.ndarray, pred: np.ndarray, n_labels: int) -> np.ndarray:
    """Macro-F1 (labels with no gold and no predictions count 0, as sklearn does) per row."""
    gold, pred = np.atleast_2d(gold), np.atleast_2d(pred)
    f1 = np.zeros((gold.shape[0], n_labels))
    for k in range(n_labels):
        tp = ((gold == k) & (pred == k)).sum(-1)
        fp = ((gold != k) & (pred == k)).sum(-1)
        fn = ((gold == k) & (pred != k)).sum(-1)
        denom = 2 * tp + fp + fn
        f1[:, k] = np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return f1.mean(-1)


def paired_bootstrap(
    metric: MetricFn,
    gold: np.ndarray,
    pred_a: np.ndarray,
    pred_b: np.ndarray,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Interval of metric(b) - metric(a), resampling the same examples for both systems."""
    rng = np.random.default_rng(seed)
    n = len(gold)
    idx = rng.integers(0, n, size=(resamples, n))
    diffs = metric(gold[idx], pred_b[idx]) - metric(gold[idx], pred_a[idx])
    tail = (1 - level) / 2
    point = float(metric(gold[None], pred_b[None])[0] - metric(gold[None], pred_a[None])[0])
    return {
        "delta": point,
        "low": float(np.quantile(diffs, tail)),
        "high": float(np.quantile(diffs, 1 - tail)),
        "level": level,
        "resamples": resamples,
        "seed": seed,
    }


def mcnemar_exact(correct_a: np.ndarray, correct_b: np.ndarray) -> dict:
    """Exact (binomial) McNemar test on the discordant pairs of two paired correctness vectors."""
    fixed = int(np.sum(~correct_a & correct_b))
    broken = int(np.sum(correct_a & ~correct_b))
    n = fixed + broken
    p = 1.0 if n == 0 else float(binomtest(fixed, n, 0.5, alternative="two-sided").pvalue)
    return {"fixed": fixed, "broken": broken, "p_value": p}
