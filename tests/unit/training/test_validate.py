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
