"""The record of `tunelab check`: where a check is kept, the latest one, and what `run` says.

A check is keyed by the data version and a hash of the spec parts that decide which code runs
(`WIRING`), and is stale on another platform (device type, core package versions).
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import torch

from tunelab.core.digest import sha256_json
from tunelab.core.env import PLATFORM_PACKAGES, device_of
from tunelab.core.lab import Lab
from tunelab.core.spec import Spec
from tunelab.core.store import Store

WIRING = {"task": None, "model": None, "method": None, "training": ("optimizer", "precision")}
"""What the spec hash covers: what decides which code runs. Left out: compass, hypothesis,
guardrails, rental, evaluation, data (the data version id is in the key already), and the
lr, schedule, batch sizes, budget and seed (an lr ablation needs no new check)."""


def spec_hash(spec: Spec) -> str:
    full = spec.to_dict()
    picked = {
        k: full.get(k) if keys is None else {x: full[k].get(x) for x in keys}
        for k, keys in WIRING.items()
    }
    return sha256_json(picked)


def check_path(store: Store, spec: Spec, data_version: str) -> Path:
    return store.root / "checks" / f"{data_version}-{spec_hash(spec)[:12]}.json"


def latest_check(store: Store, spec: Spec, data_version: str) -> dict | None:
    """The newest check of this spec (as `spec_hash` sees it) on this data version, or None."""
    path = check_path(store, spec, data_version)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def platform_of(device: torch.device) -> dict:
    """What makes a check stale when it changes: the device type and the core versions."""
    out = {"device": device_of(device)["type"]}
    for name in PLATFORM_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def check_status(lab: Lab, data_version: str) -> dict:
    """For `tunelab run`: the check of this spec and data version; `warning` is None only when
    it passed on this platform."""
    check = latest_check(lab.store, lab.spec, data_version)
    if check is None:
        return {
            "file": None,
            "passed": None,
            "warning": (
                "no `tunelab check` has run for this spec and data version: run it first "
                "(minutes, on a slice) to catch wiring errors before a long run"
            ),
        }
    status = {"file": check["file"], "passed": check["passed"], "warning": None}
    here = platform_of(lab.device)
    if not check["passed"]:
        failed = ", ".join(check["failed"])
        status["warning"] = f"the last `tunelab check` of this spec and data FAILED ({failed})"
    elif check["platform"] != here:
        status["warning"] = (
            f"`tunelab check` passed on another platform ({check['platform']}, now {here}): "
            "a new platform means the check is redone"
        )
    return status
