import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap
from sklearn.metrics import f1_score

from tunelab.stages.compare.stats import (
    arm_bootstrap,
    concentration,
    concentration_k,
    flips,
    mcnemar_exact,
)
from tunelab.tasks.resampled import accuracy_rows, macro_f1_rows


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
    one = arm_bootstrap(accuracy_rows, gold, [a], [b], resamples=500, seed=3)
    two = arm_bootstrap(accuracy_rows, gold, [a], [b], resamples=500, seed=3)
    assert one == two
    assert one["delta"] == pytest.approx(0.15)
    assert 0 < one["low"] < 0.15 < one["high"]


def test_paired_bootstrap_interval_agrees_with_scipy():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 3, 300)
    a = np.where(rng.random(300) < 0.80, gold, (gold + 1) % 3)
    b = np.where(rng.random(300) < 0.88, gold, (gold + 1) % 3)
    ours = arm_bootstrap(accuracy_rows, gold, [a], [b], resamples=20_000, seed=1)

    def gain(x, y, axis=-1):
        return y.mean(axis=axis) - x.mean(axis=axis)

    ref = bootstrap(
        ((a == gold).astype(float), (b == gold).astype(float)),
        gain,
        paired=True,
        vectorized=True,
        n_resamples=20_000,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    assert ours["delta"] == pytest.approx(np.mean(b == gold) - np.mean(a == gold))
    assert ours["low"] == pytest.approx(ref.low, abs=0.006)  # two seeds: Monte Carlo noise
    assert ours["high"] == pytest.approx(ref.high, abs=0.006)


def test_flips_name_fixed_and_broken_examples_in_order():
    ids = ["x0", "x1", "x2", "x3", "x4", "x5"]
    a = np.array([1, 0, 0, 1, 1, 0], dtype=bool)
    b = np.array([0, 1, 1, 1, 0, 0], dtype=bool)
    result = flips(ids, a, b, limit=1)
    assert result["fixed"] == {"count": 2, "ids": ["x1"]}
    assert result["broken"] == {"count": 2, "ids": ["x0"]}
    assert result["net"] == 0


def test_a_handful_is_three_or_one_percent():
    assert [concentration_k(n) for n in (10, 300, 301, 1000, 5000)] == [3, 3, 4, 10, 50]


def test_a_planted_gain_of_three_examples_against_many_small_losses_is_concentrated():
    a = np.full(200, 0.5)
    b = a.copy()
    b[:3] = 1.0  # three examples gain 0.5 each
    b[100:150] -= 0.01  # fifty lose a little
    c = concentration(a, b)
    assert c["delta"] > 0 and c["k"] == 3
    assert c["top_k_gain"] == pytest.approx(1.5)
    assert c["delta_without_top_k"] == pytest.approx(-0.5 / 197)
    assert c["concentrated"]


def test_a_gain_spread_over_many_examples_is_not_concentrated():
    a = np.full(200, 0.5)
    b = a.copy()
    b[:50] += 0.1
    c = concentration(a, b)
    assert c["delta"] == pytest.approx(0.025)
    assert not c["concentrated"]


@pytest.mark.parametrize(("fixed", "broken"), [(3, 0), (5, 2), (4, 0), (9, 5), (2, 3)])
def test_for_correctness_the_rule_is_net_flips_at_most_k(fixed, broken):
    n = 100
    a = np.zeros(n, dtype=bool)
    a[50 : 50 + broken] = True
    b = np.zeros(n, dtype=bool)
    b[:fixed] = True
    c = concentration(a, b)
    gain = fixed - broken > 0
    assert c["concentrated"] == (gain and fixed - broken <= c["k"])


def test_no_gain_is_never_concentrated():
    a = np.array([1.0, 1.0, 0.0, 0.0])
    assert not concentration(a, a)["concentrated"]
    assert not concentration(a, a[::-1] * 0)["concentrated"]


def test_the_sign_flip_test_is_exact_over_the_examples_that_changed():
    """Zeros change no sign pattern's sum: with them counted, 5 changed of 40 was resampled
    (p 0.0598 where the exact value is 2/32 = 0.0625)."""
    from tunelab.stages.compare.stats import sign_flip

    a = np.zeros(40)
    b = np.zeros(40)
    b[:5] = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert sign_flip(a, b) == {"changed": 5, "n": 40, "p_value": 0.0625}
    assert sign_flip(a, a)["p_value"] == 1.0


def test_the_swap_test_is_the_sign_flip_test_for_a_mean_and_exact_for_label_sets():
    """Swapping an example's two values negates its difference: for a mean the two tests agree.
    Multi-hot rows swap whole; enough changed examples are drawn, seeded."""
    from functools import partial

    from tunelab.stages.compare.set_stats import overall_rows
    from tunelab.stages.compare.stats import sign_flip, swap_test

    a = np.zeros(40)
    b = np.zeros(40)
    b[:5] = [0.1, 0.2, 0.3, 0.4, 0.5]
    mean = lambda _, values: values.mean(axis=-1)  # noqa: E731
    assert swap_test(mean, np.zeros(40), a, b) == sign_flip(a, b)
    gold = np.eye(3, dtype=bool)[np.arange(30) % 3]
    wrong = np.roll(gold, 1, axis=1)
    pred_a, pred_b = wrong.copy(), wrong.copy()
    pred_b[:3] = gold[:3]  # 3 examples set right
    micro = partial(overall_rows, metric="micro_f1")
    assert swap_test(micro, gold, pred_a, pred_b)["p_value"] == 0.25  # 2 of 8 patterns
    pred_b[:20] = gold[:20]  # 20 changed: 2^20 patterns, 9,999 drawn
    drawn = swap_test(micro, gold, pred_a, pred_b)
    assert drawn["changed"] == 20 and drawn["p_value"] == 1 / 10000
