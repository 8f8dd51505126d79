"""Where a full fine-tune's step spends its memory and its time on one GPU (issue 28).

    python bench/gpu_profile.py --model DIR [--seq-len 2048] [--targets 37] [--device cuda]

DIR: a causal LM folder in float32 (`bench/gpu_table.py prepare --config 1b --out OUT` builds
the 1.1B Llama of bench/README.md in OUT/model). The step is `tunelab run`'s own
(`stages.size.probe.make_step`: `training.step.train_step` with tunelab's fused AdamW), under
bf16 autocast, on synthetic sequences of `--seq-len` tokens ending in `--targets` target
tokens. Three parts, one process:

1. **Memory at the peak** (CUDA only): microbatch 2 with activation checkpointing, one and two
   microbatches a step. After a warm-up step, CUDA's memory history
   (`torch.cuda.memory._record_memory_history`) over one step; the history is replayed to find
   the peak, and the blocks alive there are grouped by the Python frames (in tunelab,
   transformers or torch's checkpoint, optim and autograd) that allocated them. Blocks the
   autograd engine allocates have no Python frame. Printed beside `tunelab size`'s estimate.
2. **Tokens/s by microbatch** (no checkpointing): 2 x 2, 4, 8 and 16 (`--microbatches`), the
   best of 3 steps after a warm-up.
3. **Where a step's time goes**: `torch.profiler` over 3 steps at microbatch 2 x 2, the device's
   kernel time summed by kind (matrix products, attention, optimizer, copies, reductions and
   norms, other elementwise), then the profiler's table of the 30 largest.

On a CPU (`--device cpu`, a small model) parts 2 and 3 run, to try the script.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import defaultdict

import torch

from tunelab.stages.size import estimate as est
from tunelab.stages.size import probe
from tunelab.stages.size.shape import describe

MIB = 2**20
FRAMES = ("tunelab", "transformers", "torch/utils/checkpoint", "torch/optim", "torch/autograd")
KINDS = [  # (kind, substrings of a kernel's name), the first match wins
    (
        "matrix products",
        (
            "gemm",
            "cutlass",
            "xmma",
            "nvjet",
            "cublas",
            "sm90_",
            "aten::mm",
            "aten::addmm",
            "aten::bmm",
        ),
    ),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("optimizer", ("adam", "multi_tensor")),
    ("reductions and norms", ("reduce", "norm")),
    ("copies and fills", ("copy", "memcpy", "memset", "fill")),
]


def step_args(args, microbatch: int, accumulation: int, checkpointing: bool) -> dict:
    return {
        "model_dir": args.model,
        "kind": "causal",
        "dtype": "float32",
        "method": {"type": "full"},
        "precision": "bf16",
        "lr": 1e-5,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "seed": 0,
        "device": args.device,
        "seq_len": args.seq_len,
        "targets": args.targets,
        "microbatch": microbatch,
        "accumulation": accumulation,
        "checkpointing": checkpointing,
    }


def build(args, checkpointing: bool):
    model, _ = probe.build_model(step_args(args, 2, 1, checkpointing), torch.device(args.device))
    with torch.no_grad():
        for p in model.parameters():
            p.sum()
    return model


def a_step(model, args, microbatch: int, accumulation: int, checkpointing: bool = False):
    a = step_args(args, microbatch, accumulation, checkpointing)
    examples = probe.synthetic_examples(a, probe._vocab(model), microbatch * accumulation)
    return probe.make_step(model, examples, a, torch.device(args.device))


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def frame_key(frames: list[dict]) -> str:
    """The first three frames in `FRAMES`' packages, each from its package's folder on."""

    def short(path: str) -> str:
        starts = [path.rfind(f"/{p}/") for p in ("tunelab", "transformers", "torch")]
        return path[max(starts) + 1 :] if max(starts) >= 0 else path

    ours = [
        f"{short(f['filename'])}:{f['line']} {f['name']}"
        for f in frames
        if any(s in f["filename"] for s in FRAMES)
    ]
    return " < ".join(ours[:3]) or "(no Python frame: the autograd engine)"


def replay_peak(trace: list[dict], start: int) -> tuple[int, dict[str, list[int]], str]:
    """The peak of the allocated bytes over the history (`start` allocated before it began),
    the blocks alive there by `frame_key` ([bytes, blocks]), and the frames of the last
    allocation before it."""
    live: dict[int, tuple[int, list]] = {}
    now = best = start
    at_best: dict[int, tuple[int, list]] = {}
    last = ""
    for event in trace:
        if event["action"] == "alloc":
            live[event["addr"]] = (event["size"], event.get("frames", []))
            now += event["size"]
            if now > best:
                best, at_best, last = now, dict(live), frame_key(event.get("frames", []))
        elif event["action"] == "free_completed" and event["addr"] in live:
            now -= live.pop(event["addr"])[0]
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for size, frames in at_best.values():
        group = groups[frame_key(frames)]
        group[0] += size
        group[1] += 1
    return best, groups, last


def memory_at_peak(args) -> None:
    model = build(args, checkpointing=True)
    sh, tr = describe(model, "causal", 0)
    print(f"## memory at the peak: microbatch 2, checkpointing ({args.seq_len} tokens)\n")
    for k in (1, 2):
        step = a_step(model, args, 2, k, checkpointing=True)
        step()
        synchronize("cuda")
        gc.collect()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        torch.cuda.memory._record_memory_history(max_entries=400_000, stacks="python")
        step()
        synchronize("cuda")
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        peak = torch.cuda.max_memory_allocated()
        best, groups, last = replay_peak(snapshot["device_traces"][0], start)
        e = est.estimate(
            sh, tr, 2, args.seq_len, True, k, device="cuda", precision="bf16", targets=args.targets
        )
        print(
            f"accumulating {k}: before the step {start / MIB:,.0f} MiB; peak "
            f"{peak / MIB:,.0f} MiB (replayed {best / MIB:,.0f}), at {last}; size's estimate "
            f"{e['peak_bytes'] / MIB:,.0f} MiB ({e['peak_phase']})\n"
        )
        print("| MiB | blocks | allocated by |\n|--:|--:|---|")
        for name, (size, count) in sorted(groups.items(), key=lambda g: -g[1][0])[:12]:
            print(f"| {size / MIB:,.1f} | {count} | `{name}` |")
        print()
        del step
        gc.collect()
        torch.cuda.empty_cache()
    del model
    gc.collect()
    torch.cuda.empty_cache()


def tokens_per_second(model, args) -> None:
    print("## tokens/s by microbatch (no checkpointing; the best of 3 steps)\n")
    print("| microbatch x accumulation | s/step | tokens/s | peak MiB |\n|---|--:|--:|--:|")
    for mb, k in [(2, 2)] + [(b, 1) for b in args.microbatches]:
        step = a_step(model, args, mb, k)
        step()
        synchronize(args.device)
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(3):
            t = time.perf_counter()
            step()
            synchronize(args.device)
            times.append(time.perf_counter() - t)
        peak = torch.cuda.max_memory_allocated() / MIB if args.device == "cuda" else None
        tokens = mb * k * args.seq_len / min(times)
        print(
            f"| {mb} x {k} | {min(times):.3f} | {tokens:,.0f} | "
            f"{'-' if peak is None else f'{peak:,.0f}'} |"
        )
        del step
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    print()


def kind_of(kernel: str) -> str:
    name = kernel.lower()
    return next((k for k, marks in KINDS if any(m in name for m in marks)), "other elementwise")


def where_time_goes(model, args) -> None:
    from torch.profiler import ProfilerActivity, profile

    step = a_step(model, args, 2, 2)
    step()
    synchronize(args.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            step()
        synchronize(args.device)
    averages = prof.key_averages()
    on = "CUDA" if args.device == "cuda" else "CPU"
    kernels = [
        (e.key, e.self_device_time_total if on == "CUDA" else e.self_cpu_time_total)
        for e in averages
        if on in str(e.device_type)
    ]
    if on == "CPU":  # no kernels: the operators' own time
        kernels = [(k, t) for k, t in kernels if k.startswith("aten::")]
    total = sum(t for _, t in kernels) or 1
    by_kind: dict[str, float] = defaultdict(float)
    for name, t in kernels:
        by_kind[kind_of(name)] += t
    print(f"## where a step's time goes: microbatch 2 x 2, 3 steps, {on} time\n")
    print(f"{total / 3e3:.1f} ms a step in all\n\n| share | kind |\n|--:|---|")
    for kind, t in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"| {100 * t / total:.1f}% | {kind} |")
    sort = "self_device_time_total" if on == "CUDA" else "self_cpu_time_total"
    print("\n" + averages.table(sort_by=sort, row_limit=30, max_name_column_width=70))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a float32 causal LM folder")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--targets", type=int, default=37)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--microbatches", type=int, nargs="+", default=[4, 8, 16])
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: --device cpu tries the script on the CPU", file=sys.stderr)
        return 2
    if args.device == "cuda":
        memory_at_peak(args)
    model = build(args, checkpointing=False)
    tokens_per_second(model, args)
    where_time_goes(model, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
