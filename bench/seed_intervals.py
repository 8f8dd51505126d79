"""Coverage of three intervals for a difference between two arms of seeds, by simulation.

    .venv/bin/python bench/seed_intervals.py [--experiments 500]

Synthetic experiments as in tests/unit/stages/compare/test_two_level.py: two arms of `seeds`
runs on the same 200 validation examples, per-example value effect·[arm b] + u_run +
e_example + ε, with a known effect. Three 95% intervals per experiment:

- examples: the paired bootstrap over examples of the arms' first seeds (what compare judged
  before seeds were counted);
- seed bootstrap: a two-level percentile bootstrap that resamples each arm's seeds (with
  replacement) and the shared examples together;
- seed-aware t: tunelab's interval (`stages/compare/two_level.py`).

Prints how often each covers the true effect, at 3 and 5 seeds per arm.
"""

from __future__ import annotations

import argparse

import numpy as np

from tunelab.stages.compare.pairs import mean_rows
from tunelab.stages.compare.stats import arm_bootstrap
from tunelab.stages.compare.two_level import arm_weight, pooled, sample_variance, seed_aware

N, SEED_SD, EXAMPLE_SD, NOISE_SD, EFFECT = 200, 0.08, 0.2, 0.3, 0.05


def draw(rng, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    difficulty = rng.normal(0, EXAMPLE_SD, N)

    def arm(shift: float) -> np.ndarray:
        u = rng.normal(0, SEED_SD, (seeds, 1))
        return shift + u + difficulty + rng.normal(0, NOISE_SD, (seeds, N))

    return arm(0.0), arm(EFFECT)


def seed_bootstrap(a: np.ndarray, b: np.ndarray, rng, resamples: int = 2000) -> tuple:
    """Resample seeds within each arm and examples for all runs at once; percentile interval."""
    seeds = a.shape[0]
    ia = rng.integers(0, seeds, (resamples, seeds))
    ib = rng.integers(0, seeds, (resamples, seeds))
    idx = rng.integers(0, N, (resamples, N))
    mean_a = np.stack([a[ia[r]][:, idx[r]].mean() for r in range(resamples)])
    mean_b = np.stack([b[ib[r]][:, idx[r]].mean() for r in range(resamples)])
    diffs = mean_b - mean_a
    return np.quantile(diffs, 0.025), np.quantile(diffs, 0.975)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiments", type=int, default=500)
    args = parser.parse_args()
    print(f"{args.experiments} experiments per row; true effect {EFFECT}, seed sd {SEED_SD}")
    print("| seeds per arm | examples only | seed bootstrap | seed-aware t |")
    print("|---|---|---|---|")
    for seeds in (3, 5):
        rng = np.random.default_rng(seeds)
        hits = {"examples": 0, "bootstrap": 0, "t": 0}
        for k in range(args.experiments):
            a, b = draw(rng, seeds)
            gold = np.zeros(N)
            one = arm_bootstrap(mean_rows, gold, [a[0]], [b[0]], 400, k)
            both = arm_bootstrap(mean_rows, gold, list(a), list(b), 400, k)
            variance = pooled(
                [sample_variance(both["values_a"], "a"), sample_variance(both["values_b"], "b")]
            )
            t = seed_aware(both, (arm_weight(seeds, True), arm_weight(seeds, True)), variance)
            low, high = seed_bootstrap(a, b, rng, 400)
            hits["examples"] += one["low"] <= EFFECT <= one["high"]
            hits["bootstrap"] += low <= EFFECT <= high
            hits["t"] += t["low"] <= EFFECT <= t["high"]
        share = {k: f"{100 * v / args.experiments:.1f}%" for k, v in hits.items()}
        print(f"| {seeds} | {share['examples']} | {share['bootstrap']} | {share['t']} |")


if __name__ == "__main__":
    main()
