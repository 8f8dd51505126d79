"""The ablation demo's sentences: what each answer says follows its own interval, minimum effect
and compute, and the demo's spec is one the lab accepts."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.overrides import parse_value
from tunelab.core.spec import load_spec
from tunelab.demo.ablation import QUESTIONS, SPEC, _sentence, _settled
from tunelab.demo.report import write_spec

GQA = QUESTIONS[0]
MOE = QUESTIONS[2]


def answer(
    reduction, low, high, verdict="no evidence", compute=None, per_source=None, example=None
):
    """An answer judged over the seeds (sd 5 mbit/byte); `example`: the documents' interval
    (default: the judged one halved in width)."""
    half = (high - low) / 4
    return {
        "per_source": per_source or {},
        "reduction": reduction,
        "low": low,
        "high": high,
        "basis": "seeds and examples",
        "example": example or {"low": reduction - half, "high": reduction + half},
        "seed_sd": 0.005,
        "verdict": verdict,
        "compute": compute or {},
    }


def test_a_reduction_beyond_the_noise_names_the_better_choice():
    said = _sentence(GQA, answer(0.02, 0.012, 0.03, "improved"), 0.01)
    assert (
        "with GQA, bits per byte fell by 20.0 mbit/byte (reduction +20.0; 95% CI over the "
        "documents alone +15.5 to +24.5" in said
    )
    assert "with the reference's seed noise (sd 5.0 mbit/byte) +12.0 to +30.0):" in said
    assert "GQA did better than MHA beyond the seeds' reach; verdict improved." in said
    assert "matched (within 5%)" in said


def test_the_tolerance_is_the_one_compare_uses(monkeypatch):
    import tunelab.demo.ablation as demo

    monkeypatch.setattr(demo, "TOLERANCE", 0.1)
    assert "matched (within 10%)" in _sentence(GQA, answer(0.02, 0.012, 0.03), 0.01)


def test_a_rise_beyond_the_noise_names_the_reference():
    said = _sentence(GQA, answer(-0.02, -0.03, -0.012, "worse"), 0.01)
    assert "MHA did better than GQA beyond the seeds' reach; verdict worse." in said


def test_a_difference_below_the_minimum_effect_says_so():
    said = _sentence(GQA, answer(0.0004, 0.0001, 0.0007), 0.01)
    assert "beyond the seeds' reach, by less than the 10 mbit/byte that would count" in said


def test_documents_that_exclude_zero_within_the_seeds_reach_say_so():
    ex = {"low": 0.002, "high": 0.006}
    said = _sentence(GQA, answer(0.004, -0.01, 0.018, "within seed noise", example=ex), 0.01)
    assert "the documents tell the two apart, but not beyond the seeds' noise" in said
    assert "a new seed alone" not in said  # no seed moved it that far: the interval is wide
    assert "verdict within seed noise" in said


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


def test_a_source_that_moved_beyond_the_seeds_is_named():
    sources = {
        "manuals": {"delta": -0.39, "low": -0.45, "high": -0.33},
        "news": {"delta": 0.011, "low": -0.01, "high": 0.03},
    }
    said = _sentence(GQA, answer(0.009, -0.01, 0.03, per_source=sources), 0.01)
    assert (
        "On manuals alone bits per byte rose by 390.0 mbit/byte (reduction -450.0 to -330.0), "
        "beyond the seeds' reach" in said
    )
    assert "news alone" not in said


def test_the_closing_sentence_splits_settled_from_open_questions():
    answers = [answer(0.2, 0.1, 0.3, "improved"), *[answer(0.01, -0.01, 0.03)] * 3]
    said = _settled(QUESTIONS, answers)
    assert "Beyond the seeds' reach overall: GQA (improved); on one source only: none;" in said
    assert "within the seeds' noise: NoPE in layers 1 and 3, MoE, manuals by size." in said
    assert "an interval is about ±20 mbit/byte wide: a smaller change cannot be settled" in said


def test_a_question_settled_on_one_source_only_is_not_called_settled_overall():
    """The MoE's manuals fell beyond the seeds while its overall interval crossed zero: it
    was listed as settled beside a variant that was."""
    fell = {"manuals": {"delta": 0.038, "low": 0.023, "high": 0.053}}
    rose = {"manuals": {"delta": -0.37, "low": -0.43, "high": -0.32}}
    answers = [
        answer(-0.01, -0.1, 0.08),
        answer(-0.008, -0.1, 0.085),
        answer(-0.018, -0.11, 0.075, "within seed noise", per_source=fell),
        answer(0.044, -0.046, 0.134, "guardrail broken", per_source=rose),
    ]
    said = _settled(QUESTIONS, answers)
    assert "Beyond the seeds' reach overall: none;" in said
    assert (
        "on one source only: MoE (manuals fell), manuals by size (manuals rose; guardrail "
        "broken); within the seeds' noise: GQA, NoPE in layers 1 and 3." in said
    )
    assert "about ±90 mbit/byte wide" in said
    # a source's answer is picked from every per-source interval looked at (hR 6)
    assert "one of 2 per-source intervals: were no change real, one or more would fall" in said
    assert "about 10% of the time by chance" in said


def test_without_a_noise_record_a_difference_is_not_called_beyond_the_seeds():
    said = _sentence(
        GQA, answer(0.02, 0.012, 0.03, "improved on one seed") | {"basis": "examples"}, 0.01
    )
    assert "; no seed noise known): GQA did better than MHA on these documents, on one seed" in said
    assert "seeds' reach" not in said


def test_a_seed_control_says_which_way_bits_per_byte_moved():
    import io

    from rich.console import Console

    from tunelab.demo.ablation import _seed_control

    boot = {"delta": -0.0151, "low": -0.0198, "high": -0.0100}
    seeds = [{"run": "r002", "seed": 0}, {"run": "r003", "seed": 625451353}]
    result = {
        "reference": "r002",
        "runs": [
            {"id": "r002", "seeds": seeds},
            {"id": "r003", "arm": "r002", "vs_first": {"bootstrap": boot, "verdict": "x"}},
        ],
    }
    text = io.StringIO()
    said = _seed_control(result, Console(file=text, width=200))
    assert said == [{"run": "r003", "delta": -0.0151, "verdict": "x"}]
    assert (
        "r003 (seed 625451353) against the reference: bits per byte rose by 15.1 mbit/byte "
        "(reduction -15.1; 95% CI over documents -19.8 to -10.0), an interval that excludes zero"
        in (text.getvalue())
    )


def test_an_uneven_router_is_said_beside_the_experts_answer():
    """The experts' answer spoke of compute alone; its router had left one expert of a layer
    with 0.4% of the tokens' assignments (25% balanced)."""
    uneven = "routing is uneven in 3 of 4 expert layers: expert layer 1's busiest expert takes"
    said = _sentence(MOE, answer(-0.0165, -0.12, 0.087) | {"routing": uneven}, 0.01)
    assert said.endswith(f" R{uneven[1:]}.")
    assert "outing" not in _sentence(MOE, answer(-0.0165, -0.12, 0.087), 0.01)
