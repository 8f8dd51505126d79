"""A run whose training loss ended higher than it began is said to have diverged."""

from __future__ import annotations

import torch

from tunelab.training.divergence import diverged, start_lost, training_changes


def steps(*losses: float) -> list[dict]:
    return [{"step": i + 1, "loss": x} for i, x in enumerate(losses)]


def test_a_loss_that_ends_above_its_start_is_a_divergence_with_what_to_try():
    found = diverged(steps(154.2, 170.0, 200.0, 260.0, 290.0, 314.1))
    assert found["first"] == 154.2 and found["last"] == 314.1 and found["steps_each"] == 1
    assert "ended higher than it began (154.2000 over the first 1 step(s)" in found["message"]
    assert "method.head_init: new" in found["message"]


def test_a_loss_that_falls_or_too_few_steps_say_nothing():
    assert diverged(steps(2.3, 2.1, 1.8, 1.9, 1.2, 0.9)) is None
    at_chance = [1.0977, 1.099, 1.101, 1.095, 1.1, 1.1058]  # three classes, a tiny model
    assert diverged(steps(*at_chance)) is None
    assert diverged(steps(0.002, 0.001, 0.002, 0.003, 0.002, 0.003)) is None  # near 0: noise
    probe_start = [0.0284, 0.03, 0.035, 0.04, 0.045, 0.0474]  # a head fitted to train already
    assert diverged(steps(*probe_start)) is None
    assert diverged(steps(0.5, 0.9, 1.4)) is None  # three steps: the check's kind of run
    assert diverged([]) is None


def test_each_end_is_a_tenth_of_the_steps():
    # one early spike does not make a divergence once a tenth of 40 steps is averaged
    losses = [9.0, 1.0, 1.0, 1.0] + [0.9] * 32 + [1.2, 1.2, 1.2, 1.2]
    assert diverged(steps(*losses)) is None


def test_compare_warns_of_a_variant_that_diverged():
    from tunelab.stages.compare.notes import pair_warnings as _warnings

    went = diverged(steps(154.2, 170.0, 200.0, 260.0, 290.0, 314.1))
    run = {"id": "r003-lora", "kind": "variant", "training": {"diverged": went}}
    versus = {"concentration": {"concentrated": False}}
    warned = _warnings({"id": "r001", "kind": "baseline"}, run, versus)
    assert f"r003-lora: {went['message']}" in warned


PROBE = {"from": "probe", "train_loss": 0.0205, "prior_loss": 1.0986}


def test_a_probe_start_worse_than_the_label_shares_is_lost_and_said_with_what_to_try():
    """The tests' tiny BERT: the probe's loss 0.02 in evaluation mode, the first step's 303."""
    lost = start_lost(steps(303.8, 280.0, 260.2), PROBE)
    assert lost["first"] == 303.8 and lost["probe"] == 0.0205 and lost["prior"] == 1.0986
    said = lost["message"]
    assert "(loss 0.0205 on train, in evaluation mode)" in said
    assert "but the first training step's loss was 303.8000, above the 1.0986" in said
    assert "does not survive training mode (dropout)" in said and "method.head_init: new" in said
    # the check names its own loss
    assert (
        "but the slice's loss was 3.1"
        in start_lost(steps(3.1), PROBE, "the slice's loss")["message"]
    )


def test_a_start_below_the_label_shares_a_new_head_or_an_old_record_say_nothing():
    assert start_lost(steps(0.0094, 0.02, 0.3), PROBE) is None  # the demo's MiniLM: kept
    assert start_lost(steps(1.0986), PROBE) is None  # only above the shares' loss
    assert start_lost(steps(303.8), None) is None  # head_init: new
    assert start_lost(steps(303.8), {"from": "probe", "train_accuracy": 1.0}) is None  # older
    assert start_lost([], PROBE) is None


def test_compare_warns_of_a_variant_whose_probe_start_was_lost():
    from tunelab.stages.compare.notes import pair_warnings

    lost = start_lost(steps(303.8, 280.0), PROBE)
    run = {"id": "r004-lpft", "kind": "variant", "training": {"start_lost": lost}}
    versus = {"concentration": {"concentrated": False}}
    assert f"r004-lpft: {lost['message']}" in pair_warnings({"id": "r001"}, run, versus)


def test_the_warning_names_what_training_mode_changes_in_the_model():
    """It blamed dropout alone where an image model's full fine-tune had put its batch norms
    on batches of 16 (first loss 14.9; its LoRA run, norms frozen, started at 0.016)."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    assert training_changes(net) == "batch normalisation on each batch's own statistics"
    net[1].requires_grad_(False)  # frozen: train_mode keeps its running statistics
    assert training_changes(net).startswith("which changes nothing here")  # not "(training mode)"
    net.append(torch.nn.Dropout(0.1))
    assert training_changes(net) == "dropout"
    said = start_lost([{"loss": 3.0}], {"train_loss": 0.01, "prior_loss": 1.7}, changes="x and y")
    assert "does not survive training mode (x and y)" in said["message"]
