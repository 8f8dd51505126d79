"""The memory of one rank among N processes (`tunelab size --nproc N --strategy ddp|fsdp`).

Each rank takes global_batch / N examples of every global batch in microbatches, so a rank's
accumulation is global_batch / (N × microbatch); its activations are those of its own
microbatch, exactly as in one process.

DDP: every rank is a full replica, so a rank's step is the one-process step (`estimate`) at the
per-rank microbatch and accumulation, plus DDP's gradient buckets: the flat buffers it
all-reduces, one more copy of the trainable gradients (in the parameters' dtype: 4 bytes each in
float32), allocated when the model is wrapped and kept for the whole run.

FSDP (FSDP2, `tunelab.training.sharding`: every transformer block, then the root): the weights,
the trainable gradients and AdamW's state are sharded, 1/N each; the activations are unchanged;
on top come the parameters gathered while a unit runs. The estimate counts the largest block
gathered whole twice (the one running and the next one prefetched) and the root's parameters
(embeddings, head, final norm: outside every block, kept gathered from forward into backward).
Outside the steps, one device holds the whole model twice in a run: every rank loads it whole
before `fully_shard` cuts it, and rank 0 evaluates and saves it whole after training
(`run.variant._train`). So a rank's peak is the larger of its step and the whole model's
weights (`whole_model`): FSDP here spreads the gradients and AdamW's state, not weights that do
not fit one device, and the advice says so instead of asking for a smaller microbatch.

What is approximate, and known to be: the shards are counted as exact 1/N (FSDP2 pads each
parameter's first dimension to a multiple of N); the gathered block is counted in full beside
its own shard (1/N of it twice); the unsharded gradients of the unit being reduce-scattered are
taken as covered by the prefetch copy; with accumulation > 1, FSDP2 without gradient sync keeps
unsharded gradients between microbatches, counted here as one full copy of the trainable
gradients; bf16 gathering (nccl) is not modelled (parameters counted in their own dtype);
communication buffers (nccl, gloo) and the process group's own memory are not counted (the
framework overhead is read in each rank before it joins the group, so on CPU they show up as
the estimate's shortfall).

On CPU the measured peak is the resident set, and glibc's heap keeps what FSDP's many
short-lived gather and reduce-scatter buffers (and the full model each rank loads before it is
sharded) leave behind: on a 13M-parameter llama, 2 ranks, full fine-tuning, the FSDP ranks
peaked at 841 MiB against an estimate of 534 MiB, and at 649 MiB with glibc's mmap threshold
fixed at 1 MiB (DDP: 709 MiB against 660 MiB). The estimate counts live tensors, as on CUDA,
where the probe reads peak allocated bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tunelab.core.errors import TunelabError
from tunelab.stages.size import estimate as est
from tunelab.stages.size.shape import Shape, Trainables

STRATEGIES = ("ddp", "fsdp")
WHOLE_MODEL = "whole_model"
"""An FSDP rank's peak phase when the whole model's weights outweigh its step."""

TERMS = {
    "framework": "the framework's own memory, measured in each rank before it joins the "
    "process group (the largest of the ranks; 0 on CUDA)",
    "weights": "all the weights (a full replica on every rank)",
    "weights_shard": "the weights / N (this rank's FSDP shard)",
    "gradients": "the trainable gradients (a full copy on every rank)",
    "gradients_shard": "the trainable gradients / N (reduce-scattered into this rank's shard)",
    "optimizer_state": "AdamW's two tensors per trainable parameter, full",
    "optimizer_state_shard": "AdamW's two tensors per trainable parameter / N",
    "ddp_buckets": "DDP's gradient buckets: one more copy of the trainable gradients",
    "activations": "the saved activations of this rank's microbatch (as in one process)",
    "logits_and_loss": "the logits and the loss of this rank's microbatch",
    "backward_buffers": "gradients in flight in one layer's backward",
    "gathered_unit": "the largest transformer block's parameters gathered whole, × 2 (prefetch)",
    "gathered_root": "the root's parameters gathered (embeddings, head, final norm)",
    "unsharded_accumulated_gradients": "accumulation > 1 without gradient sync: FSDP2 keeps "
    "unsharded gradients between microbatches (one full copy of the trainable gradients)",
    "best_weights": "training.keep: best's copy of the trained weights (full, on every rank)",
    "best_weights_shard": "training.keep: best's copy of this rank's shard of the trained weights",
    "whole_model": "not in the step: the whole model's weights on one device, as every rank "
    "loads them before they are sharded and rank 0 evaluates them after training (the peak is "
    "the larger of this and the step)",
}
"""What each term of a per-rank estimate is (the result carries the terms it uses)."""


@dataclass(frozen=True)
class Units:
    """What FSDP gathers, in bytes: the largest block's parameters and the root's own."""

    blocks: int
    largest_block_bytes: int
    root_bytes: int


def fsdp_units(model) -> Units:
    """The units `sharding.shard` makes of `model` (meta device is fine): its blocks and the
    root (every parameter outside them). Tied parameters are counted once."""
    from tunelab.modeling.blocks import blocks

    units = blocks(model)
    inside: set[int] = set()
    largest = 0
    for block in units:
        params = {id(p): p for p in block.parameters()}
        inside |= params.keys()
        largest = max(largest, sum(p.numel() * p.element_size() for p in params.values()))
    root = {id(p): p for p in model.parameters() if id(p) not in inside}
    return Units(len(units), largest, sum(p.numel() * p.element_size() for p in root.values()))


def per_rank_split(global_batch: int, nproc: int, microbatch: int) -> tuple[int, int]:
    """(examples per rank, accumulation per rank); refused unless N × microbatch divides the
    global batch (every rank takes the same share of each global batch)."""
    if nproc < 1 or microbatch < 1 or global_batch % (nproc * microbatch):
        raise TunelabError(
            f"training.global_batch ({global_batch}) must be a multiple of --nproc ({nproc}) × "
            f"the microbatch ({microbatch}), so that every rank takes the same share of each "
            "global batch; change one of them (--microbatch, training.global_batch=..., --nproc)"
        )
    share = global_batch // nproc
    return share, share // microbatch


def rank_estimate(
    strategy: str,
    nproc: int,
    sh: Shape,
    tr: Trainables,
    units: Units | None,
    b: int,
    s: int,
    accumulation: int = 1,
    overhead_bytes: int = 0,
    device: str = "cpu",
    precision: str = "fp32",
    targets: int | None = None,
    during=None,
) -> dict:
    """One rank's terms (bytes) and its peak under `strategy` over `nproc` processes
    (`targets`: target tokens per sequence, `estimate.target_tokens`; `during`: what the run
    holds beyond its steps, `size.during`)."""
    if strategy not in STRATEGIES:
        raise TunelabError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy == "ddp":
        e = est.estimate(
            sh, tr, b, s, False, accumulation, overhead_bytes, device, precision, targets, during
        )
        terms = e["components"] | {"ddp_buckets": tr.trainable_bytes}
        peak = e["peak_bytes"] + tr.trainable_bytes  # the buckets live through every phase
        return _result(strategy, nproc, e, terms, peak, e["approximate"])
    if units is None:
        raise TunelabError("an FSDP estimate needs the model's units (fsdp_units)")
    shard = replace(
        tr,
        weight_bytes=tr.weight_bytes // nproc,
        trainable_bytes=tr.trainable_bytes // nproc,
        largest_trainable_bytes=tr.largest_trainable_bytes // nproc,
        head_bytes=tr.head_bytes // nproc,
        embedding_bytes=tr.embedding_bytes // nproc,
    )
    e = est.estimate(
        sh, shard, b, s, False, accumulation, overhead_bytes, device, precision, targets, during
    )
    c = e["components"]
    gathered = 2 * units.largest_block_bytes
    unsharded = tr.trainable_bytes if accumulation > 1 else 0
    terms = {
        "framework": c["framework"],
        "weights_shard": c["weights"],
        "gradients_shard": c["gradients"],
        "optimizer_state_shard": c["optimizer_state"],
        "activations": c["activations"],
        "logits_and_loss": c["logits_and_loss"],
        "backward_buffers": c["backward_buffers"],
        "gathered_unit": gathered,
        "gathered_root": units.root_bytes,
        "unsharded_accumulated_gradients": unsharded,
    } | ({"best_weights_shard": c["best_weights"]} if "best_weights" in c else {})
    step = e["peak_bytes"] + gathered + units.root_bytes + unsharded
    whole = overhead_bytes + tr.weight_bytes  # at load, and on rank 0 after training
    terms["whole_model"] = tr.weight_bytes
    result = _result(strategy, nproc, e, terms, max(step, whole), True)
    if whole > step:
        result["peak_phase"] = WHOLE_MODEL
    return result


def _result(strategy: str, nproc: int, e: dict, terms: dict, peak: int, approx: bool) -> dict:
    return {
        "strategy": strategy,
        "nproc": nproc,
        "terms": terms,
        "described": {name: TERMS[name] for name in terms},
        "phases": e["phases"],
        "peak_phase": e["peak_phase"],
        "peak_bytes": peak,
        "approximate": approx,
    }
