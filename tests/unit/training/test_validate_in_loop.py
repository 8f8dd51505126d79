"""Validation inside `train()`: keep best leaves the best step's weights in the model (the
record alone had been checked, so a loop that skipped the restore handed over the last step's
weights under "kept step N"), the last step is measured off the cadence too, and training goes
on in train mode after each measurement."""

from __future__ import annotations

import threading

import pytest
import torch
from test_loop import Bag, examples

from tunelab.core.errors import TrainingInterrupted
from tunelab.core.spec import TrainingSpec
from tunelab.training.loop import train
from tunelab.training.validate import Validation


class Scripted(Validation):
    """The real measurement (its side effects run), then a scripted loss; the weights and the
    model's mode at each measurement kept aside."""

    def __init__(self, *args, script: list[float], **kwargs):
        super().__init__(*args, **kwargs)
        self.script, self.weights, self.modes = list(script), {}, []

    def measure(self, model, device, pad_id):
        super().measure(model, device, pad_id)
        self.modes.append(model.training)
        return self.script.pop(0)

    def record(self, model, step, loss, train_loss):
        self.weights[step] = {n: p.detach().clone() for n, p in model.named_parameters()}
        return super().record(model, step, loss, train_loss)


def test_keep_best_leaves_the_best_steps_weights_in_the_model():
    v = Scripted(examples(6), every=2, keep="best", script=[0.5, 0.3, 0.4, 0.6, 0.7])
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 10}, validate_every=2, keep="best"
    )
    model = Bag()
    out = train(model, examples(), cfg, torch.device("cpu"), pad_id=0, validation=v)
    assert out["kept"]["step"] == 4
    for name, p in model.named_parameters():
        assert torch.equal(p, v.weights[4][name]), name
    assert not all(torch.equal(p, v.weights[10][n]) for n, p in model.named_parameters())


def test_the_last_step_is_measured_and_training_goes_on_in_train_mode():
    v = Scripted(examples(6), every=4, keep="last", script=[0.5, 0.4, 0.3])
    cfg = TrainingSpec(lr=0.05, global_batch=6, microbatch=3, budget={"steps": 9}, validate_every=4)
    out = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0, validation=v)
    assert [p["step"] for p in out["validation"]["points"]] == [4, 8, 9]
    assert v.modes == [True, True, True]  # each measured after training went on in train mode


class StopAt(threading.Event):
    """A stop the loop sees asked for at its `at`-th look (one look a step)."""

    def __init__(self, at: int):
        super().__init__()
        self.looks, self.at, self.cause = 0, at, "SIGTERM"

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks >= self.at


def test_a_run_resumed_before_its_first_point_gives_that_point_the_same_training_loss(tmp_path):
    """Its `train_loss` (which the overfitting warning weighs) had covered the steps after the
    stop alone: 1.0697 where the unbroken run had 1.0862 (hT F2)."""
    cfg = TrainingSpec(lr=0.05, global_batch=6, microbatch=3, budget={"steps": 8}, validate_every=5)

    def points(run_dir, **kw) -> list[dict]:
        run_dir.mkdir(exist_ok=True)
        torch.manual_seed(0)
        v = Validation(examples(6), every=5, keep="last")
        model, cpu = Bag(), torch.device("cpu")
        out = train(model, examples(), cfg, cpu, pad_id=0, run_dir=run_dir, validation=v, **kw)
        return out["validation"]["points"]

    unbroken = points(tmp_path / "unbroken")
    with pytest.raises(TrainingInterrupted):
        points(tmp_path / "stopped", stop=StopAt(3))
    resumed = points(tmp_path / "stopped", resume=True)
    assert [p["step"] for p in resumed] == [p["step"] for p in unbroken] == [5, 8]
    assert resumed == unbroken
