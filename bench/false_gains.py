"""How often a verdict reads a gain that is not there: A/A comparisons through compare's own code.

    .venv/bin/python bench/false_gains.py [--reps 300]

Every variant is drawn from the very procedure of its reference: no real gain. A classifier
on `n` examples: example i is right in run r when a_i + u_r + v_ri > 0, with a_i ~ N(1, 1.5)
(the examples' difficulty), u_r ~ N(0, 0.15) (a seed's shift) and v_ri ~ N(0, 0.6) (a seed's
own luck on an example): mean accuracy about 0.73, a seed's sd 5 points at n = 50 and 3 at
n = 500, and two seeds tie about one time in seven at n = 50. Each comparison goes through
`pairs.make_arms`, `versus.paired_stats` and `rules.verdict`, as `tunelab compare` judges a row.

Rows: one seed per arm; one seed per arm with a 3-seed noise record of the family; 2 and 3
seeds per arm; a 1-seed reference against a 2-seed variant (where tied seeds had read
"improved"). Columns: the share of comparisons reading improved (over seeds), improved on one
seed, and, for 5 variants against one shared reference, the share of draws where one or more
read either.
"""

from __future__ import annotations

import argparse

import numpy as np

from tunelab.core.sections import Hypothesis
from tunelab.stages.compare.pairs import make_arms
from tunelab.stages.compare.rules import verdict
from tunelab.stages.compare.versus import paired_stats

LABELS = ["a", "b"]
HYPOTHESIS = Hypothesis(behaviour="A/A", metric="accuracy", min_effect=0.0)
SETTINGS = [  # (reference seeds, variant seeds, noise record seeds)
    (1, 1, 0),
    (1, 1, 3),
    (2, 2, 0),
    (3, 3, 0),
    (1, 2, 0),
]
VARIANTS = 5


def predictions(gold: np.ndarray, right: np.ndarray) -> dict:
    return {
        f"e{i:04d}": {"id": f"e{i:04d}", "gold": LABELS[g], "predicted": LABELS[g if r else 1 - g]}
        for i, (g, r) in enumerate(zip(gold, right, strict=True))
    }


def word(ref: list, var: list, noise: tuple) -> str:
    pair = make_arms(ref, var, LABELS, ("reference", "variant"), (True, True), noise)
    versus = paired_stats(pair, "accuracy") | {"guardrails": []}
    return verdict(versus, HYPOTHESIS, None, None, ("variant", len(var)))[0]


def simulate(n: int, ref_seeds: int, var_seeds: int, noise_seeds: int, reps: int, rng) -> dict:
    words, any_gain = [], 0
    for _ in range(reps):
        difficulty, gold = rng.normal(1.0, 1.5, n), rng.integers(0, 2, n)

        def seeds(k: int, difficulty=difficulty, gold=gold) -> list[dict]:
            shift = [rng.normal(0, 0.15) for _ in range(k)]
            return [predictions(gold, difficulty + u + rng.normal(0, 0.6, n) > 0) for u in shift]

        ref = seeds(ref_seeds)
        noise = (("noise n001", seeds(noise_seeds)),) if noise_seeds else ()
        drawn = [word(ref, seeds(var_seeds), noise) for _ in range(VARIANTS)]
        words += drawn
        any_gain += any(w.startswith("improved") for w in drawn)
    return {
        "improved": words.count("improved") / len(words),
        "one_seed": words.count("improved on one seed") / len(words),
        "any_of_5": any_gain / reps,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300, help="draws per row (5 variants each)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.reps} draws of {VARIANTS} variants per row; no real gain; nominal 2.5% each")
    print(
        "| examples | seeds: reference / variant (noise record) | improved | improved on one "
        "seed | one or more of 5 |"
    )
    print("|---:|---|---:|---:|---:|")
    for n in (50, 500):
        for ref_seeds, var_seeds, noise_seeds in SETTINGS:
            r = simulate(n, ref_seeds, var_seeds, noise_seeds, args.reps, rng)
            noise = f" (+{noise_seeds})" if noise_seeds else ""
            print(
                f"| {n} | {ref_seeds} / {var_seeds}{noise} | {r['improved']:.1%} | "
                f"{r['one_seed']:.1%} | {r['any_of_5']:.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
