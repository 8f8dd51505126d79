"""Paired statistics over per-example predictions: bootstrap intervals and McNemar's test.

Both compare two systems on the *same* examples, which is what removes the example-to-example
noise that an unpaired comparison keeps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tunelab.tasks.resampled import RESAMPLES

MetricFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def arm_bootstrap(
    metric: MetricFn,
    gold: np.ndarray,
    arm_a: list[np.ndarray],
    arm_b: list[np.ndarray],
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Interval of mean metric(b's seeds) - mean metric(a's seeds), resampling the shared
    examples for every run at once: the seeds are held fixed, so this interval counts the
    examples' noise only. Also returns each run's metric on all the examples (`values_a`,
    `values_b`: the seed-level points) and the resampled difference's standard deviation
    (`sd`), which the seed-aware interval (`two_level.py`) adds to the seeds' variance."""
    rng = np.random.default_rng(seed)
    n = len(gold)
    idx = rng.integers(0, n, size=(resamples, n))
    resampled = gold[idx]

    def arm_mean(arm: list[np.ndarray]) -> np.ndarray:
        return np.mean([metric(resampled, pred[idx]) for pred in arm], axis=0)

    diffs = arm_mean(arm_b) - arm_mean(arm_a)
    return summarise(metric, gold, arm_a, arm_b, diffs, resamples, seed, level)


def summarise(metric, gold, arm_a, arm_b, diffs, resamples: int, seed: int, level: float) -> dict:
    """An arm bootstrap's result from its resampled differences `diffs`: the interval, its
    settings, the difference's standard deviation, and each run's metric on all the examples
    (the seed-level points). `set_stats.set_bootstrap` shares it."""
    values_a = [float(metric(gold[None], pred[None])[0]) for pred in arm_a]
    values_b = [float(metric(gold[None], pred[None])[0]) for pred in arm_b]
    tail = (1 - level) / 2
    return {
        "delta": float(np.mean(values_b) - np.mean(values_a)),
        "low": float(np.quantile(diffs, tail)),
        "high": float(np.quantile(diffs, 1 - tail)),
        "level": level,
        "resamples": resamples,
        "seed": seed,
        "sd": float(diffs.std(ddof=1)),
        "values_a": values_a,
        "values_b": values_b,
    }


def mcnemar_exact(correct_a: np.ndarray, correct_b: np.ndarray) -> dict:
    """Exact (binomial) McNemar test on the discordant pairs of two paired correctness vectors."""
    from scipy.stats import binomtest  # scipy.stats takes most of a second to import

    fixed = int(np.sum(~correct_a & correct_b))
    broken = int(np.sum(correct_a & ~correct_b))
    n = fixed + broken
    p = 1.0 if n == 0 else float(binomtest(fixed, n, 0.5, alternative="two-sided").pvalue)
    return {"fixed": fixed, "broken": broken, "p_value": p}


FEW = 100
"""Below this many examples a one-seed verdict on a mean of partial credits also needs the
sign-flip test (`sign_flip`): the percentile bootstrap is too narrow on few (4.3% false gains
at 20 examples, 9.6% at 5, against 2.5%), and near enough at 50 and more."""


def sign_flip(values_a: np.ndarray, values_b: np.ndarray, resamples: int = 9999) -> dict:
    """The paired sign-flip (randomisation) test of the mean difference b - a over examples:
    under no effect each example's difference is as likely negated, so the p-value is the
    share of sign patterns whose mean is as far from zero; exact over the examples that changed
    where their 2^k patterns are no more than `resamples`. It is `swap_test` of a mean
    (swapping an example's two values negates its difference). What McNemar's test is for a
    share of examples right, for a mean of partial credits: on 5 examples the percentile
    bootstrap excluded zero 9.6% of the time under no effect where it said 2.5%."""
    a, b = np.asarray(values_a, float), np.asarray(values_b, float)
    return swap_test(mean_rows, np.zeros(len(a)), a, b, resamples)


