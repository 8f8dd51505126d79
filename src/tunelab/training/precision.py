"""`training.precision: auto`: bf16 autocast where the device computes bf16 natively and a
measured bf16 matmul beats fp32's, else fp32, with the reason and the measurement.

Native bf16: a CUDA device that supports it without emulation; a CPU whose flags list
`amx_bf16` or `avx512_bf16`. On a CPU without them bf16 is emulated and slower (2.8x slower
training measured on one such machine, bench/README.md), so auto never picks it there, whatever
a short matmul says, and the bf16 matmul is not measured there (emulated, a 1024-square one
took about 2 s, so best of 5 cost every check about 13 s). Where the flags are present the
matmul decides: bf16 must be at least `MIN_SPEEDUP` times fp32's throughput; its repeats stop
after `BUDGET_S`, so a bf16 that is slow in spite of its flags costs a second or two, not more.

A lab decides once per machine: a run whose lab already trained under auto on the same device
(CPU model and flags, or GPU name) and torch version keeps that run's choice (`kept_from`)
instead of timing the matmul again. A 0.5 s timing on a shared machine read 2.41x one minute
and 1.17x the next, so a seed replicate or a one-change variant trained in the other precision
without a word.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import torch

MIN_SPEEDUP = 1.2
"""bf16's matmul throughput over fp32's that auto asks for before it leaves fp32."""
SIDE = 1024
"""The square matmul measured (large enough for the fast kernels, about 0.1 s on 2 cores)."""
BUDGET_S = 0.5
"""Seconds of timed repeats after which a matmul's measurement stops (at least one is timed)."""
NATIVE_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name (None where /proc/cpuinfo is not there to read)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not there to read)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def native_bf16(device: torch.device, flags: set[str] | None = None) -> tuple[bool, str]:
    """Whether `device` computes bf16 natively, and what says so."""
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported(including_emulation=False)
        return ok, f"{torch.cuda.get_device_name(device)} {'supports' if ok else 'lacks'} bf16"
    if device.type != "cpu":
        return False, f"{device.type}: not measured by tunelab"
    have = sorted(set(NATIVE_FLAGS) & (cpu_flags() if flags is None else flags))
    if have:
        return True, "the CPU has " + " and ".join(have)
    return False, "the CPU has neither amx_bf16 nor avx512_bf16 (bf16 would be emulated)"


def matmul_gflops(
    device: torch.device, dtype: torch.dtype, side: int = SIDE, budget_s: float = BUDGET_S
) -> float:
    """Throughput of a `side`-square matmul in `dtype`: best of 5 after a warm-up, or of those
    timed before `budget_s` had passed."""
    a = torch.randn(side, side, device=device).to(dtype)
    b = torch.randn(side, side, device=device).to(dtype)
    a @ b  # warm-up
    best, spent = float("inf"), 0.0
    for _ in range(5):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
        if spent > budget_s:
            break
    return 2 * side**3 / best / 1e9


def measure(device: torch.device, flags: set[str] | None = None) -> dict:
    """What auto would choose on `device`: native bf16 or not, both matmuls, the choice, why."""
    native, evidence = native_bf16(device, flags)
    fp32 = matmul_gflops(device, torch.float32)
    # emulated bf16 is never chosen, so its slow matmul is not run
    bf16 = matmul_gflops(device, torch.bfloat16) if native else None
    speedup = None if bf16 is None else bf16 / fp32
    if speedup is None:
        choice, reason = "fp32", evidence
    elif speedup < MIN_SPEEDUP:
        choice = "fp32"
        reason = f"{evidence}, but its bf16 matmul is only {_times(speedup)} fp32's"
    else:
        choice, reason = "bf16", f"{evidence} and its bf16 matmul is {_times(speedup)} fp32's"
    return {
        "native_bf16": native,
        "fp32_gflops": round(fp32, 1),
        "bf16_gflops": None if bf16 is None else round(bf16, 1),
        "bf16_speedup": None if speedup is None else float(f"{speedup:.3g}"),
        "choice": choice,
        "reason": reason,
    }


def _times(ratio: float) -> str:
    """A speed ratio as said: two decimals, or two significant figures below 0.1 (bf16 on
    reference kernels, oneDNN held below AVX-512, is 0.005x)."""
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def machine(device: torch.device) -> dict:
    """What auto's choice depends on besides the timing: the device (a GPU's name, a CPU's
    model and native bf16 flags) and torch's version."""
    if device.type == "cuda":
        where = {"gpu": torch.cuda.get_device_name(device)}
    else:
        where = {"cpu": cpu_model(), "flags": sorted(set(NATIVE_FLAGS) & cpu_flags())}
    return {"device": device.type, **where, "torch": torch.__version__}


def resolve(
    asked: str, device: torch.device, earlier: Iterable[tuple[str, dict]] = ()
) -> tuple[str, dict]:
    """The precision a run trains in, and what the record keeps of the choice. Under auto, the
    first of `earlier` (run id, its recorded choice; newest first) made on this `machine` is
    kept, else the matmuls decide."""
    if asked != "auto":
        return asked, {"asked": asked, "used": asked}
    here = machine(device)
    for run_id, chosen in earlier:
        if chosen.get("asked") == "auto" and chosen.get("machine") == here:
            return chosen["used"], chosen | {"kept_from": chosen.get("kept_from") or run_id}
    found = measure(device)
    return found["choice"], {"asked": "auto", "used": found["choice"], **found, "machine": here}
