"""The check's `head_init` item: a head that starts from a linear probe (`method.head_init:
probe`, LP-FT) is fitted on the slice by the run's own code (`head_init.init_from_probe`) and
must then be the model's output: in evaluation mode, before any step, the model answers the
slice's rows as the probe does, so its accuracy on them is the probe's. A head layer that is
not the last one before the logits, or rows loaded in another label order, fails it. Then the
slice's loss in training mode (dropout on, a batch norm that trains on its batch's
statistics), as the first training step will see it: above that of a head
that knows only the labels' frequencies, the probe's start will not survive training (a
warning: the wiring is right, the start is not worth its name; `divergence.start_lost`).

Without this step a spec with a probe head was checked on a random head, the wiring its run
would not use."""

from __future__ import annotations

import numpy as np
import torch

from tunelab.modeling.classifier_inputs import classifier_batch
from tunelab.modeling.head_init import init_from_probe
from tunelab.stages.check.record import item
from tunelab.training.divergence import start_lost, training_changes
from tunelab.training.step import make_batch, summed_loss, train_mode

AGREE_ROWS = 1
"""How many rows the model's first accuracy may differ from the probe's by: the probe is fitted
in float64 and loaded in the model's float32, so a row on the boundary may tip."""


def head_init_step(ctx: dict) -> dict:
    """Fit the probe head on the slice and compare the model's first accuracy with the probe's."""
    lab, examples, labels = ctx["lab"], ctx["examples"], ctx["labels"]
    absent = _absent(examples, labels)
    counts = lab.store.data_manifest(lab.data_version).get("counts", {}).get("train", {})
    never = [label for label in absent if not counts.get("labels", {}).get(label)]
    if never:  # no slice holds one: the run's probe, fitted on the train split, refuses it
        return item(
            "head_init",
            False,
            f"the train split has no example of {_names(never)}: method.head_init: probe fits "
            "the head on it, so `tunelab run` refuses this spec; add some, or use head_init: new",
        )
    if absent:
        return item(
            "head_init",
            False,
            f"not checked: the probe needs a row of every label and the slice's "
            f"{len(examples)} rows have none of {_names(absent)}; `tunelab check --rows "
            f"{max(len(labels), len(examples))}` takes one of each",
            not_checked=True,
        )
    pad_id, size = ctx["renderer"].pad_id, lab.spec.evaluation.batch_size
    found = init_from_probe(ctx["model"], examples, labels, size, pad_id, lab.device)
    model_accuracy = _first_accuracy(ctx["model"], examples, size, pad_id, lab.device)
    probe_accuracy = found["train_accuracy"]
    agrees = abs(model_accuracy - probe_accuracy) * len(examples) <= AGREE_ROWS + 1e-9
    detail = (
        f"{found['layer']} fitted from a probe on the slice's {len(examples)} rows "
        f"({found['features']} features): the model's first accuracy on them "
        f"{100 * model_accuracy:.1f}%, the probe's {100 * probe_accuracy:.1f}%"
    )
    if not agrees:
        detail += (
            ": the model does not answer as the probe it was given, so the head's last linear "
            "layer is not what the logits come from, or its rows are in another label order"
        )
        return item("head_init", agrees, detail, model_accuracy=model_accuracy, probe=found)
    in_training = _loss_in_training_mode(ctx["model"], examples, size, pad_id, lab.device)
    changes = training_changes(ctx["model"])
    detail += (
        f"; its loss {found['train_loss']:.4f}, in training mode ({changes}) {in_training:.4f}"
    )
    lost = start_lost([{"loss": in_training}], found, "the slice's loss in training mode", changes)
    ctx["start_lost"] = lost  # the loss item cannot judge a fall from a start that is gone
    return item(
        "head_init",
        agrees,
        detail,
        model_accuracy=model_accuracy,
        probe=found,
        loss_in_training_mode=round(in_training, 4),
        warning=lost["message"] if lost else None,
    )


@torch.no_grad()
def _loss_in_training_mode(model, examples: list, size: int, pad_id: int, device) -> float:
    """The mean loss on `examples` as the first training step sees them: training mode as the
    steps set it (`step.train_mode`), dropout on (drawn from a forked generator, so the check's
    later items see the same draws), no update, and every buffer as it was after."""
    was_training = model.training
    buffers = {name: b.clone() for name, b in model.named_buffers()}  # batch norm's statistics
    train_mode(model)  # as the steps train: a frozen batch norm stays in evaluation mode
    total = 0.0
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            for i in range(0, len(examples), size):
                batch = make_batch(examples[i : i + size], pad_id, device)
                total += float(summed_loss(model, batch))
    finally:
        model.train(was_training)
        for name, value in model.named_buffers():  # a trainable batch norm's, moved: put back
            value.copy_(buffers[name])
    return total / len(examples)


def _absent(examples: list, labels: list[str]) -> list[str]:
    """The labels no example of a single-label slice carries (a multilabel probe fits each
    label's own yes/no, and says itself when no row has any label)."""
    if not examples or isinstance(examples[0].label, tuple):
        return []
    present = {e.label for e in examples}
    return [label for i, label in enumerate(labels) if i not in present]


def _names(absent: list[str]) -> str:
    shown = ", ".join(absent[:3])
    return shown + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")


@torch.no_grad()
def _first_accuracy(model, examples: list, size: int, pad_id: int, device) -> float:
    """The model's accuracy on `examples` in evaluation mode: argmax against the label, or for
    multilabel rows every label's logit above 0 (sigmoid 0.5) against its 0/1 target, as the
    probe's `train_accuracy` counts it."""
    was_training = model.training
    model.eval()
    try:
        logits = torch.cat(
            [
                model(**classifier_batch(examples[i : i + size], pad_id, device)).logits.float()
                for i in range(0, len(examples), size)
            ]
        ).cpu()
    finally:
        model.train(was_training)
    if isinstance(examples[0].label, tuple):
        gold = np.asarray([e.label for e in examples], dtype=float) > 0.5
        return float(((logits.numpy() > 0) == gold).all(-1).mean())
    gold = np.asarray([e.label for e in examples])
    return float((logits.argmax(-1).numpy() == gold).mean())
