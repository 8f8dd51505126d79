"""One sizing measurement in a fresh process: ``python -m tunelab.stages.size.probe '<json args>'``.

`tunelab size` starts one of these per configuration so that no measurement sees another's
memory. It records its resident memory after the imports (the task's evaluation's too) and
after loading the model, runs a warm-up step (so AdamW's state exists), then measures `steps`
more full steps (forward, loss, backward, clipping, AdamW) as `train.py` does them, and writes
a JSON result to ``args["out"]``.

Peak memory, reset after the warm-up: on CUDA `torch.cuda.max_memory_allocated` /
`max_memory_reserved`; on CPU the peak resident set (`VmHWM`, reset by writing 5 to
`/proc/self/clear_refs`; `ru_maxrss` when that is not allowed).

Modes: ``step`` (default), ``grad_check`` (accumulated vs one-batch gradients), ``max_microbatch``
(CUDA: the largest microbatch that runs, by trying). Arguments: JSON, or ``@path`` to a file.

Several processes: started by `tunelab size --nproc N` as ``python -m torch.distributed.run
--standalone --nproc_per_node N -m tunelab.stages.size.probe <args>``, each rank joins the
process group (`training.process_group.joined`), wraps its model as `args["strategy"]` says
(`World.wrap`: DDP, or FSDP2 sharding in place) and measures its own step (its microbatches
of its share of the global batch, ``step`` mode only), writing its result to
``args["out"] + ".rank{R}"``. The peak is reset after the warm-up step as in one process.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from tunelab.stages.size.during import hold_best, validation_pass
from tunelab.stages.size.synthetic import synthetic_examples, validation_examples
from tunelab.training.memory import peak_rss_mb, reset_peak, rss_mb


def _cpu_seconds() -> tuple[float, float]:
    """User and system CPU seconds of this process (all threads)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime, use.ru_stime


def read_args(raw: str) -> dict[str, Any]:
    if raw.startswith("@"):
        return json.loads(Path(raw[1:]).read_text(encoding="utf-8"))
    return json.loads(raw)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    args = read_args(argv[1])
    out = Path(args["out"])
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under torchrun: one result per rank
        out = out.with_name(f"{out.name}.rank{os.environ.get('RANK', '0')}")
    result: dict[str, Any] = {"rss_start_mb": rss_mb()}
    try:
        result |= measure(args)
        status = 0
    except Exception as err:  # the parent reads the error from the result file
        result["error"] = f"{type(err).__name__}: {err}"
        result["oom"] = "out of memory" in str(err).lower()
        status = 1
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(out)
    return status


