"""A difference written in the units every view shares: a rate in points, a lower-is-better
metric as its reduction where it is the gain sought and as its own change where it is a
guardrail's cost. The comparison's reasons used to give fractions (`+0.8667`, `limit -0.02`)
and a rise in bits per byte as a negative number, beside points and a positive rise in the
tables, the charts and the model card."""

from __future__ import annotations

from tunelab.core.spec import Hypothesis
from tunelab.stages.compare.rules import verdict
from tunelab.tasks import units


def test_a_rate_is_written_in_points():
    boot = {"delta": 0.8667, "low": 0.7667, "high": 0.95, "basis": "examples"}
    assert units.gain("exact_match", boot) == "+86.7 points (95% CI +76.7 to +95.0, examples)"
    assert units.effect("exact_match", 0.1) == "minimum effect +10.0 points"
    check = {"delta": -0.021, "low": -0.058, "high": 0.012}
    assert units.change("f1", check) == "-2.1 points (-5.8 to +1.2)"
    assert units.limit("f1", 0.02) == "limit -2.0 points"
    assert units.limit("f1", 0.0) == "limit 0 (no drop)"


def test_a_lower_is_better_metric_is_a_reduction_as_a_gain_and_a_rise_as_a_cost():
    boot = {"delta": 0.0123, "low": 0.004, "high": 0.02, "basis": "seeds and examples"}
    assert units.gain("bits_per_byte", boot).startswith("reduction +0.0123 (95% CI +0.0040 to")
    # recorded as the reduction (-0.057: the metric rose by 0.057), written as it moved
    check = {"delta": -0.0570, "low": -0.0629, "high": -0.0510}
    assert units.change("bits_per_byte", check) == "+0.0570 (+0.0510 to +0.0629)"
    assert units.limit("bits_per_byte", 0.05) == "limit +0.05 (a rise)"


def test_the_reasons_a_verdict_records_use_them():
    boot = {"delta": 0.8667, "low": 0.7667, "high": 0.95, "basis": "examples"}
    versus = {
        "bootstrap": boot,
        "concentration": {"concentrated": False},
        "flips": {},
        "guardrails": [],
    }
    hypothesis = Hypothesis(behaviour="b", metric="exact_match", min_effect=0.1)
    _, reasons = verdict(versus, hypothesis, None)
    assert reasons[0] == (
        "exact_match +86.7 points (95% CI +76.7 to +95.0, examples), minimum effect +10.0 points"
    )


def test_a_p_value_that_rounds_to_zero_is_not_printed_as_zero():
    assert (units.p_value(0.0000001), units.p_value(0.041), units.p_value(0.0005)) == (
        "<0.001",
        "0.041",
        "0.001",
    )
