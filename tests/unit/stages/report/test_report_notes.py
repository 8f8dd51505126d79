"""A run's note in the report's runs table: what the terminal warns of, said there too."""

from __future__ import annotations

import math

from tunelab.stages.report.sections import _note


def test_a_diverged_run_a_lost_start_and_a_loss_that_is_no_number_are_noted():
    """A run whose loss went NaN was a green "completed" with no note, and a diverged one that
    no comparison judged carried no warning anywhere on the page."""
    said = "the training loss ended higher than it began (1.0 over the first 1 step(s), ...)"
    record = {"training": {"steps": 8, "final_loss": math.nan, "diverged": {"message": said}}}
    note = _note(record, "completed")
    assert "its training loss ended nan: its weights are not numbers" in note and said in note
    lost = {"training": {"steps": 8, "start_lost": {"message": "the probe's start was lost"}}}
    assert _note(lost, "completed") == "the probe's start was lost"


def test_an_interrupted_runs_note_is_its_message_not_the_exception_class():
    record = {"error": "Traceback ...\ntunelab.core.errors.TrainingInterrupted: Ctrl-C; stopped"}
    assert _note(record, "interrupted") == "Ctrl-C; stopped"
    plain = {"error": "ValueError: a value: with a colon"}
    assert _note(plain, "failed") == "ValueError: a value: with a colon"


def test_a_multilabel_runs_note_names_the_threshold_it_decides_at():
    """Chosen on validation and part of what is shipped, it was nowhere on the page."""
    metrics = {"threshold": {"value": 0.65, "chosen_on": "validation", "metric": "micro_f1"}}
    note = _note({"metrics": metrics, "training": {"steps": 4}}, "completed")
    assert note == "decides at threshold 0.65 on every label, chosen on validation for micro_f1"
