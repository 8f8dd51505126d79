"""Validation during training: the overfitting rule, and the best step's weights kept."""

from __future__ import annotations

import pytest
import torch

from tunelab.core.spec import TrainingSpec
from tunelab.training.validate import Validation, window_loss


def measured(losses: list[tuple[float, float]], keep: str = "last", model=None) -> Validation:
    """A Validation that measured (validation loss, training loss) every 10 steps."""
    v = Validation([], every=10, keep=keep, patience=3)
    model = model or torch.nn.Linear(2, 2)
    for i, (val, train) in enumerate(losses, 1):
        v.record(model, 10 * i, val, train)
    return v


def test_the_warning_needs_patience_rises_while_the_training_loss_falls():
    rising = [(0.50, 0.9), (0.40, 0.7), (0.45, 0.5), (0.50, 0.3), (0.60, 0.2)]
    v = measured(rising)
    assert v.warned["step"] == 50  # the third rise in a row
    assert "(from 0.4000 at step 20 to 0.6000 at step 50)" in v.warned["message"]
    assert "lowest validation loss was at step 20 (0.4000)" in v.warned["message"]
    assert v.warned["message"].endswith("which `training.keep: best` would keep")  # keep: last
    assert measured(rising, keep="best").warned["message"].endswith("`training.keep: best` keeps")
    assert measured(rising[:4]).warned is None  # two rises: not yet
    both_rise = [(0.5, 0.5), (0.6, 0.6), (0.7, 0.7), (0.8, 0.8)]
    assert measured(both_rise).warned is None  # training loss rose too: not overfitting
    dip = [(0.5, 0.9), (0.6, 0.7), (0.55, 0.5), (0.7, 0.3), (0.8, 0.2)]
    assert measured(dip).warned is None


def test_keep_best_restores_the_weights_of_the_lowest_validation_loss():
    model = torch.nn.Linear(2, 2)
    v = Validation([], every=10, keep="best", patience=3)
    weights = {}
    for step, val in ((10, 0.5), (20, 0.3), (30, 0.4)):
        with torch.no_grad():
            model.weight.fill_(step)
        weights[step] = model.weight.detach().clone()
        v.record(model, step, val, 1.0)
    kept = v.restore(model, last_step=30)
    assert kept == {"rule": "best validation loss", "step": 20, "validation_loss": 0.3}
    assert torch.equal(model.weight, weights[20])
    assert measured([(0.5, 1.0)]).restore(model, 10) == {"rule": "last", "step": 10}


def test_keep_best_needs_a_validation_cadence():
    with pytest.raises(ValueError, match="set validate_every"):
        TrainingSpec(keep="best")
    assert TrainingSpec(keep="best", validate_every=5).keep == "best"


def test_the_training_loss_of_a_window_is_its_steps_mean():
    history = [{"step": s, "loss": float(s)} for s in range(1, 7)]
    assert window_loss(history, 3) == 5.0


def _history(points: dict[int, float], steps: int) -> list[dict]:
    """A run's history of `steps` steps, training loss 1/step, `points` measured (step: loss)."""
    return [
        {"step": s, "loss": 1.0 / s, **({"validation_loss": points[s]} if s in points else {})}
        for s in range(1, steps + 1)
    ]


def test_a_resumed_run_goes_on_from_its_curve_and_says_when_its_best_weights_were_lost():
    """A run stopped at step 85 and resumed kept step 120 as its best, where step 60 was lower
    before the stop: the curve, the warning and the best step restart from the history."""
    before = {20: 0.9, 40: 0.85, 60: 0.80, 80: 0.82}
    v = Validation([], every=20, keep="best", patience=3)
    v.resume(_history(before, 85))
    assert [p["step"] for p in v.points] == [20, 40, 60, 80] and v.best["step"] == 60
    uninterrupted = Validation([], every=20, keep="best", patience=3)
    for step, loss in before.items():
        uninterrupted.record(
            torch.nn.Linear(2, 2), step, loss, window_loss(_history(before, step), step - 20)
        )
    assert v.points == uninterrupted.points  # the same training-loss windows too
    model = torch.nn.Linear(2, 2)
    v.record(model, 100, 0.84, 0.01)
    v.record(model, 120, 0.86, 0.01)
    kept = v.restore(model, last_step=120)
    assert kept["rule"] == "last" and kept["step"] == 120
    assert kept["not_kept"].startswith("the lowest validation loss was at step 60 (0.8000)")
    assert v.warned["step"] == 120  # rose at 80, 100 and 120: the points before the stop count
    # a best found after the resume is one whose weights were copied: kept as usual
    w = Validation([], every=20, keep="best", patience=3)
    w.resume(_history(before, 85))
    w.record(model, 100, 0.5, 0.01)
    assert w.restore(model, last_step=120)["step"] == 100
