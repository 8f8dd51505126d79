"""The swap test's gate on a one-seed macro-F1 verdict: false gains and power, with and without.

    .venv/bin/python bench/swap_gate.py [--reps 600]

A 3-class classifier on `n` examples; example i is right with probability sigmoid(z_i), with
z_i ~ N(1, 1.5) (the examples' difficulty), and a wrong answer is one of the two other classes
at random. No effect: both runs draw from the same z. An effect: the variant's z is 1.0 higher
(accuracy about +12 points). Each comparison goes through `pairs.make_arms`,
`versus.paired_stats` and `rules.verdict` on macro-F1, one seed per arm, as `tunelab compare`
judges a row; "without" judges the same draws with the record's `swap` left out (the
percentile bootstrap alone, as before the gate). Columns: the share reading "improved on one
seed" (the nominal rate under no effect is 2.5%) and "worse on one seed".
"""

from __future__ import annotations

import argparse

import numpy as np

from tunelab.core.sections import Hypothesis
from tunelab.stages.compare.pairs import make_arms
from tunelab.stages.compare.rules import verdict
from tunelab.stages.compare.versus import paired_stats

LABELS = ["a", "b", "c"]
HYPOTHESIS = Hypothesis(behaviour="A/A", metric="macro_f1", min_effect=0.0)


def predictions(gold: np.ndarray, predicted: np.ndarray) -> dict:
    return {
        f"e{i:03d}": {"id": f"e{i:03d}", "gold": LABELS[g], "predicted": LABELS[p]}
        for i, (g, p) in enumerate(zip(gold, predicted, strict=True))
    }


def draw(gold: np.ndarray, z: np.ndarray, rng) -> np.ndarray:
    right = rng.random(len(gold)) < 1 / (1 + np.exp(-z))
    return np.where(right, gold, (gold + rng.integers(1, 3, len(gold))) % 3)


def words(n: int, effect: float, reps: int, rng) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"with": [], "without": []}
    for _ in range(reps):
        gold, z = rng.integers(0, 3, n), rng.normal(1.0, 1.5, n)
        a, b = predictions(gold, draw(gold, z, rng)), predictions(gold, draw(gold, z + effect, rng))
        versus = paired_stats(make_arms([a], [b], LABELS, ("a", "b")), "macro_f1")
        versus["guardrails"] = []
        out["with"].append(verdict(versus, HYPOTHESIS, None, judged=("b", 1))[0])
        versus.pop("swap", None)
        out["without"].append(verdict(versus, HYPOTHESIS, None, judged=("b", 1))[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=600, help="draws per row")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.reps} draws per row; macro-F1 on one seed per arm; 3 classes")
    print(
        "| examples | effect | improved on one seed: with / without the swap test "
        "| worse on one seed: with / without |"
    )
    print("|---:|---|---:|---:|")
    for effect, name in ((0.0, "none"), (1.0, "+1.0 logit")):
        for n in (10, 20, 50, 90):
            w = words(n, effect, args.reps, rng)
            share = {
                k: (v.count("improved on one seed") / len(v), v.count("worse on one seed") / len(v))
                for k, v in w.items()
            }
            print(
                f"| {n} | {name} | {share['with'][0]:.1%} / {share['without'][0]:.1%} | "
                f"{share['with'][1]:.1%} / {share['without'][1]:.1%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
