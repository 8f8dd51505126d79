"""The machine a benchmark ran on: the CPU's model and flags, its cores, torch's threads and
kernels, the versions that matter and the load before it started."""

from __future__ import annotations

import os
import platform
from importlib.metadata import version
from pathlib import Path


def cpuinfo() -> tuple[str, set[str]]:
    """The CPU's model name and flags (/proc/cpuinfo; the platform's name elsewhere)."""
    path = Path("/proc/cpuinfo")
    lines = path.read_text().splitlines() if path.exists() else []
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return fields.get("model name", platform.processor()), set(fields.get("flags", "").split())


def machine() -> dict:
    import torch

    cpu, flags = cpuinfo()
    packages = ["torch", "transformers", "peft", "accelerate", "datasets", "scikit-learn"]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "flags": {f: f in flags for f in ("amx_bf16", "avx512_bf16", "avx512f")},
        # the kernels torch and oneDNN may use: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
        # hold an AVX-512 CPU to AVX2 code (a stand-in where no AVX2-only CPU is at hand)
        "kernels": {
            "aten": torch.backends.cpu.get_cpu_capability(),
            "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "(the CPU's best)"),
        },
        "python": platform.python_version(),
        "versions": {p: version(p) for p in [*packages, "tunelab"]},
        "load_before": os.getloadavg()[0],
    }