def architecture_module(model_type: str) -> str:
    """The transformers module of a `model_type`, by transformers' own name of it: `deberta-v2`
    lives in `deberta_v2`, `gemma3_text` in `gemma3` (the raw type had stopped the probe: "No
    module named transformers.models.deberta-v2")."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    return f"transformers.models.{module}.modeling_{module}"


def measure(args: dict[str, Any]) -> dict[str, Any]:
    import contextlib
    import importlib

    import torch
    import transformers  # noqa: F401  (the framework whose memory is the overhead)

    import tunelab.modeling.model
    import tunelab.training.loop  # noqa: F401  (part of the framework overhead)
    from tunelab.tasks import get_task

    loaded = get_task(args.get("task", "classification")).evaluation_imports
    for name in loaded:  # a run's evaluation has them by its end
        importlib.import_module(name)

    if args.get("model_type"):  # the architecture's module, imported lazily by transformers
        with contextlib.suppress(ImportError):  # else counted with the model's own load
            importlib.import_module(architecture_module(args["model_type"]))
    res: dict[str, Any] = {"rss_imports_mb": rss_mb(), "evaluation_imports": list(loaded)}
    warm_up_runtime()
    res |= {"rss_framework_mb": rss_mb(), "threads": torch.get_num_threads()}
    from tunelab.training.distributed import device_for, world_from_env
    from tunelab.training.process_group import joined

    world = world_from_env(args.get("strategy") or "ddp")
    device = device_for(world, torch.device(args.get("device", "cpu")))
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # one process on `cuda:N`: measured there, not on GPU 0
    with joined(world, device) as joined_world:
        return res | measure_model(args, device, joined_world)


def measure_model(args: dict[str, Any], device, world) -> dict[str, Any]:
    """Load the model (wrapped for `world`'s strategy under several processes), then measure."""
    import torch

    res: dict[str, Any] = {}
    if device.type == "cuda":  # what a run on this device has: its own context made, no model
        res["cuda_free_mb"] = torch.cuda.mem_get_info(device)[0] / 2**20
    model, info = build_model(args, device)
    with torch.no_grad():  # weights are mapped from safetensors lazily: make them resident, so
        for p in model.parameters():  # the baseline holds them and the step's memory is its own
            p.sum()
    vocab = _vocab(model)
    if world.distributed:
        model, fsdp = world.wrap(model, device, args.get("precision", "fp32"))
        res |= {"rank": world.rank, "world_size": world.size, "strategy": world.strategy}
        res |= {"backend": world.backend, "fsdp": fsdp}
    gc.collect()
    res |= info | {"rss_loaded_mb": rss_mb()}
    if device.type == "cuda":
        res["cuda_loaded_mb"] = torch.cuda.memory_allocated(device) / 2**20
    if args.get("mmap_threshold"):  # as train.py configures the allocator before training
        res["mmap_threshold_set"] = set_mmap_threshold(int(args["mmap_threshold"]))
    mode = args.get("mode", "step")
    if world.distributed and mode != "step":
        raise ValueError(f"mode {mode!r} runs in one process only")
    if mode == "grad_check":
        return res | grad_check(model, args, device)
    if mode == "max_microbatch":
        return res | max_microbatch(model, args, device)
    return res | measure_steps(model, args, device, vocab)


def set_mmap_threshold(size: int) -> bool:
    """glibc's M_MMAP_THRESHOLD, fixed (no dynamic raise): allocations of `size` bytes or more
    get their own mapping and go back to the system when freed. False off glibc. Training does
    not do this (it costs 12-46% step time in bench/README.md); the benchmark compares both."""
    import ctypes

    try:
        return bool(ctypes.CDLL(None).mallopt(-3, size))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def warm_up_runtime() -> None:
    """A tiny forward/backward/AdamW step, so thread pools and kernels are initialised before
    the framework overhead is read (they are part of it, not of the model)."""
    import torch

    w = torch.nn.Parameter(torch.ones(8, 8))
    opt = torch.optim.AdamW([w])
    torch.nn.functional.gelu(w @ w).sum().backward()
    opt.step()


# --- the model and one training step, as train.py runs them -----------------------------------


def build_model(args: dict[str, Any], device) -> tuple[Any, dict[str, Any]]:
    from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
    from tunelab.modeling.model import trainable_model
    from tunelab.training.step import train_mode

    spec = ModelSpec(
        path=args["model_dir"],
        dtype=args.get("dtype", "float32"),
        trust_remote_code=args.get("trust_remote_code", False),
    )
    labels = [str(i) for i in range(args.get("num_labels", 2))]
    raw = args.get("method") or {"type": "full"}
    method = LoraMethod(**raw) if raw.get("type") == "lora" else FullMethod()
    where = Path(args["model_dir"])
    model, report = trainable_model(
        spec,
        method,
        args["kind"],
        where,
        labels,
        device,
        args.get("seed", 0),
        checkpointing=bool(args.get("checkpointing")),
    )
    train_mode(model)
    return model, {"trainable_params": report["trainable_params"], "params": report["total_params"]}


def _peak_mb(device) -> float:
    import torch

    return (
        torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else peak_rss_mb()
    )


def _vocab(model) -> int:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return int(base.config.vocab_size)


def make_step(model, examples: list, args: dict[str, Any], device, optimizer=None):
    """`training.step.train_step` over `examples` in microbatches, the batches built once
    (so the timed step is the step alone): the step `tunelab run` takes. `optimizer`: the
    (params, optimizer) of `new_optimizer` to step (default a new one)."""
    from tunelab.training.step import loss_weight, make_batch, train_step

    params, optimizer = optimizer or new_optimizer(model, args)
    mb = int(args["microbatch"])
    batches = [make_batch(examples[i : i + mb], 0, device) for i in range(0, len(examples), mb)]
    denominator = sum(loss_weight(e) for e in examples)
    precision, clip = args.get("precision", "fp32"), args.get("max_grad_norm")

    def step() -> None:
        train_step(model, optimizer, params, batches, denominator, device, precision, clip)

    return step


def new_optimizer(model, args: dict[str, Any]):
    """(params, optimizer) as `tunelab run` makes them, from the probe's arguments."""
    from tunelab.training.step import make_optimizer

    return make_optimizer(model, args.get("lr", 1e-5), args.get("weight_decay", 0.0))


def measure_steps(model, args: dict[str, Any], device, vocab: int | None = None) -> dict[str, Any]:
    """Warm-up step, reset the peak, then `steps` timed full steps. `vocab`: the model's, read
    before a DDP wrapper hides its config."""
    import torch

    k = int(args.get("accumulation", 1))
    examples = synthetic_examples(args, vocab or _vocab(model), int(args["microbatch"]) * k)
    step = make_step(model, examples, args, device)
    step()  # warm-up: AdamW's state is created here
    kept = hold_best(model, args)  # keep best's copy of the trained weights, held as a run does
    gc.collect()
    res: dict[str, Any] = {"rss_after_warmup_mb": rss_mb()}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        res["cuda_steady_mb"] = torch.cuda.memory_allocated(device) / 2**20
    res["peak_reset"] = reset_peak()
    times = []
    cpu0 = _cpu_seconds()
    for _ in range(max(1, int(args.get("steps", 1)))):
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    if args.get("validation_batch"):  # the step's own peak, then the pass between two steps
        res["step_peak_mb"] = _peak_mb(device)
        examples = validation_examples(args, vocab or _vocab(model))
        res["validation_loss"] = validation_pass(model, args, device, examples)
    del kept
    res["peak_rss_mb"] = peak_rss_mb()
    res["rss_end_mb"] = rss_mb()
    res["cpu_s"] = [round(x - y, 3) for x, y in zip(_cpu_seconds(), cpu0, strict=True)]
    if device.type == "cuda":
        res["cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        res["cuda_peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    tokens = int(args["microbatch"]) * k * int(args["seq_len"])
    best = min(times)
    return res | {
        "step_seconds": [round(t, 4) for t in times],
        "step_s": round(best, 4),
        "tokens_per_step": tokens,
        "tokens_per_s": round(tokens / best, 1) if best > 0 else None,
    }


# --- accumulation versus one batch ---------------------------------------------------------------


def grad_check(model, args: dict[str, Any], device) -> dict[str, Any]:
    """Gradients of one batch of k x microbatch examples against k accumulated microbatches,
    with train.py's normalisation and a per-microbatch mean; dropout off, unequal lengths."""
    from tunelab.modeling.classifier_inputs import Encoded
    from tunelab.modeling.render import Rendered
    from tunelab.training.step import backward, loss_weight, make_batch, train_mode

    rows = args["examples"]
    if args["kind"] == "encoder":
        ex = [Encoded(str(j), r["input_ids"], r["label"], False) for j, r in enumerate(rows)]
    elif args.get("packed"):  # task pretrain: packed sequences, every token learned
        from tunelab.modeling.packing import Packed

        ex = [
            Packed(str(j), r["input_ids"], r["labels"], r["position_ids"], r["real"], "", ())
            for j, r in enumerate(rows)
        ]
    else:
        ex = [
            Rendered(str(j), r["input_ids"], r["loss_mask"], 0, 0, None, "", "")
            for j, r in enumerate(rows)
        ]
    mb, k = int(args["microbatch"]), len(ex) // int(args["microbatch"])
    micro = [ex[i * mb : (i + 1) * mb] for i in range(k)]
    params = [p for p in model.parameters() if p.requires_grad]
    model.eval()

    def grads(parts: list[list], weights: list[float]) -> list:
        for p in params:
            p.grad = None
        for part, w in zip(parts, weights, strict=True):
            backward(model, make_batch(part, 0, device), w, device, "fp32")
        return [p.grad.detach().clone() for p in params]

    total = sum(loss_weight(e) for e in ex)
    one = grads([ex], [total])
    acc = grads(micro, [total] * k)
    mean = grads(micro, [sum(loss_weight(e) for e in m) * k for m in micro])
    train_mode(model)

    def rel(a: list, b: list) -> float:
        num = math.sqrt(sum(float((x - y).float().pow(2).sum()) for x, y in zip(a, b, strict=True)))
        den = math.sqrt(sum(float(y.float().pow(2).sum()) for y in b))
        return num / den if den else num

    return {
        "microbatch": mb,
        "accumulation": k,
        "weights_per_microbatch": [sum(loss_weight(e) for e in m) for m in micro],
        "rel_diff_accumulated": rel(acc, one),
        "rel_diff_per_microbatch_mean": rel(mean, one),
    }


HEADROOM = 0.05
"""The share of free device memory a try may not use: a run's own allocations beyond the step
(the caching allocator's pools, cuBLAS's workspaces, its data). On an H200 a full fine-tune of a
1.1B Llama passed a try at microbatch 30 with 135 GiB free, and the run at 30 ran out."""


def max_microbatch(model, args: dict[str, Any], device) -> dict[str, Any]:
    """CUDA: double the microbatch until a step runs out of memory, then bisect. Every try
    steps one optimizer whose state a first step at microbatch 1 created: in a run AdamW's
    state (twice the trainable weights in float32) is held through every step after the
    first, so a try without it would pass a microbatch the run cannot take. And `HEADROOM` of
    the free memory is held back while trying: a run holds a little more than a try."""
    import torch

    vocab, tried = _vocab(model), {}
    free, total = torch.cuda.mem_get_info(device)
    optimizer = new_optimizer(model, args)
    make_step(
        model, synthetic_examples(args, vocab, 1), args | {"microbatch": 1}, device, optimizer
    )()
    model.zero_grad(set_to_none=True)
    kept = hold_best(model, args)  # noqa: F841  (held through every try, as a run holds it)
    validating = validation_examples(args, vocab)
    held_back = torch.empty(int(free * HEADROOM), dtype=torch.uint8, device=device)

    def fits(mb: int) -> bool:
        try:
            examples = synthetic_examples(args, vocab, mb)
            make_step(model, examples, args | {"microbatch": mb}, device, optimizer)()
            validation_pass(model, args, device, validating)
            tried[mb] = True
        except torch.cuda.OutOfMemoryError:
            tried[mb] = False
        model.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        return tried[mb]

    good, bad, cap = 0, 1, int(args.get("max_try", 4096))
    while bad <= cap and fits(bad):
        good, bad = bad, bad * 2
    while bad <= cap and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    del held_back
    return {
        "max_microbatch": good,
        "tried": tried,
        "device_total_mb": total / 2**20,
        "device_free_mb": free / 2**20,
        "headroom_mb": free * HEADROOM / 2**20,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv))
