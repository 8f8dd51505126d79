"""The seed-aware interval checked by simulation: synthetic experiments with a known truth.

Each experiment draws two arms of `seeds` runs on the same `n` validation examples. A run's
per-example value is  effect·[arm b] + u_run + e_example + ε_run,example : u is the seed's
draw (between-seed sd `SEED_SD`), e an example's difficulty shared by every run (what pairing
removes), ε the run-by-example noise. The true difference of the arms is `effect`.
"""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.stages.compare.pairs import mean_rows
from tunelab.stages.compare.rules import judged_verdict
from tunelab.stages.compare.stats import arm_bootstrap
from tunelab.stages.compare.two_level import (
    SeedVariance,
    arm_weight,
    combine,
    pooled,
    sample_variance,
    seed_aware,
)

N, SEED_SD, EXAMPLE_SD, NOISE_SD = 200, 0.08, 0.2, 0.3
EXPERIMENTS, RESAMPLES = 500, 400


def draw(rng, seeds: int, effect: float) -> tuple[list, list]:
    difficulty = rng.normal(0, EXAMPLE_SD, N)

    def arm(shift: float) -> list[np.ndarray]:
        return [
            shift + rng.normal(0, SEED_SD) + difficulty + rng.normal(0, NOISE_SD, N)
            for _ in range(seeds)
        ]

    return arm(0.0), arm(effect)


def intervals(a: list, b: list, seed: int) -> tuple[dict, dict]:
    """(example-level interval of the first seeds, the seed-aware interval of the arms)."""
    gold = np.zeros(N)
    one = arm_bootstrap(mean_rows, gold, a[:1], b[:1], RESAMPLES, seed)
    both = arm_bootstrap(mean_rows, gold, a, b, RESAMPLES, seed)
    variance = pooled(
        [sample_variance(both["values_a"], "a"), sample_variance(both["values_b"], "b")]
    )
    weights = (arm_weight(len(a), True), arm_weight(len(b), True))
    return one, combine(both, seed_aware(both, weights, variance))


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_seed_aware_interval_covers_the_truth_95_percent_of_the_time(seeds):
    rng, effect = np.random.default_rng(seeds), 0.05
    covered_example = covered_seeds = 0
    for k in range(EXPERIMENTS):
        one, two = intervals(*draw(rng, seeds, effect), seed=k)
        covered_example += one["low"] <= effect <= one["high"]
        covered_seeds += two["low"] <= effect <= two["high"]
    print(f"{seeds} seeds: seed-aware {covered_seeds}, examples only {covered_example} of 500")
    assert abs(covered_seeds / EXPERIMENTS - 0.95) <= 0.03, covered_seeds
    # the interval over examples alone does not see the seeds: it covers far less often
    assert covered_example / EXPERIMENTS < 0.6, covered_example


def test_with_no_effect_the_seed_aware_verdict_rarely_says_improved():
    rng, improved, one_seed = np.random.default_rng(7), 0, 0
    for k in range(EXPERIMENTS):
        one, two = intervals(*draw(rng, 3, 0.0), seed=k)
        improved += judged_verdict(two, min_effect=0.0) == "improved"
        one_seed += one["low"] > 0
    assert improved / EXPERIMENTS <= 0.05, improved
    assert one_seed / EXPERIMENTS > 0.2, one_seed  # examples alone call many seeds a gain


def test_pooling_weights_each_variance_by_its_degrees_of_freedom():
    p = pooled([SeedVariance(1.0, 2, ("a",)), SeedVariance(4.0, 4, ("b",)), None])
    assert p == SeedVariance(3.0, 6, ("a", "b"))
    assert pooled([None]) is None
    assert sample_variance([0.5], "one seed") is None


def test_a_baseline_arm_carries_no_seed_noise_and_df_falls_with_few_seeds():
    example = {"delta": 0.1, "sd": 0.01}
    variance = SeedVariance(0.0004, 2, ("noise n001",))
    against_baseline = seed_aware(example, (arm_weight(1, False), arm_weight(1, True)), variance)
    two_trained = seed_aware(example, (arm_weight(1, True), arm_weight(1, True)), variance)
    assert (
        against_baseline["high"] - against_baseline["low"]
        < two_trained["high"] - two_trained["low"]
    )
    # the example term adds degrees of freedom beyond the seeds' own 2 (Welch-Satterthwaite)
    assert 2 < two_trained["df"] < 10
    no_seed_noise = seed_aware(example, (0.5, 0.5), SeedVariance(0.0, 4, ("x",)))
    assert no_seed_noise["df"] is None and no_seed_noise["t"] == pytest.approx(1.96, abs=1e-3)


def test_a_share_s_interval_stays_within_what_its_change_can_be():
    """A format lab's three seeds against a zero-shot baseline at 0%: the t interval reached
    +100.6 points of a share that cannot rise past +100."""
    from tunelab.stages.compare.pairs import share_bounds

    example = {"delta": 0.982, "sd": 0.01}
    variance = SeedVariance(0.7698e-2**2 * 1e2, 2, ("r007-s3",))
    free = seed_aware(example, (0.0, 1 / 3), variance)
    assert free["high"] > 1.0 and "bounds" not in free
    bounds = share_bounds([0.0], trained=False)
    assert bounds == (0.0, 1.0) and str(bounds[0]) == "0.0"  # not -0.0
    cut = seed_aware(example, (0.0, 1 / 3), variance, bounds=bounds)
    assert cut["high"] == 1.0 and cut["low"] == free["low"] and cut["bounds"] == [0.0, 1.0]
    assert share_bounds([0.3], trained=False) == (-0.3, 0.7)
    assert share_bounds([0.3, 0.5], trained=True) == (-1.0, 1.0)  # a trained reference's mean


