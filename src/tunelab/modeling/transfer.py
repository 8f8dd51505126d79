"""A batch built on the host, moved to the training device without making the host wait.

torch copies a tensor from ordinary (pageable) host memory to a GPU and then synchronizes the
stream (`memcpy_and_sync`): the host waits there for every kernel queued before the copy, so
each microbatch's inputs would hold the host until the previous microbatch's backward had run.
From page-locked memory with `non_blocking=True` the copy is queued like a kernel instead, and
torch's caching host allocator keeps the page-locked block until the copy has read it. On a CPU
nothing moves.
"""

from __future__ import annotations

import torch


def to_device(
    batch: dict[str, torch.Tensor], device: torch.device | str
) -> dict[str, torch.Tensor]:
    """Each of `batch`'s host tensors on `device`; to a GPU without a wait for the device."""
    device = torch.device(device)
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
