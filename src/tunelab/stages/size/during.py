"""What a run holds beyond its training steps, when the spec asks for it (`tunelab size`).

Two settings of `training` add memory that the step alone does not show:

- `keep: best` copies the trainable weights aside at each new best validation loss
  (`training.validate.Validation.record`): a second copy of what trains, held from the first
  measurement to the end (small for LoRA, the whole model for full fine-tuning; a shard of it
  per rank under FSDP). It lives through every later step, so it adds to every phase.
- `validate_every` measures the validation loss between steps: a forward pass without
  gradients over batches of `evaluation.batch_size` examples, in the weights' dtype (no
  autocast), while the weights, AdamW's state and that copy are held (the step's gradients
  are gone: `zero_grad(set_to_none=True)`). For a causal LM most of it is the logits of the
  batch's target tokens over the vocabulary, so a large evaluation batch can make it the peak
  of the whole run.

The estimate counts both (`estimate.estimate` given a `During`: the copy in every phase, the
pass as a phase of its own, `estimate.validation_bytes`); the probe holds the copy and runs
one validation pass after its measured steps (`hold_best`, `validation_pass`), so the
measured peak covers them too. Sequences are `seq_len` long, as the step's are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class During:
    """The spec's settings that add memory beyond the step (None where a run has none)."""

    keep_best: bool = False
    validation_batch: int | None = None
    """`evaluation.batch_size`, when `training.validate_every` is set."""

    @classmethod
    def of(cls, spec) -> During | None:
        """From the spec (`keep: best` needs `validate_every`, so one check covers both)."""
        training = spec.training
        if training.validate_every is None:
            return None
        return cls(training.keep == "best", spec.evaluation.batch_size)

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> During | None:
        """Back from a probe's arguments (`as_dict`)."""
        batch = args.get("validation_batch")
        return cls(bool(args.get("keep_best")), batch) if batch else None

    def as_dict(self) -> dict[str, Any]:
        return {"keep_best": self.keep_best, "validation_batch": self.validation_batch}


# --- the probe's side: the same, really held and run ------------------------------------------


def hold_best(model, args: dict[str, Any]) -> dict | None:
    """keep best's copy, as `Validation.record` takes it (None when the run keeps the last)."""
    if not args.get("keep_best"):
        return None
    from tunelab.training.sharding import resharded

    named = resharded(model).named_parameters()
    return {n: p.detach().clone() for n, p in named if p.requires_grad}


def validation_pass(model, args: dict[str, Any], device, examples: list) -> float | None:
    """One validation loss over `examples` (`validation_batch` of them, the step's shapes) at
    the evaluation batch size, as the loop measures it between steps; None when the run does
    not validate."""
    if not args.get("validation_batch"):
        return None
    from tunelab.training.validate import Validation

    check = Validation(examples, every=1, batch_size=int(args["validation_batch"]))
    return check.measure(model, device, pad_id=0)


# --- the size record's section -------------------------------------------------------------------


def section(during: During | None, estimate: dict, probe: dict, peak_mb: float) -> dict | None:
    """What `size` records of them: keep best's copy and the validation pass as estimated (MiB),
    beside the plain probe's measured peak of its steps alone (`probe`: its result) and with
    the pass (`peak_mb`, as `one_process.peak_of` reads it)."""
    if during is None:
        return None
    step_mb = probe.get("step_peak_mb")
    mib = 2**20
    validation = estimate["phases"]["validation"]
    peak = estimate["peak_phase"] == "validation"
    return {
        "keep_best": during.keep_best,
        "best_weights_mb": round(estimate["components"].get("best_weights", 0) / mib, 1),
        "validation_batch": during.validation_batch,
        "validation_phase_mb": round(validation / mib, 1),
        "validation_is_peak": peak,
        "advice": (
            f"the validation pass is the run's largest moment: a smaller evaluation.batch_size "
            f"(now {during.validation_batch}) lowers it; the microbatch does not"
            if peak
            else None
        ),
        "measured_step_peak_mb": None if step_mb is None else round(step_mb, 1),
        "measured_peak_mb": peak_mb,
    }