def test_counting_the_seeds_never_narrows_the_examples_own_interval():
    """Two seeds that tied (spread 0, 1 degree of freedom) left a normal interval, (+15.5,
    +45.6), inside the examples' percentile one, (+15.3, +45.8)."""
    example = {"delta": 0.305, "sd": 0.0768, "low": 0.153, "high": 0.458}
    tied = seed_aware(example, (0.0, 0.5), SeedVariance(0.0, 1, ("r004-s1",)))
    assert tied["low"] <= example["low"] and tied["high"] >= example["high"]
    wide = seed_aware(example, (0.0, 0.5), SeedVariance(0.01, 2, ("r004-s1",)))
    assert wide["low"] < example["low"] and wide["high"] > example["high"]


@pytest.mark.parametrize("example_sd", [0.0, 0.002, 0.004, 0.006, 0.012])
def test_adding_the_examples_noise_never_narrows_the_seeds_own_interval(example_sd):
    """Welch's df counts the example term as exact: a little example noise (sd 0.004 beside
    seeds of sd 0.00455 over 3) raised df from 2 to 5 and narrowed the interval from +-0.0226
    to +-0.0170, below what the seeds alone allow."""
    from scipy.stats import t as student_t

    variance = SeedVariance(0.00455**2, 2, ("ref",))
    weights = (1 / 3, 1.0)
    seeds_alone = student_t.ppf(0.975, 2) * np.sqrt(variance.variance * sum(weights))
    got = seed_aware({"delta": 0.0394, "sd": example_sd}, weights, variance)
    assert (got["high"] - got["low"]) / 2 >= seeds_alone - 1e-12


def test_a_difference_the_seeds_rule_out_but_below_the_minimum_effect_is_not_seed_noise():
    """Seed-aware (+0.002, +0.010) excludes zero: a new seed could not have produced it, yet
    the verdict read "within seed noise"; it is a real difference too small to count."""
    example = {"delta": 0.006, "low": 0.005, "high": 0.007}
    real = {"delta": 0.006, "low": 0.002, "high": 0.010, "basis": "seeds and examples"}
    assert judged_verdict(real | {"example": example}, min_effect=0.01) == "no evidence"
    noise = real | {"low": -0.002}
    assert judged_verdict(noise | {"example": example}, min_effect=0.01) == "within seed noise"
    assert judged_verdict(real | {"example": example}, min_effect=0.005) == "improved"


def test_three_seeds_that_tie_are_alike_though_their_variance_rounds_above_zero():
    """np.var of three values of 18/50 is 4.6e-33, not 0: tested for exactly 0, such a tie
    read as a measured spread, and the verdict as "improved" (McNemar p = 0.125)."""
    import numpy as np

    from tunelab.stages.compare.pairs import alike, make_arms

    assert np.var([18 / 50] * 3) > 0 and alike([18 / 50] * 3) and not alike([0.36, 0.38])

    def seed(right: int) -> dict:
        return {
            f"e{i:02d}": {"id": f"e{i:02d}", "gold": "a", "predicted": "a" if i < right else "b"}
            for i in range(50)
        }

    pair = make_arms([seed(14)], [seed(18)] * 3, ["a", "b"], ("r", "v"), (False, True))
    boot = pair.interval("accuracy")
    assert boot["basis"] == "examples" and boot["seeds_tied"]["df"] == 2


def test_the_seeds_sample_variance_counts_n_minus_one_degrees():
    """The coverage simulation's tolerance let the biased estimator (ddof 0) through."""
    assert sample_variance([1.0, 2.0, 3.0], "s") == SeedVariance(1.0, 2, ("s",))


def _seed(right: int, n: int = 40) -> dict:
    """One run's predictions: its first `right` of `n` examples right."""
    return {
        f"e{i:02d}": {"id": f"e{i:02d}", "gold": "a", "predicted": "a" if i < right else "b"}
        for i in range(n)
    }


def test_a_pair_gives_a_baseline_reference_no_seed_weight_and_ties_only_when_every_arm_ties():
    from tunelab.stages.compare.pairs import make_arms

    seeds = [_seed(30), _seed(26), _seed(33)]  # a variant arm whose seeds spread

    def interval(reference: list[dict], trained: bool) -> dict:
        pair = make_arms(reference, seeds, ["a", "b"], ("ref", "var"), (trained, True))
        return pair.interval("accuracy")

    baseline, trained = interval([_seed(20)], False), interval([_seed(20)], True)
    assert baseline["basis"] == trained["basis"] == "seeds and examples"
    # the baseline's one run adds no seed variance: a narrower interval, at its low end too
    # (the high end is also cut where the share's change cannot reach)
    assert baseline["low"] > trained["low"] + 0.1
    # a reference whose two seeds tie beside a variant whose seeds spread: the seeds' noise is
    # measured (by the variant's), not "tied"
    spread = interval([_seed(20), _seed(20)], True)
    assert "seeds_tied" not in spread and spread["basis"] == "seeds and examples"
    tied = make_arms([_seed(20), _seed(20)], [_seed(30)] * 2, ["a", "b"], ("r", "v"))
    assert "seeds_tied" in tied.interval("accuracy")
