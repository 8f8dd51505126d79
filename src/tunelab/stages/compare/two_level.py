"""The seed-aware interval: a difference between two arms that counts the noise of training
(seeds) as well as the noise of the validation examples.

Two runs that differ only in `training.seed` are two draws of one training procedure: other
initial weights of the new parts, another data order, other dropout masks. An arm is the set
of such runs; its metric is the mean over its seeds. The difference of two arms' means, D, is
measured on one fixed validation set, so by the law of total variance

    Var(D) = s2 * (w_a + w_b)  +  V_ex

- `s2` is the between-seed variance of the metric: the pooled sample variance of the seeds'
  values in every arm of the comparison that has two or more seeds, and of every noise record
  (`tunelab noise`) of the arms' family, pooled by their degrees of freedom (`pooled`). Both
  arms are assumed to share it, the pooled two-sample t's assumption: a one-change variant
  trains with the same procedure, so its seed noise is taken to be its parent's.
- `w` is 1/seeds for an arm that trains, 0 for a baseline (a majority class, a zero-shot model
  or a convex linear probe draws no seed).
- `V_ex` is the example-level variance of D with the seeds held fixed: the variance of the
  paired bootstrap over the shared examples (`stats.arm_bootstrap`).

The interval is D ± t(df) * sqrt(Var(D)), df by Welch-Satterthwaite with the example term's
degrees of freedom taken as infinite: df = Var(D)^2 / ((s2 (w_a + w_b))^2 / df_s2). With few
seeds df is small and t wide (t = 4.30 at 2 degrees of freedom, 2.78 at 4); a percentile
bootstrap over 3 seeds per arm cannot be that wide (it only ever sees 3 values) and under-covers,
which the simulation test shows (tests/unit/stages/compare/test_two_level.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SEED_RULE = (
    "seed-aware interval: D ± t(df)·sqrt(s²·(w_a + w_b) + V_ex); s² the seeds' variance pooled "
    "over the arms with 2+ seeds and the family's noise records, w = 1/seeds for a trained arm "
    "and 0 for a baseline, V_ex the paired bootstrap's variance over examples, df by "
    "Welch-Satterthwaite; without s² the example-level interval is judged, labelled as such"
)

SEEDS, EXAMPLES = "seeds and examples", "examples"
"""What an interval's `basis` counted."""


@dataclass(frozen=True)
class SeedVariance:
    """A between-seed variance of one metric, its degrees of freedom and where it came from."""

    variance: float
    df: int
    sources: tuple[str, ...]


def sample_variance(values: list[float], source: str) -> SeedVariance | None:
    """The seeds' sample variance (n - 1 degrees of freedom); None under two seeds."""
    if len(values) < 2:
        return None
    return SeedVariance(float(np.var(values, ddof=1)), len(values) - 1, (source,))


def pooled(parts: list[SeedVariance | None]) -> SeedVariance | None:
    """Variances pooled by their degrees of freedom; None when there is none."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    df = sum(p.df for p in parts)
    variance = sum(p.variance * p.df for p in parts) / df
    return SeedVariance(variance, df, tuple(s for p in parts for s in p.sources))


def arm_weight(seeds: int, trained: bool) -> float:
    """How much of the seeds' variance an arm's mean carries: 1/seeds, or 0 for a baseline."""
    return 1.0 / seeds if trained else 0.0


def seed_aware(
    example: dict,
    weights: tuple[float, float],
    variance: SeedVariance,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict:
    """The two-level interval around the example-level bootstrap `example` (`delta`, `sd`),
    for arms carrying `weights` of the seeds' `variance`, and never inside the examples' own
    interval (`low`, `high`, where `example` has them). `bounds`: the values the difference
    can take (a share's change lies in [-1, 1], against an untrained reference of value a in
    [-a, 1 - a]); the t interval is cut to them, which can only drop values that cannot be the
    truth, so its coverage is kept (it said "+98.2 (+95.9, +100.6) points" of a share)."""
    from scipy.stats import t as student_t  # scipy.stats takes most of a second to import

    seed_part = variance.variance * sum(weights)
    example_part = example["sd"] ** 2
    total = seed_part + example_part
    df = math.inf if seed_part <= 0 else total**2 / (seed_part**2 / variance.df)
    tail = 1 - (1 - level) / 2
    quantile = float(student_t.ppf(tail, df))
    half = quantile * math.sqrt(total)
    # nor narrower than the seeds' part alone on its own degrees of freedom: Welch's df counts
    # the example term as exact, so a little example noise raised df faster than the variance
    # and narrowed the interval by up to a quarter below what the seeds alone allow
    if seed_part > 0:
        half = max(half, float(student_t.ppf(tail, variance.df)) * math.sqrt(seed_part))
    # never narrower than the examples' own (percentile) interval: counting the seeds can only
    # widen it; two seeds that tie (spread 0) had left a normal interval inside the percentile
    low = min(example["delta"] - half, example.get("low", math.inf))
    high = max(example["delta"] + half, example.get("high", -math.inf))
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return {
        "delta": example["delta"],
        "low": low,
        "high": high,
        "level": level,
        **({"bounds": list(bounds)} if bounds is not None else {}),
        "df": None if math.isinf(df) else round(df, 2),
        "t": round(quantile, 4),
        "seed_sd": math.sqrt(variance.variance),
        "seed_df": variance.df,
        "example_sd": example["sd"],
        "weights": [round(w, 4) for w in weights],
        "sources": list(variance.sources),
    }


def combine(example: dict, seeds: dict | None) -> dict:
    """The interval that is judged (seed-aware when there is one), with both beside it."""
    judged = seeds or example
    return {
        "delta": judged["delta"],
        "low": judged["low"],
        "high": judged["high"],
        "level": judged["level"],
        "basis": SEEDS if seeds else EXAMPLES,
        "example": {k: example[k] for k in ("delta", "low", "high", "sd")},
        "seeds": seeds,
        "values_a": example["values_a"],
        "values_b": example["values_b"],
    }
