"""The ablation demo's sentences: what each answer says follows its own interval, minimum effect
and compute, and the demo's spec is one the lab accepts."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.spec import load_spec, parse_value
from tunelab.demo.ablation import QUESTIONS, SPEC, _against_seed, _sentence, _settled
from tunelab.demo.report import write_spec

SEED = QUESTIONS[0]
GQA = QUESTIONS[1]
MOE = QUESTIONS[3]


def answer(reduction, low, high, verdict="no evidence", compute=None, per_source=None):
    return {
        "per_source": per_source or {},
        "reduction": reduction,
        "low": low,
        "high": high,
        "verdict": verdict,
        "compute": compute or {},
    }


def test_a_reduction_beyond_the_noise_names_the_better_choice():
    said = _sentence(GQA, answer(0.02, 0.012, 0.03, "improved"), 0.01)
    assert "+20.0 mbit/byte (95% CI +12.0 to +30.0) for GQA" in said
    assert "GQA did better than MHA beyond the noise; verdict improved." in said
    assert "matched (within 5%)" in said


def test_a_rise_beyond_the_noise_names_the_reference():
    said = _sentence(GQA, answer(-0.02, -0.03, -0.012, "worse"), 0.01)
    assert "MHA did better than GQA beyond the noise; verdict worse." in said


def test_a_difference_below_the_minimum_effect_says_so():
    said = _sentence(GQA, answer(0.0004, 0.0001, 0.0007), 0.01)
    assert "beyond the noise, by less than the 10 mbit/byte that would count" in said


def test_an_interval_across_zero_settles_nothing():
    said = _sentence(GQA, answer(0.001, -0.004, 0.006), 0.01)
    assert "cannot be told apart" in said and "did better" not in said


def test_experts_with_matched_active_compute_are_called_matched():
    compute = {"total parameters": (200_000, 300_000)}
    said = _sentence(MOE, answer(0.0, -0.01, 0.01, compute=compute), 0.01)
    assert "Active parameters and FLOPs per token are matched" in said
    assert "1.50x the parameters in all" in said


def test_unmatched_compute_is_named_with_its_numbers():
    compute = {"total parameters": (200_000, 180_000), "FLOPs per token": (1_000, 900)}
    said = _sentence(GQA, answer(0.02, 0.01, 0.03, compute=compute), 0.01)
    assert "Compute is not matched (total parameters 200,000 -> 180,000, FLOPs per token" in said


def test_the_demo_spec_and_each_question_validate(tmp_path: Path):
    paths = {"news": tmp_path / "news", "manuals": tmp_path / "manuals.jsonl"}
    for question in (None, *QUESTIONS):
        overrides = {}
        if question:
            key, _, value = question.assignment.partition("=")
            overrides = {key: parse_value(value)}
        path = write_spec(tmp_path / "lab", SPEC, "demo", paths)
        spec = load_spec(path, overrides)
        assert spec.task.type == "pretrain" and spec.model.init == "scratch"


def test_the_seed_comes_first_and_the_rest_are_read_against_it():
    assert SEED.assignment.startswith("training.seed=")
    seed = answer(-0.004, -0.006, -0.002)
    assert "more than twice the 4.0 mbit/byte" in _against_seed(answer(0.009, 0.005, 0.012), seed)
    within = _against_seed(answer(-0.006, -0.008, -0.004), seed)
    assert "cannot tell this change from the luck of the draw" in within


def test_a_source_that_moved_beyond_the_seed_is_named():
    seed = answer(0.07, 0.06, 0.08, per_source={"manuals": 0.06, "news": 0.07})
    mixed = answer(0.09, 0.07, 0.1, per_source={"manuals": -0.39, "news": 0.11})
    said = _against_seed(mixed, seed)
    assert "cannot tell this change from the luck of the draw overall" in said
    assert "on manuals it moved -390.0 mbit/byte against the seed's +60.0 there" in said
    assert "news" not in said


def test_the_closing_sentence_splits_settled_from_open_questions():
    seed = answer(0.07, 0.06, 0.08, per_source={"news": 0.07})
    answers = [seed, answer(0.2, 0.1, 0.3), *[answer(0.01, 0.0, 0.02)] * 3]
    said = _settled(QUESTIONS, answers)
    assert "beyond a seed's reach: GQA;" in said
    assert "not settled by one run each: NoPE in layers 1 and 3, MoE, manuals by size." in said
