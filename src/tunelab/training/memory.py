"""Memory of this process: resident now, and the peak since a reset.

On Linux the kernel keeps the peak resident set (`VmHWM` in /proc/self/status); writing 5 to
/proc/self/clear_refs resets it, so a measurement (a run, a sizing step) sees its own peak and
not an earlier one's. `ru_maxrss` (the process's all-time high) is the fallback where /proc is
not there. On CUDA, torch's own allocator statistics play the same part.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_STATUS = Path("/proc/self/status")


def rss_mb() -> float:
    """Resident memory now, MiB (0 where /proc is missing)."""
    return _status_kib("VmRSS") / 1024


def peak_rss_mb() -> float:
    """Peak resident memory since the start or the last `reset_peak`, MiB."""
    peak = _status_kib("VmHWM")
    if peak:
        return peak / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0); False when not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _status_kib(field: str) -> int:
    try:
        match = re.search(rf"^{field}:\s+(\d+)", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


def start_peak(device: torch.device) -> str:
    """Reset the peak before a measurement; returns how the peak will be read."""
    if device.type == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(device)
        return "torch.cuda.max_memory_allocated since the run's start"
    if reset_peak():
        return "VmHWM since the run's start (reset through /proc/self/clear_refs)"
    return "ru_maxrss: the process's all-time peak (no reset possible here)"


def peak_mb(device: torch.device) -> float:
    """The peak since `start_peak`, MiB."""
    if device.type == "cuda":
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**20
    return peak_rss_mb()