def mean_rows(_: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A mean of per-example values, per row (its gold ignored): a metric of partial credits."""
    return values.mean(axis=-1)


def swap_test(
    metric: MetricFn,
    gold: np.ndarray,
    pred_a: np.ndarray,
    pred_b: np.ndarray,
    resamples: int = 9999,
) -> dict:
    """The paired randomisation test of metric(b) - metric(a) for a metric that is not a mean
    over examples (macro-F1, a multilabel F1, bits per byte over documents): under no effect
    each example's two predictions are as likely swapped, so the p-value is the share of swap
    patterns whose difference is as far from zero. Only the examples whose predictions differ
    can move it: exact where their 2^k patterns are no more than `resamples`, seeded draws
    otherwise. `sign_flip` is this test for a mean of per-example values. Rows of `pred_a` and
    `pred_b` are examples (a label index, a multi-hot row or a document's NLL); `metric` takes
    (patterns, examples, ...) arrays, as the bootstraps call it."""
    pred_a, pred_b = np.asarray(pred_a), np.asarray(pred_b)
    differs = (pred_a != pred_b).reshape(len(pred_a), -1).any(-1)
    changed = np.flatnonzero(differs)
    k = len(changed)
    if k == 0:
        return {"changed": 0, "n": len(pred_a), "p_value": 1.0}
    exact = 2**k <= resamples
    if exact:
        patterns = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
    else:
        patterns = np.random.default_rng(0).integers(0, 2, size=(resamples, k))
    swap = patterns.astype(bool).reshape(patterns.shape + (1,) * (pred_a.ndim - 1))
    rows_a = np.repeat(pred_a[None], len(patterns), axis=0)
    rows_b = np.repeat(pred_b[None], len(patterns), axis=0)
    rows_a[:, changed] = np.where(swap, pred_b[changed], pred_a[changed])
    rows_b[:, changed] = np.where(swap, pred_a[changed], pred_b[changed])
    golds = np.repeat(np.asarray(gold)[None], len(patterns), axis=0)
    diffs = metric(golds, rows_b) - metric(golds, rows_a)
    observed = float(metric(gold[None], pred_b[None])[0] - metric(gold[None], pred_a[None])[0])
    extreme = int(np.sum(np.abs(diffs) >= abs(observed) - 1e-12))
    p = extreme / len(patterns) if exact else (extreme + 1) / (len(patterns) + 1)
    return {"changed": k, "n": len(pred_a), "p_value": float(min(p, 1.0))}


def flips(ids: list[str], correct_a: np.ndarray, correct_b: np.ndarray, limit: int = 5) -> dict:
    """Examples that system b fixed (a wrong, b right) and broke (a right, b wrong): counts
    and the first `limit` ids of each (in the order of `ids`)."""
    correct_a, correct_b = np.asarray(correct_a, bool), np.asarray(correct_b, bool)
    fixed = [ids[i] for i in np.flatnonzero(~correct_a & correct_b)]
    broken = [ids[i] for i in np.flatnonzero(correct_a & ~correct_b)]
    return {
        "fixed": {"count": len(fixed), "ids": fixed[:limit]},
        "broken": {"count": len(broken), "ids": broken[:limit]},
        "net": len(fixed) - len(broken),
    }


def concentration_k(n: int) -> int:
    """How many examples make "a handful": max(3, 1% of n), rounded up."""
    return max(3, -(-n // 100))


def concentration(values_a: np.ndarray, values_b: np.ndarray, k: int | None = None) -> dict:
    """Does the gain of b over a come from a handful of examples?

    Rule: with per-example values (correctness 0/1, or a per-example score such as the share
    of exact fields), d = b - a. The gain is *concentrated* when the mean difference is
    positive and removing the k (`concentration_k`) most improved examples leaves a sum of
    differences <= 0. For 0/1 values this is exactly: net flips (fixed - broken) <= k. A
    non-positive difference has no gain to be concentrated (`concentrated` is False).
    """
    d = np.asarray(values_b, float) - np.asarray(values_a, float)
    n = len(d)
    k = concentration_k(n) if k is None else k
    top = np.sort(d)[::-1][:k]
    rest = float(d.sum() - top.sum())
    delta = float(d.mean()) if n else 0.0
    return {
        "rule": f"gain > 0 and removing the {k} most improved examples leaves no gain",
        "k": k,
        "n": n,
        "delta": delta,
        "top_k_gain": float(top.sum()),
        "delta_without_top_k": rest / max(n - k, 1) if n > k else 0.0,
        "concentrated": bool(delta > 0 and rest <= 1e-12),
    }
