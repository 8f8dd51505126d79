"""Environment fingerprint: what ran a stage, so runs from different platforms are not mixed."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

import tunelab

PACKAGES = ("torch", "transformers", "peft", "safetensors", "tokenizers", "scikit-learn")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The tunelab checkout's commit, when it runs from one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(tunelab.__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def device_of(device: torch.device) -> dict:
    if device.type == "cuda":
        return {
            "type": "rocm" if torch.version.hip else "cuda",
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
        }
    return {"type": device.type, "name": platform.processor() or platform.machine(), "count": 1}


def pick_device() -> torch.device:
    """CUDA (or ROCm) when present, else CPU; passed explicitly to every stage."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def fingerprint(device: torch.device) -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
        "torch_cuda": torch.version.cuda,
        "torch_hip": torch.version.hip,
        "cuda_driver": _driver(),
        "device": device_of(device),
        "threads": torch.get_num_threads(),
        "tunelab": tunelab.__version__,
        "git_commit": _git_commit(),
    }


def _driver() -> str | None:
    if not torch.cuda.is_available():
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
