"""Stops that come after the training loop's last look: during the last step's validation
(the run said "stopping after this step", then evaluated and exited 0) and while the trained
weights are written (a run without a checkpoint lost all its training). Each ends the run
interrupted with its weights saved, and `resume` evaluates them without training again."""

from __future__ import annotations

import signal

from test_cli import tl

from tunelab.core.store import Store

TRAINING = {
    "lr": 5e-3,
    "global_batch": 8,
    "microbatch": 4,
    "budget": {"steps": 6},
    "seed": 0,
    "validate_every": 3,
}


def stopped_then_resumed(lab, capsys) -> dict:
    """The run stopped by the planted signal (exit 130, weights saved), then resumed."""
    code, stopped = tl(capsys, "run", "--lab", str(lab), "--name", "late")
    assert code == 130, stopped
    assert stopped["error"].startswith("interrupted (SIGTERM): run r001-late finished training")
    (record,) = Store(lab).runs()
    assert record["status"] == "interrupted" and record["weights"]["files"]
    code, resumed = tl(capsys, "resume", "--lab", str(lab), "r001-late")
    assert code == 0 and resumed["status"] == "completed", resumed
    assert resumed["resumed"][-1]["evaluated_only"] and resumed["training"] == record["training"]
    return resumed


def test_a_stop_during_the_last_steps_validation_is_kept(make_lab, capsys, monkeypatch):
    from tunelab.training.validate import Validation

    lab = make_lab(training=TRAINING)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    real = Validation.measure

    def measured(self, *args, **kwargs):
        if len(self.points) == 1:  # step 6's, the last: the loop has looked for a stop
            signal.raise_signal(signal.SIGTERM)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Validation, "measure", measured)
    resumed = stopped_then_resumed(lab, capsys)
    assert [p["step"] for p in resumed["training"]["validation"]["points"]] == [3, 6]


def test_a_stop_while_the_weights_are_written_waits_for_them(make_lab, capsys, monkeypatch):
    from tunelab.stages.run import variant

    lab = make_lab(training={k: v for k, v in TRAINING.items() if k != "validate_every"})
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    real = variant.save_trained

    def saved(model, folder):
        signal.raise_signal(signal.SIGTERM)  # no checkpoint: the weights are all there is
        return real(model, folder)

    monkeypatch.setattr(variant, "save_trained", saved)
    stopped_then_resumed(lab, capsys)
