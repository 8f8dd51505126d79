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


def text_read(record: dict) -> float | None:
    """The bytes of train text a pretrain run's tokens stood for: its tokens trained over the
    packed train split's, times that split's bytes (None where the record lacks them)."""
    packing, training = record.get("packing") or {}, record.get("training") or {}
    if not packing.get("bytes") or not packing.get("tokens") or not training.get("tokens"):
        return None
    return training["tokens"] / packing["tokens"] * packing["bytes"]


def text_differences(before: dict, run: dict, tolerance: float = TOLERANCE) -> list[str]:
    """One warning when two pretrain runs read amounts of text more than `tolerance` apart:
    at equal tokens, a larger vocabulary's tokens hold more bytes, so the run reads more text
    (bits per byte does not depend on the tokenizer; the budget in tokens does)."""
    a, b = text_read(before), text_read(run)
    if a is None or b is None or abs(b - a) <= tolerance * max(a, b):
        return []
    epochs = run["training"]["tokens"] / run["packing"]["tokens"]
    return [
        f"{run['id']} read {_amount(b)} of train text where {before['id']} read "
        f"{_amount(a)} ({(b - a) / a:+.0%}; {epochs:.2f} passes over its train split): "
        "its budget in tokens holds another amount of text (a tokenizer change does that), so "
        "its difference mixes the change with the data seen. Give both the same text (a "
        "budget in steps over matched bytes), or say so."
    ]


def _amount(n_bytes: float) -> str:
    """An amount of text in a unit that shows it: `0.28 MB`, `4.9 kB` (a tiny lab's had read
    `0.00 MB` against `0.00 MB`)."""
    return f"{n_bytes / 1e6:,.2f} MB" if n_bytes >= 1e5 else f"{n_bytes / 1e3:,.1f} kB"


def compute_differences(before: dict, run: dict, tolerance: float = TOLERANCE) -> list[str]:
    """One warning when `run` and `before` differ in parameters or FLOPs per token by more
    than `tolerance`; none when they match or either is not a scratch model."""
    apart = mismatched(before, run, tolerance)
    off = [f"{name} {x:,} -> {y:,} ({(y - x) / x:+.1%})" for name, (x, y) in apart.items()]
    if not off:
        return []
    if list(apart) == ["total parameters"]:
        # experts at matched active parameters: the same compute per token, another capacity
        # (it read "does not match the compute ... match parameters or FLOPs per token", met)
        x, y = apart["total parameters"]
        return [
            f"{run['id']} spends the compute per token of {before['id']} (active parameters "
            f"and FLOPs per token within {tolerance:.0%}) with {'more' if y > x else 'fewer'} "
            f"weights in all: {off[0]}. Its difference mixes the change with that capacity "
            "(and memory); say so, or match total parameters too."
        ]
    return [
        f"{run['id']} does not match the compute of {before['id']} (more than "
        f"{tolerance:.0%} apart): " + "; ".join(off) + ". Its difference mixes the change "
        "with the compute; match parameters or FLOPs per token for a fair ablation, or say so."
    ]
