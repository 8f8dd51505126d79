"""Do two runs spend the same compute? A fair ablation matches it, or says that it does not.

For models built from scratch the run records hold total parameters, active parameters per
token and training FLOPs per token (`modeling.scratch`). When two runs set side by side differ
in any of them by more than `TOLERANCE` (relative to the larger), `compare` warns, naming the
numbers: a gain bought with more compute is not the same finding as a gain at equal compute.
"""

from __future__ import annotations

TOLERANCE = 0.05
"""The largest relative difference that still counts as matched compute."""


def _figures(record: dict) -> dict[str, int] | None:
    base = record.get("base_model") or {}
    if base.get("init") != "scratch":
        return None
    return {
        "total parameters": base["params"]["total"],
        "active parameters": base["params"]["active"],
        "FLOPs per token": base["flops_per_token"],
    }


def mismatched(before: dict, run: dict, tolerance: float = TOLERANCE) -> dict[str, tuple]:
    """The figures (`total parameters`, `active parameters`, `FLOPs per token`) in which `run`
    and `before` differ by more than `tolerance`, each with its two values; empty when they
    match or either is not a scratch model."""
    a, b = _figures(before), _figures(run)
    if a is None or b is None:
        return {}
    return {
        name: (a[name], b[name])
        for name in a
        if abs(b[name] - a[name]) > tolerance * max(a[name], b[name])
    }


def compute_differences(before: dict, run: dict, tolerance: float = TOLERANCE) -> list[str]:
    """One warning when `run` and `before` differ in parameters or FLOPs per token by more
    than `tolerance`; none when they match or either is not a scratch model."""
    off = [
        f"{name} {x:,} -> {y:,} ({(y - x) / x:+.1%})"
        for name, (x, y) in mismatched(before, run, tolerance).items()
    ]
    if not off:
        return []
    return [
        f"{run['id']} does not match the compute of {before['id']} (more than "
        f"{tolerance:.0%} apart): " + "; ".join(off) + ". Its difference mixes the change "
        "with the compute; match parameters or FLOPs per token for a fair ablation, or say so."
    ]
