"""The paired bootstrap of task multilabel: examples resampled, micro and macro F1, subset
accuracy and each label's F1 recomputed from multi-hot sets; McNemar on exact sets; per-label
guardrails."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.spec import Guardrail
from tunelab.stages.compare.guardrails import judge
from tunelab.stages.compare.pairs import make_arms, right
from tunelab.stages.compare.set_stats import (
    resample_weights,
    set_bootstrap,
    set_metric,
)
from tunelab.stages.compare.stats import mcnemar_exact
from tunelab.tasks.multilabel import metrics_arrays

LABELS = ["business", "sport", "tech"]


def noisy(gold: np.ndarray, flip: float, rng) -> np.ndarray:
    return gold ^ (rng.random(gold.shape) < flip)


@pytest.fixture
def sets():
    rng = np.random.default_rng(0)
    gold = rng.random((60, 3)) < 0.4
    return gold, noisy(gold, 0.3, rng), noisy(gold, 0.1, rng)


def test_the_weights_count_the_draws_of_the_single_label_bootstrap() -> None:
    weights = resample_weights(7, 5, seed=2)
    idx = np.random.default_rng(2).integers(0, 7, size=(5, 7))
    assert np.array_equal(weights, np.stack([np.bincount(r, minlength=7) for r in idx]))


@pytest.mark.parametrize(
    ("metric", "group", "key"),
    [
        ("micro_f1", None, "micro_f1"),
        ("macro_f1", None, "macro_f1"),
        ("subset_accuracy", None, "subset_accuracy"),
        ("f1", "sport", "f1"),
        ("recall", "tech", "recall"),
        ("precision", "business", "precision"),
    ],
)
def test_each_resample_is_the_metric_of_the_examples_it_drew(sets, metric, group, key) -> None:
    gold, a, b = sets
    fn = set_metric(metric, group, LABELS)
    resamples, seed = 40, 5
    boot = set_bootstrap(fn, gold, [a], [b], resamples=resamples, seed=seed)
    idx = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))

    def value(pred: np.ndarray, rows: np.ndarray) -> float:
        m = metrics_arrays(gold[rows], pred[rows], LABELS)
        return m["per_class"][group][key] if group else m[key]

    brute = np.array([value(b, r) - value(a, r) for r in idx])
    assert boot["low"] == pytest.approx(np.quantile(brute, 0.025))
    assert boot["high"] == pytest.approx(np.quantile(brute, 0.975))
    everything = np.arange(len(gold))
    assert boot["delta"] == pytest.approx(value(b, everything) - value(a, everything))
    assert boot["values_a"] == [pytest.approx(value(a, everything))]


def predictions(gold: np.ndarray, pred: np.ndarray) -> dict[str, dict]:
    def named(row):
        return [LABELS[j] for j in np.flatnonzero(row)]

    return {
        f"e{i:02d}": {"id": f"e{i:02d}", "gold": named(g), "predicted": named(p), "threshold": 0.5}
        for i, (g, p) in enumerate(zip(gold, pred, strict=True))
    }


def test_a_pair_of_multilabel_runs_resamples_sets_and_judges_per_label(sets) -> None:
    gold, a, b = sets
    pair = make_arms([predictions(gold, a)], [predictions(gold, b)], LABELS, ("ref", "run"))
    assert pair.multilabel and not pair.classification
    assert pair.gold.shape == (60, 3)
    boot = pair.interval("micro_f1")
    expected = (
        metrics_arrays(gold, b, LABELS)["micro_f1"] - metrics_arrays(gold, a, LABELS)["micro_f1"]
    )
    assert boot["delta"] == pytest.approx(expected) and boot["low"] > 0
    exact_a, exact_b = right(pair, "micro_f1")
    assert np.array_equal(exact_a, (gold == a).all(1).astype(float))
    test = mcnemar_exact(exact_a == 1, exact_b == 1)
    assert test["fixed"] > test["broken"]
    rail = judge(Guardrail(metric="f1", scope="every_class", max_drop=0.05), pair, LABELS)
    assert set(rail["checks"]) == set(LABELS) and rail["status"] == "holds"


def test_a_label_the_run_stops_predicting_breaks_its_guardrail(sets) -> None:
    gold, a, _ = sets
    b = a.copy()
    b[:, 1] = False  # `sport` is never predicted by the run
    pair = make_arms([predictions(gold, a)], [predictions(gold, b)], LABELS, ("ref", "run"))
    rail = judge(Guardrail(metric="f1", scope="every_class", max_drop=0.05), pair, LABELS)
    assert rail["status"] == "broken" and rail["worst"] == "sport"
    assert rail["checks"]["sport"]["status"] == "broken"
