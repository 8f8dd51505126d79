"""Validation during training: the validation loss at a cadence, the overfitting warning, and the
best step kept when the user asks for it.

Every `training.validate_every` steps (and at the last step) the loop measures the loss the
trainer minimises on the validation split, teacher-forced (no generation: a forward pass per
batch, cheap), normalised as the training loss is (per example for a classifier, per target
token for a causal LM). Under several processes every rank measures the whole split the same
way, so every rank holds the same number and no collective is needed (under FSDP the forward
needs every rank anyway). The point goes into the step's history entry (`validation_loss`),
which the report draws beside the training loss.

**Overfitting**: when the validation loss has risen at each of the last
`training.overfit_patience` measurements while the training loss (its mean between two
measurements) fell over the same span, the run records a warning saying so.

**Keep best** (`training.keep: best`): the trainable weights of the measurement with the lowest
validation loss are copied aside (on the device they live on: a second copy of what trains,
small for LoRA, the whole model for full fine-tuning) and restored at the end; the run records
the step it kept. A checkpoint saves those weights too, so a run stopped and resumed keeps
the same step an uninterrupted one would. Only the validation split is read: the test split
never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import torch

from tunelab.training.sharding import resharded
from tunelab.training.step import loss_weight, make_batch, summed_losses, train_mode


@dataclass
class Validation:
    """The validation split as the trainer renders it, and what was measured on it."""

    examples: list
    every: int
    keep: str = "last"
    patience: int = 3
    batch_size: int = 32
    points: list[dict] = field(default_factory=list)
    best: dict | None = None
    saved: dict[str, torch.Tensor] | None = None
    warned: dict | None = None
    """The first overfitting warning: its step and message."""

    def due(self, step: int, steps: int) -> bool:
        return step % self.every == 0 or step == steps

    @torch.no_grad()
    def measure(self, model: torch.nn.Module, device: torch.device, pad_id: int) -> float:
        """The mean validation loss (per example or target token; a mixture of experts'
        balancing term left out, as from the training loss logged), the model left training.
        The batches' sums add up on the device in float64 (as Python's floats would add them)
        and are read once, at the end: on a GPU the host never waits between batches."""
        model.eval()
        total, weight = torch.zeros((), dtype=torch.float64, device=device), 0.0
        for start in range(0, len(self.examples), self.batch_size):
            chunk = self.examples[start : start + self.batch_size]
            task, _ = summed_losses(model, make_batch(chunk, pad_id, device))  # no balancing
            total += task.double()
            weight += sum(loss_weight(e) for e in chunk)
        train_mode(model)
        return float(total) / weight

    def record(
        self, model: torch.nn.Module, step: int, loss: float, train_loss: float
    ) -> str | None:
        """A measurement; with keep best, the weights when it is the lowest so far. Returns the
        overfitting warning the first time it applies."""
        self.points.append({"step": step, "loss": loss, "train_loss": train_loss})
        first = None
        if self.warned is None and (message := self.overfitting()):
            self.warned = {"step": step, "message": message}
            first = message
        if self.best is None or loss < self.best["loss"]:
            self.best = {"step": step, "loss": loss}
            if self.keep == "best":
                self.saved = {
                    n: p.detach().clone()
                    for n, p in resharded(model).named_parameters()
                    if p.requires_grad
                }
        return first

    def resume(
        self,
        history: list[dict],
        kept: dict | None = None,
        weights: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """The measurements a resumed run made before it was stopped, read back from its
        history: the curve, the overfitting warning and the best step go on as if it had not
        been, and the best step's `weights` with them where the checkpoint saved them (`kept`:
        their step and loss). Without them, `restore` says the best was not kept."""
        since = 0
        for entry in history:
            if "validation_loss" not in entry:
                continue
            before = [h for h in history if h["step"] <= entry["step"]]
            loss, train_loss = entry["validation_loss"], window_loss(before, since)
            self.points.append({"step": entry["step"], "loss": loss, "train_loss": train_loss})
            since = entry["step"]
            if self.warned is None and (message := self.overfitting()):
                self.warned = {"step": entry["step"], "message": message}
            if self.best is None or loss < self.best["loss"]:
                self.best = {"step": entry["step"], "loss": loss}
                self.saved = None  # measured before the stop: its weights unless saved
        if (
            self.keep == "best"
            and weights is not None
            and (kept or {}).get("step") == (self.best or {}).get("step")
        ):
            self.saved = weights

    def restore(self, model: torch.nn.Module, last_step: int) -> dict:
        """With keep best, the best measurement's weights back in the model; what was kept."""
        if self.keep != "best" or self.best is None:
            return {"rule": "last", "step": last_step}
        if self.saved is None and self.best["step"] != last_step:  # best before a resume
            return {
                "rule": "last",
                "step": last_step,
                "not_kept": (
                    f"the lowest validation loss was at step {self.best['step']} "
                    f"({self.best['loss']:.4f}), before the run was stopped and resumed; a "
                    "checkpoint holds the weights it stopped with, not the best ones, so the "
                    "last step's were kept"
                ),
            }
        if self.best["step"] != last_step:
            with torch.no_grad():
                for n, p in resharded(model).named_parameters():
                    if n in self.saved:
                        p.copy_(self.saved[n])
        self.saved = None
        return {
            "rule": "best validation loss",
            "step": self.best["step"],
            "validation_loss": round(self.best["loss"], 6),
        }

    def overfitting(self) -> str | None:
        """The warning, when the validation loss rose at each of the last `patience`
        measurements while the training loss fell."""
        if len(self.points) < self.patience + 1:
            return None
        last = self.points[-(self.patience + 1) :]
        rising = all(b["loss"] > a["loss"] for a, b in pairwise(last))
        falling = last[-1]["train_loss"] < last[0]["train_loss"]
        if not (rising and falling):
            return None
        first, now = last[0], last[-1]
        best = self.best
        return (
            f"validation loss rose at {self.patience} measurements in a row (from "
            f"{first['loss']:.4f} at step {first['step']} to {now['loss']:.4f} at step "
            f"{now['step']}) while training loss fell "
            f"({last[0]['train_loss']:.4f} -> {last[-1]['train_loss']:.4f}): the model fits the "
            f"training set past what carries to validation; the lowest validation loss was at "
            f"step {best['step']} ({best['loss']:.4f}), "
            + (
                "which `training.keep: best` keeps"
                if self.keep == "best"
                else "which `training.keep: best` would keep"
            )
        )

    def summary(self) -> dict:
        return {
            "every": self.every,
            "examples": len(self.examples),
            "points": self.points,
            "best": self.best,
            "overfitting": self.warned,
        }


def validation_for(lab, cfg, renderer, version: str | None) -> Validation | None:
    """The validation split of data version `version` as the trainer renders it, when
    `training.validate_every` asks for the validation loss during training."""
    if cfg.validate_every is None or version is None:
        return None
    examples, _ = renderer.training(lab.store.read_split(version, "validation"))
    return Validation(
        examples,
        cfg.validate_every,
        cfg.keep,
        cfg.overfit_patience,
        lab.spec.evaluation.batch_size,
    )


def window_loss(history: list[dict], since_step: int) -> float:
    """The mean training loss of the steps after `since_step`."""
    losses = [h["loss"] for h in history if h["step"] > since_step]
    return sum(losses) / len(losses)
