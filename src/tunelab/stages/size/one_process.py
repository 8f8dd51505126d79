"""`tunelab size` in one process, as `tunelab run` trains: the plain step, gradient accumulation
alone, activation checkpointing alone and both, each in a fresh process beside its estimate; the
check that accumulated microbatches give one large batch's gradient; the largest microbatch that
fits; the advice for the spec's global batch. `measure.py` opens the lab and saves the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tunelab.stages.size import estimate as est
from tunelab.stages.size.advice import advice, largest_microbatch
from tunelab.stages.size.during import During, section
from tunelab.stages.size.grad_examples import grad_examples
from tunelab.stages.size.launch import SizingError
from tunelab.training.step import LOSS_NORMALISATION

MIB = 2**20
GRAD_TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2}
"""Largest relative difference (L2, over all trainable gradients) still counted as equal."""

CONFIGURATIONS = [
    ("plain", False, False),
    ("accumulation", True, False),
    ("checkpointing", False, True),
    ("accumulation + checkpointing", True, True),
]
"""The four steps measured: a name, whether it accumulates microbatches, whether it
checkpoints activations."""


def peak_of(result: dict, device: str) -> float:
    """The measured peak, MiB: peak RSS on CPU, peak allocated on CUDA."""
    return result["cuda_peak_allocated_mb"] if device == "cuda" else result["peak_rss_mb"]


def error_pct(estimated: float, measured: float) -> float:
    return round(100 * (estimated - measured) / measured, 1)


def mb_of(x: float) -> float:
    return round(x / MIB, 1)


@dataclass
class Probing:
    """What every probe of one `size` shares: the arguments each fresh process starts from
    (`base`), the function that runs one (`probe`), the estimate at a microbatch
    (`estimate_mb`), and the step measured (`mb` examples of `seq` tokens, accumulation `k`)."""

    base: dict[str, Any]
    probe: Callable[[dict[str, Any]], dict[str, Any]]
    estimate_mb: Callable[..., dict]
    device: str
    mb: int
    seq: int
    k: int
    say: Callable[[str], None]


def measure_one_process(
    p: Probing,
    train_set,
    during: During | None,
    precision: str,
    dtype: str,
    global_batch: int,
    memory_limit_mb: float | None,
) -> dict:
    """The record's one-process part: the estimate, the four steps, the gradient check, the
    largest microbatch and the advice."""
    variants, overhead = _variants(p)
    plain = variants[0]
    if plain.get("oom"):
        raise SizingError(f"microbatch {p.mb} at {p.seq} tokens does not fit: {plain['error']}")
    main = p.estimate_mb(p.mb, 1, False, overhead)
    check = _gradient_check(p, train_set, low=precision == "bf16" or dtype != "float32")
    fitted, calibration = _fitted(p, main, plain["measured_peak_mb"])
    largest = largest_microbatch(
        p.base, fitted, overhead, memory_limit_mb, p.device, p.say, p.probe
    )
    processes = 1  # `run` trains in one process; the advice says only what it can do
    # the speed at the largest microbatch where that was measured, else at the spec's
    speed, speed_at = largest.get("tokens_per_s"), largest["value"]
    if not speed:
        speed, speed_at = plain["tokens_per_s"], p.mb
    told = advice(global_batch, largest["value"], processes, speed, p.seq, speed_at)
    if not told["fits"]:
        told["reason"] = _over_at_any_microbatch(main, largest) or told["reason"]
    return {
        "estimate": {
            "components_mb": {c: mb_of(v) for c, v in main["components"].items()},
            "activations_mb": {c: mb_of(v) for c, v in main["activations"].items()},
            "phases_mb": {c: mb_of(v) for c, v in main["phases"].items()},
            "peak_phase": main["peak_phase"],
            "peak_mb": main["peak_mb"],
            "approximate": main["approximate"],
        },
        "measured": {k: v for k, v in plain["probe"].items() if not isinstance(v, list | dict)},
        "measured_peak_mb": plain["measured_peak_mb"],
        "error_pct": plain["error_pct"],
        "during_training": section(during, main, plain["probe"], plain["measured_peak_mb"]),
        "variants": [{k: v for k, v in x.items() if k != "probe"} for x in variants],
        "gradient_check": check,
        "calibration": calibration,
        "largest_microbatch": largest,
        "advice": told,
    }


FIXED = ("framework", "weights", "gradients", "optimizer_state")
"""The estimate's parts that no microbatch, length or activation checkpointing changes."""


