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


def env_differences(a: dict | None, b: dict | None) -> list[str]:
    """What differs between two environment records: torch, transformers and peft versions,
    the torch build (CUDA / ROCm) and the device type. Empty when either is unknown."""
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
    da, db = (a.get("device") or {}).get("type"), (b.get("device") or {}).get("type")
    if da != db:
        out.append(f"device {da} -> {db}")
    return out
