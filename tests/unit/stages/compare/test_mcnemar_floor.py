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


def test_a_one_seed_loss_on_few_changed_examples_is_no_evidence_too():
    loss = versus(0, 4, 0.125)
    loss["bootstrap"] = {"delta": -0.111, "low": -0.222, "high": -0.028, "basis": "examples"}
    word, reasons = verdict(loss, HYPOTHESIS, None, judged=("r003-s0", 1))
    assert word == "no evidence" and "only 4 example(s) changed (0 fixed, 4 broken)" in reasons[1]
    loss["mcnemar"] = {"fixed": 0, "broken": 12, "p_value": 0.0005, "tests_primary": True}
    assert verdict(loss, HYPOTHESIS, None)[0] == "worse on one seed"


def test_a_gain_of_exactly_the_minimum_effect_meets_it_however_the_floats_round():
    """820 of 1,000 right against 800 is a gain of 0.019999999999999907 in floats: against a
    minimum effect of 0.02 it read "the estimate is below the minimum effect"."""
    gain = versus(30, 10, 0.002)
    gain["bootstrap"] = {"delta": 0.82 - 0.80, "low": 0.012, "high": 0.029, "basis": "examples"}
    two_points = Hypothesis(behaviour="b", metric="accuracy", min_effect=0.02)
    assert gain["bootstrap"]["delta"] < 0.02
    word, reasons = verdict(gain, two_points, None)
    assert word == "improved on one seed" and not any("below the minimum" in r for r in reasons)
    gain["bootstrap"]["delta"] = 0.0199
    word, reasons = verdict(gain, two_points, None)
    assert word == "no evidence" and "the estimate is below the minimum effect" in reasons
    unsure = versus(30, 10, 0.002)  # the same gain on an interval through zero
    unsure["bootstrap"] = {"delta": 0.82 - 0.80, "low": -0.01, "high": 0.05, "basis": "examples"}
    word, reasons = verdict(unsure, two_points, None)
    assert word == "no evidence" and "the interval includes zero" in reasons
    assert not any("below the minimum" in r for r in reasons)


def test_enough_changed_examples_or_a_primary_mcnemar_does_not_test_keep_the_verdict():
    assert verdict(versus(12, 1, 0.0034), HYPOTHESIS, None)[0] == "improved on one seed"
    macro = versus(4, 0, 0.125, tests=False)  # a classifier's macro-F1: not the share right
    assert verdict(macro, HYPOTHESIS, None)[0] == "improved on one seed"
    seeds = versus(4, 0, 0.125)
    seeds["bootstrap"] |= {"basis": "seeds and examples", "example": dict(seeds["bootstrap"])}
    assert verdict(seeds, HYPOTHESIS, None)[0] == "improved"  # the seeds' interval judges


def test_a_mean_of_partial_credits_on_few_examples_needs_the_sign_flip_test_too():
    """On 5 examples the percentile bootstrap excluded zero 9.6% of the time under no effect
    (against 2.5%): a field accuracy that rose on all 5 pages gives an exact p of 2/32."""
    from tunelab.stages.compare.pairs import make_arms
    from tunelab.stages.compare.versus import paired_stats

    def pages(exact: list[int]) -> dict:  # each page's count of 10 fields exactly right
        def fields(k: int) -> dict:
            return {f"f{j}": {"present": True, "exact": j < k} for j in range(10)}

        return {str(i): {"id": str(i), "score": {"fields": fields(k)}} for i, k in enumerate(exact)}

    pair = make_arms([pages([2] * 5)], [pages([3, 4, 5, 6, 7])], [], ("a", "b"))
    stats = paired_stats(pair, "field_accuracy")
    assert stats["sign_flip"] == {"changed": 5, "n": 5, "p_value": 0.0625}
    assert "mcnemar" not in stats and stats["bootstrap"]["low"] > 0  # the bootstrap alone: a gain
    hypothesis = Hypothesis(behaviour="b", metric="field_accuracy", min_effect=0.05)
    word, reasons = verdict(stats | {"guardrails": []}, hypothesis, None, judged=("b", 1))
    assert word == "no evidence"
    assert any("the paired sign-flip test gives p = 0.0625" in r for r in reasons)


def test_an_improved_verdict_says_which_guardrails_held_on_tied_seeds():
    """A guardrail whose seeds scored alike is judged on the examples alone: it held beside a
    seed-aware "improved" and nothing said so."""
    seeds = versus(12, 1, 0.0034)
    seeds["bootstrap"] |= {"basis": "seeds and examples", "example": dict(seeds["bootstrap"])}
    tied = {"status": "holds", "seeds_tied": {"sources": ["lora (2 seeds)"], "df": 1}}
    seeds["guardrails"] = [{"metric": "f1", "status": "holds", "checks": {"sport": tied}}]
    word, reasons = verdict(seeds, HYPOTHESIS, None)
    assert word == "improved"
    assert "held over the examples alone, the seeds scoring alike on them: f1 sport" in reasons[-1]


def test_a_macro_f1_on_few_examples_needs_the_swap_test_too():
    """Macro-F1 had no gate on one seed: under no effect it read "improved on one seed" 4.5% of
    the time on 10 examples (against 2.5%). Four fixed of 12, none broken: the bootstrap alone
    calls it a gain, the swap test over the 4 that changed cannot tell it from chance."""
    from tunelab.stages.compare.pairs import make_arms
    from tunelab.stages.compare.versus import paired_stats

    labels = ["a", "b", "c"]
    gold = ["a", "b", "c"] * 4

    def run(predicted: list[str]) -> dict:
        return {
            str(i): {"id": str(i), "gold": g, "predicted": p}
            for i, (g, p) in enumerate(zip(gold, predicted, strict=True))
        }

    before = ["a", "b", "c"] * 2 + ["b", "c", "a", "b", "a", "c"]  # 7 of 12 right
    after = ["a", "b", "c"] * 3 + ["a", "a", "c"]  # 4 fixed, none broken
    stats = paired_stats(make_arms([run(before)], [run(after)], labels, ("a", "b")), "macro_f1")
    assert stats["swap"]["changed"] == 4 and stats["swap"]["n"] == 12
    assert stats["swap"]["p_value"] == 0.125  # 2 of the 16 patterns: none and all swapped
    assert not stats["mcnemar"]["tests_primary"] and stats["bootstrap"]["low"] > 0
    hypothesis = Hypothesis(behaviour="b", metric="macro_f1", min_effect=0.05)
    word, reasons = verdict(stats | {"guardrails": []}, hypothesis, None, judged=("b", 1))
    assert word == "no evidence"
    assert any("the paired swap test gives p = 0.125" in r for r in reasons)
    accuracy = paired_stats(make_arms([run(before)], [run(after)], labels, ("a", "b")), "accuracy")
    assert "swap" not in accuracy  # McNemar's exact test is accuracy's own
