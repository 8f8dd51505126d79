"""A one-seed verdict on a primary that is the share of examples right needs McNemar's exact
test too: four fixed and none broken read "improved on one seed" on a percentile bootstrap
whose interval excluded zero, where the exact test gives p = 0.125."""

from __future__ import annotations

from tunelab.core.spec import Hypothesis
from tunelab.stages.compare.rules import verdict

HYPOTHESIS = Hypothesis(behaviour="b", metric="accuracy", min_effect=0.05)


def versus(fixed: int, broken: int, p: float, tests: bool = True) -> dict:
    return {
        "bootstrap": {"delta": 0.111, "low": 0.028, "high": 0.222, "basis": "examples"},
        "mcnemar": {"fixed": fixed, "broken": broken, "p_value": p, "tests_primary": tests},
        "concentration": {"concentrated": False},
        "flips": {},
        "guardrails": [],
    }


def test_four_fixed_none_broken_is_no_evidence_on_one_seed():
    word, reasons = verdict(versus(4, 0, 0.125), HYPOTHESIS, None, judged=("r003-s0", 1))
    assert word == "no evidence"
    assert (
        "only 4 example(s) changed (4 fixed, 0 broken): McNemar's exact test gives p = 0.125"
        in reasons[1]
    )
    assert "tunelab noise r003-s0 --seeds 3" in reasons[2]


def test_enough_changed_examples_or_a_primary_mcnemar_does_not_test_keep_the_verdict():
    assert verdict(versus(12, 1, 0.0034), HYPOTHESIS, None)[0] == "improved on one seed"
    macro = versus(4, 0, 0.125, tests=False)  # a classifier's macro-F1: not the share right
    assert verdict(macro, HYPOTHESIS, None)[0] == "improved on one seed"
    seeds = versus(4, 0, 0.125)
    seeds["bootstrap"] |= {"basis": "seeds and examples", "example": dict(seeds["bootstrap"])}
    assert verdict(seeds, HYPOTHESIS, None)[0] == "improved"  # the seeds' interval judges