def _over_at_any_microbatch(estimate: dict, largest: dict) -> str | None:
    """Why nothing fits when the fixed part alone is over the budget (it advised activation
    checkpointing, which its own measured row showed saving nothing there), else None."""
    budget = largest.get("budget_mb")
    fixed = mb_of(sum(estimate["components"][k] for k in FIXED))
    if budget is None or fixed <= budget:
        return None
    return (
        f"the fixed part alone, {fixed:,.1f} MiB (the framework, the weights, their gradients "
        f"and the optimizer's state, at any microbatch), is over the budget of {budget:,.0f} "
        "MiB: no microbatch, length or activation checkpointing fits; take a machine with more "
        "memory, or model.dtype: bfloat16 (half the weights)"
    )


def _variants(p: Probing) -> tuple[list[dict], float]:
    """Each of the four steps measured in a fresh process beside its estimate, and the memory
    the framework holds before any step (CPU: the first probe's, which the estimates add)."""
    variants, overhead = [], 0.0
    for name, accumulates, ckpt in CONFIGURATIONS:
        acc = p.k if accumulates else 1
        p.say(f"{name}: microbatch {p.mb} × {acc}, {p.seq} tokens, fresh process")
        m = p.probe(p.base | {"accumulation": acc, "checkpointing": ckpt})
        if m.get("oom"):
            variants.append({"name": name, "accumulation": acc, "checkpointing": ckpt, **m})
            continue
        overhead = overhead or (m["rss_framework_mb"] if p.device == "cpu" else 0.0)
        e = p.estimate_mb(p.mb, acc, ckpt, overhead)
        peak = peak_of(m, p.device)
        loaded = m.get("cuda_loaded_mb", m["rss_loaded_mb"])  # after imports and model load
        variants.append(
            {
                "name": name,
                "microbatch": p.mb,
                "accumulation": acc,
                "checkpointing": ckpt,
                "measured_peak_mb": round(peak, 1),
                "baseline_mb": round(loaded, 1),
                "step_mb": round(peak - loaded, 1),
                "estimated_peak_mb": e["peak_mb"],
                "error_pct": error_pct(e["peak_mb"], peak),
                "peak_phase": e["peak_phase"],
                "step_s": m["step_s"],
                "tokens_per_s": m["tokens_per_s"],
                "probe": m,
            }
        )
    return variants, overhead


def _gradient_check(p: Probing, train_set, low: bool) -> dict:
    """`k` microbatches accumulated against one batch of k × microbatch, in a fresh process:
    equal within the tolerance of the precision (`low`: bf16 or a low-precision model)."""
    p.say(f"gradient check: {p.k} microbatches of {p.mb} against one batch of {p.k * p.mb}")
    examples = grad_examples(train_set, p.mb, p.k)
    check = p.probe(p.base | {"mode": "grad_check", "examples": examples, "steps": 0})
    tol = GRAD_TOLERANCE["bf16" if low else "fp32"]
    return check | {
        "tolerance": tol,
        "equal": check["rel_diff_accumulated"] <= tol,
        "per_microbatch_mean_equal": check["rel_diff_per_microbatch_mean"] <= tol,
        "normalisation": LOSS_NORMALISATION,
    }


def _fitted(p: Probing, main: dict, measured_mb: float) -> tuple[Callable[..., dict], dict | None]:
    """The estimate the largest-microbatch search uses, and its calibration: on CPU scaled by
    the allocator's share read off the measured plain step (`estimate.calibrated`); on CUDA the
    estimate as it is."""
    if p.device != "cpu":
        return p.estimate_mb, None
    at, measured = main, measured_mb * MIB

    def fitted(b: int, acc: int = 1, ckpt: bool = False, overhead: float = 0.0) -> dict:
        e = p.estimate_mb(b, acc, ckpt, overhead)
        return e | {"peak_mb": mb_of(est.calibrated(at, measured, e)["peak_bytes"])}

    return fitted, {"microbatch": p.mb, "factor": est.calibrated(at, measured, at)["factor"]}
