"""The paired bootstrap for task multilabel: examples resampled, the metrics recomputed.

Each run's predictions on the shared validation examples become a multi-hot array (examples,
labels); the gold sets likewise. A resample draws examples with replacement, exactly as the
single-label bootstrap does (`stats.arm_bootstrap`: the same generator, seed and draws), and
recomputes micro-F1, macro-F1, subset accuracy or one label's F1, precision or recall from
the resampled examples' counts, since none of them is a mean over examples.

Rather than gathering a (resamples, examples, labels) array, a resample is held as how often
it drew each example (`weights`, resamples x examples), and each label's true positives, false
positives and false negatives are those weights times the examples' own counts: the same
numbers in memory of resamples x (examples + labels). McNemar and the flips use each example's
subset correctness (its predicted set is exactly its gold set), `pairs.right`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.stages.compare.stats import RESAMPLES, summarise
from tunelab.tasks.multilabel import ratio, scores_from_counts

SetMetricFn = Callable[..., np.ndarray]
"""(gold, predicted, weights=None) -> one value per resample: with `weights` (resamples,
examples), gold and predicted are (examples, labels); without, they are (resamples, examples,
labels) already (one row each: the metric on all the examples)."""


def weighted_counts(gold: np.ndarray, pred: np.ndarray, weights: np.ndarray | None):
    """Each label's TP, FP and FN per resample (resamples, labels)."""
    gold, pred = np.asarray(gold, bool), np.asarray(pred, bool)
    parts = (gold & pred, ~gold & pred, gold & ~pred)
    if weights is None:
        return tuple(p.sum(-2) for p in parts)
    return tuple(weights @ p.astype(np.float64) for p in parts)


def exact_rows(gold: np.ndarray, pred: np.ndarray, weights: np.ndarray | None = None):
    """Subset accuracy per resample: the share of examples whose set is exactly right."""
    exact = (np.asarray(gold, bool) == np.asarray(pred, bool)).all(-1)
    if weights is None:
        return exact.mean(-1)
    return weights @ exact.astype(np.float64) / weights.shape[1]


def overall_rows(gold, pred, weights=None, metric: str = "micro_f1") -> np.ndarray:
    """micro_f1 or macro_f1 per resample."""
    return scores_from_counts(*weighted_counts(gold, pred, weights))[metric]


def label_rows(gold, pred, weights=None, k: int = 0, metric: str = "f1") -> np.ndarray:
    """Label k's F1, precision or recall per resample (0 where undefined)."""
    tp, fp, fn = (c[..., k] for c in weighted_counts(gold, pred, weights))
    if metric == "f1":
        return ratio(2 * tp, 2 * tp + fp + fn)
    if metric == "precision":
        return ratio(tp, tp + fp)
    return ratio(tp, tp + fn)


def set_metric(metric: str, group: str | None, labels: Sequence[str]) -> SetMetricFn:
    """The function of one metric, overall or for one label (`group`)."""
    if group is not None:
        if group not in labels:
            raise TunelabError(f"{group!r} is not one of the lab's labels {list(labels)}")
        return partial(label_rows, k=list(labels).index(group), metric=metric)
    if metric == "subset_accuracy":
        return exact_rows
    return partial(overall_rows, metric=metric)


def resample_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """How often each resample drew each example (resamples, n): the draws of
    `stats.arm_bootstrap` (`rng.integers(0, n, size=(resamples, n))`), counted."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    flat = (idx + n * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def set_bootstrap(
    metric: SetMetricFn,
    gold: np.ndarray,
    arm_a: list[np.ndarray],
    arm_b: list[np.ndarray],
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """`stats.arm_bootstrap` for multi-hot arrays: the interval of mean metric(b's seeds) -
    mean metric(a's seeds) over the same resampled examples, with the same keys."""
    weights = resample_weights(len(gold), resamples, seed)

    def arm_mean(arm: list[np.ndarray]) -> np.ndarray:
        return np.mean([metric(gold, pred, weights) for pred in arm], axis=0)

    diffs = arm_mean(arm_b) - arm_mean(arm_a)
    return summarise(metric, gold, arm_a, arm_b, diffs, resamples, seed, level)
