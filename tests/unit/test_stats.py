import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import f1_score

from tunelab.stats import accuracy_rows, macro_f1_rows, mcnemar_exact, paired_bootstrap


def test_macro_f1_rows_matches_sklearn():
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 4, size=50)
    pred = np.where(rng.random(50) < 0.6, gold, rng.integers(0, 4, size=50))
    ours = macro_f1_rows(gold, pred, n_labels=4)[0]
    assert ours == pytest.approx(f1_score(gold, pred, average="macro", labels=range(4)))


def test_mcnemar_counts_discordant_pairs_and_matches_binomial():
    a = np.array([1, 1, 0, 0, 1, 0, 0, 0, 1, 1], dtype=bool)
    b = np.array([1, 0, 1, 1, 1, 1, 1, 0, 1, 1], dtype=bool)
    result = mcnemar_exact(a, b)
    assert (result["fixed"], result["broken"]) == (4, 1)
    # hand-computed: two-sided exact binomial, 1 of 5 discordant, p = 2 * (1 + 5) / 32
    assert result["p_value"] == pytest.approx(0.375)
    assert result["p_value"] == pytest.approx(binomtest(4, 5, 0.5).pvalue)


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    gold = np.array([0, 1] * 50)
    a = gold.copy()
    a[:20] = 1 - a[:20]  # 80% accurate
    b = gold.copy()
    b[:5] = 1 - b[:5]  # 95% accurate
    one = paired_bootstrap(accuracy_rows, gold, a, b, resamples=500, seed=3)
    two = paired_bootstrap(accuracy_rows, gold, a, b, resamples=500, seed=3)
    assert one == two
    assert one["delta"] == pytest.approx(0.15)
    assert 0 < one["low"] < 0.15 < one["high"]
