"""What differs between the platforms two runs were measured on: package versions, the torch
build, the device type, and the processes (world size, strategy). A difference is a warning
in `compare`: a new platform means the checks are redone."""

from __future__ import annotations

from tunelab.core.env import PLATFORM_PACKAGES


def process_differences(a: dict, b: dict) -> list[str]:
    """A change of world size or strategy between two trained runs (`torchrun`): the same
    steps in exact arithmetic, but another order of sums and other collectives. Empty when
    either run does not say (a baseline, or a run from before processes were recorded)."""
    pa = (a.get("training") or {}).get("processes")
    pb = (b.get("training") or {}).get("processes")
    if not pa or not pb:
        return []
    out = []
    if pa["world_size"] != pb["world_size"]:
        out.append(f"processes {pa['world_size']} -> {pb['world_size']}")
    if pa.get("strategy") != pb.get("strategy"):
        out.append(
            f"strategy {pa.get('strategy') or 'one process'} -> "
            f"{pb.get('strategy') or 'one process'}"
        )
    return out


ARCHITECTURES = frozenset({"x86_64", "aarch64", "arm64", "AMD64", "i386", "i686", ""})
"""A CPU's recorded name before records named its model: no model to compare."""


def env_differences(a: dict | None, b: dict | None) -> list[str]:
    """What differs between two environment records: torch, transformers and peft versions,
    the torch build (CUDA / ROCm), the device's type and model, the GPU driver, and tunelab's
    own version and commit (each where both records say). Empty when either is unknown."""
    if not a or not b:
        return []
    out = []
    pa, pb = a.get("packages") or {}, b.get("packages") or {}
    for name in PLATFORM_PACKAGES:
        if pa.get(name) != pb.get(name):
            out.append(f"{name} {pa.get(name)} -> {pb.get(name)}")
    for key, name in (("torch_cuda", "CUDA build"), ("torch_hip", "ROCm build")):
        if a.get(key) != b.get(key):
            out.append(f"{name} {a.get(key)} -> {b.get(key)}")
    da, db = a.get("device") or {}, b.get("device") or {}
    if da.get("type") != db.get("type"):
        out.append(f"device {da.get('type')} -> {db.get('type')}")
    elif da.get("name") != db.get("name") and not {da.get("name"), db.get("name")} & ARCHITECTURES:
        out.append(f"device {da.get('name')} -> {db.get('name')}")  # an A100, then an H100
    for key, name in (("cuda_driver", "GPU driver"), ("tunelab", "tunelab")):
        if a.get(key) and b.get(key) and a[key] != b[key]:
            out.append(f"{name} {a[key]} -> {b[key]}")
    if a.get("git_commit") and b.get("git_commit") and a["git_commit"] != b["git_commit"]:
        out.append(f"tunelab commit {a['git_commit'][:12]} -> {b['git_commit'][:12]}")
    return out
