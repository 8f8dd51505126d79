"""The environment probes of `tunelab check`: the installed versions against tunelab's
requirements, and what the device can run (a matmul per dtype, bf16 autocast, whether bf16 is
native and what `training.precision: auto` would choose)."""

from __future__ import annotations

from importlib import metadata

import torch

from tunelab.core.env import PLATFORM_PACKAGES, device_of
from tunelab.core.spec import Spec
from tunelab.modeling.model import DTYPES
from tunelab.stages.check.record import item
from tunelab.training.precision import measure as measure_precision


def check_versions() -> dict:
    from packaging.requirements import Requirement

    try:
        required = metadata.requires("tunelab") or []
    except metadata.PackageNotFoundError:
        return item(
            "versions",
            False,
            "not checked: tunelab runs from source without its package metadata, so its "
            "requirements cannot be read (install it with `pip install -e .` to check them)",
            not_checked=True,
        )
    problems, seen = [], {}
    for req in map(Requirement, required):
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue  # an optional extra (dev tools)
        try:
            seen[req.name] = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req.name} is not installed (needs {req.specifier})")
            continue
        if not req.specifier.contains(seen[req.name], prereleases=True):
            problems.append(f"{req.name} {seen[req.name]} does not satisfy {req.specifier}")
    core = ", ".join(f"{k} {seen.get(k)}" for k in PLATFORM_PACKAGES)
    detail = "; ".join(problems) or f"{len(seen)} requirements satisfied ({core})"
    return item("versions", not problems, detail, installed=seen)


def check_backend(spec: Spec, device: torch.device, probe: dict) -> dict:
    problems, warnings = [], probe["warnings"]
    if probe["float32"] != "ok":
        problems.append(f"a float32 matmul fails on {device}: {probe['float32']}")
    if spec.model.dtype == "bfloat16" or spec.training.precision == "bf16":
        if probe["bfloat16"] != "ok" or probe["bf16_autocast"] != "ok":
            problems.append(f"the spec asks for bf16, which fails here: {probe['bf16_autocast']}")
        elif not probe["bf16_native"]:
            warnings.append(
                f"the spec asks for bf16 but this {probe['device']} has no native "
                "bf16: it is emulated, usually slower than fp32"
            )
    if spec.model.dtype == "float16":
        if probe["float16"] != "ok":
            problems.append(f"model.dtype float16 fails here: {probe['float16']}")
        if device.type == "cpu":
            warnings.append("model.dtype float16 on a CPU is slow; use float32 or bfloat16")
        warnings.append(
            "float16 weights train without loss scaling: small updates underflow; "
            "prefer float32 weights with precision bf16"
        )
    if probe["mps_available"] and device.type == "cpu":
        warnings.append("an Apple GPU (MPS) is present, but tunelab trains on the CPU")
    wanted = f"model.dtype {spec.model.dtype}, precision {spec.training.precision}"
    measured = probe.get("precision")
    if measured and "fp32_gflops" in measured:
        bf16 = measured["bf16_gflops"]
        wanted += (
            f"; matmul fp32 {measured['fp32_gflops']:,.0f} GFLOP/s, bf16 "
            f"{'not measured' if bf16 is None else f'{bf16:,.0f}'}: precision auto would "
            f"choose {measured['choice']} ({measured['reason']})"
        )
    detail = "; ".join(problems) or f"{probe['device']} runs {wanted}"
    if warnings:
        detail += " (warnings: " + "; ".join(warnings) + ")"
    return item("backend", not problems, detail, device=probe["device"], precision=measured)


def probe_backend(device: torch.device) -> dict:
    """A tiny matmul per dtype and a bf16 autocast on the device; whether bf16 is native."""
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))

    def run(fn) -> str:
        try:
            out = fn()
            return "ok" if bool(torch.isfinite(out.float()).all()) else "non-finite result"
        except Exception as err:
            return f"{type(err).__name__}: {err}"

    def bf16_autocast():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = torch.nn.functional.linear(x.to(device), x.to(device))
        if out.dtype != torch.bfloat16:
            raise RuntimeError(f"autocast computed in {out.dtype}, not bfloat16")
        return out

    probe: dict = {"device": device_of(device)["type"], "warnings": []}
    for name, dtype in DTYPES.items():
        probe[name] = run(lambda dtype=dtype: x.to(device, dtype) @ x.to(device, dtype))
    probe["bf16_autocast"] = run(bf16_autocast)
    probe["mps_available"] = bool(torch.backends.mps.is_available())
    try:  # whether bf16 is native, and what `training.precision: auto` would choose, and why
        probe["precision"] = measure_precision(device)
        probe["bf16_native"] = probe["precision"]["native_bf16"]
    except Exception as err:
        probe["precision"] = {"error": f"{type(err).__name__}: {err}"}
        probe["bf16_native"] = None
    return probe
