"""The model card's words: what a guardrail that regressed says of its interval, and what a
guardrail's line says of its limit."""

from __future__ import annotations


def test_a_regressed_line_says_whether_its_interval_counts_the_seeds():
    from tunelab.stages.export.card import _regressed_line

    r = {"metric": "bits_per_byte", "on": "news.jsonl", "scope": "overall", "status": "broken"}
    r |= {"delta": -0.0653, "low": -0.0723, "high": -0.0586}
    assert _regressed_line(r | {"seeds": False}) == (
        "bits_per_byte on news.jsonl rose by 0.0653 against the reference (0.0586 to 0.0723, "
        "one seed): broken."
    )
    assert "(0.0586 to 0.0723, over the seeds): broken." in _regressed_line(r | {"seeds": True})
    assert "(0.0586 to 0.0723): broken." in _regressed_line(r)  # a bundle exported before


def test_the_card_says_its_run_overfitted_and_which_step_it_kept():
    """The overfitting warning and the kept step sat in tunelab.json alone."""
    from tunelab.stages.export.card import _validation_lines

    training = {
        "steps": 40,
        "validation": {"overfitting": {"step": 20, "message": "validation loss rose"}},
        "kept": {"rule": "best validation loss", "step": 8, "validation_loss": 1.1016},
    }
    card = " ".join(_validation_lines(training))
    assert "**Warning:** while it trained, validation loss rose." in card
    assert "These are step 8's weights of the 40 it trained (`training.keep: best`" in card
    assert _validation_lines({"steps": 40, "kept": {"rule": "last", "step": 40}}) == []


def test_a_repeated_test_score_is_marked_in_the_front_matter():
    """model-index listed the third look at the test split as a plain `test micro_f1`: tools
    that read the front matter saw a clean test score."""
    from tunelab.stages.export.card import front_matter

    info = {
        "base_model": {"name": "tiny", "weights_sha256": "ab"},
        "spec": {},
        "task": "classification",
        "kind": "encoder",
        "method": "lora",
        "run": "r003-lora",
        "data_version": "v1",
        "validation_metrics": {"accuracy": 0.9, "n": 40},
        "final": {"n": 3, "repeated": True, "metrics": {"accuracy": 0.8, "n": 30}},
        "test_access_log": [{}, {}, {}],
    }
    (scores,) = front_matter(info)["model-index"][0]["results"]
    names = [m["name"] for m in scores["metrics"]]
    assert names == [
        "validation accuracy",
        "test accuracy (test split opened 3 times; this is look 3)",
    ]
    info["final"] |= {"n": 1, "repeated": False}
    (scores,) = front_matter(info | {"test_access_log": [{}]})["model-index"][0]["results"]
    assert [m["name"] for m in scores["metrics"]][1] == "test accuracy"


def test_a_guardrail_line_says_its_limit_and_on_which_side_its_interval_ends():
    """It read "(overall, a drop of at most 0.0 points): holds, margin +81.7 points at
    overall" where the terminal said "may not drop"."""
    from tunelab.stages.export.card import _guardrail_line

    g = {"metric": "json_valid", "scope": "overall", "max_drop": 0.0, "status": "holds"}
    g |= {"worst": "overall", "margin": 0.817}
    assert _guardrail_line(g) == (
        "Guardrail json_valid (overall, may not drop): holds, its interval's worst end 81.7 "
        "points inside the limit, at overall."
    )
    rise = g | {"metric": "bits_per_byte", "on": "news.jsonl", "max_drop": 0.02, "margin": -0.01}
    assert _guardrail_line(rise | {"status": "broken"}) == (
        "Guardrail bits_per_byte on news.jsonl (overall, a rise of at most 0.0200): broken, its "
        "interval's worst end 0.0100 past the limit, at overall."
    )


def test_a_failure_s_answer_is_one_code_span_whatever_its_lines_and_backticks():
    from tunelab.stages.export.card import _as_written

    assert _as_written("Label: positive\nReason: ok.") == "`Label: positive↵Reason: ok.`"
    assert _as_written("a\r\nb") == "`a↵b`"
    assert _as_written("use `ls` here") == "`` use `ls` here ``"  # CommonMark: a longer fence
    assert _as_written({"name": "a"}) == '`{"name": "a"}`'
    assert _as_written("") == "(nothing)"


def test_a_behaviour_written_without_its_full_stop_ends_as_a_sentence():
    from tunelab.stages.export.card import _sentence

    assert _sentence("Sorts topics better") == "Sorts topics better."
    assert _sentence("Sorts topics better. ") == "Sorts topics better."


def test_the_card_repeats_what_the_comparison_warned_of_its_run():
    """compare's warnings about the run handed over (one answer for every example, a probe
    start that broke) were in tunelab.json's comparison row alone, not in the card."""
    from tunelab.stages.export.card import warning_lines
    from tunelab.stages.export.limitations import limitations

    one = "r003-lora gives all 12 validation examples one answer ('business'): it separates none"
    row = {"verdict": "no evidence", "warnings": [one]}
    lim = limitations({}, {"id": "c002", "row": row}, [], {}, {})
    assert lim["warnings"] == [one]
    assert warning_lines("r003-lora", lim) == ["", f"**Warning:** {one}."]
    assert warning_lines("r003-lora", limitations({}, None, [], {}, {})) == []
