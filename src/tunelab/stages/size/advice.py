"""How big a microbatch fits, and how to reach the spec's global batch (`tunelab size`)."""

from __future__ import annotations

from pathlib import Path

MAX_MICROBATCH = 4096
CONFIRM_TRIES = 6
CPU_HEADROOM = 0.08
"""The share of a CPU budget a confirmed microbatch leaves free: a run's resident set goes on
rising over its steps (glibc's heap: 1,549 MiB after the first step, 1,643 by the eleventh, on
MiniLM with LoRA), and a run at the microbatch a one-step probe had confirmed at 2,690 of
2,800 MiB peaked at 2,817. The confirming probe takes `CONFIRM_STEPS` steps too."""
CONFIRM_STEPS = 3
STEP_DOWN_MARGIN = 0.9
"""Stepping down, aim 10% under the budget: memory does not scale exactly with the microbatch
(glibc's heap on CPU), so a step aimed at the budget itself often lands just above it."""


def largest_by_estimate(estimate_mb, budget_mb: float, cap: int = MAX_MICROBATCH) -> int:
    """The largest microbatch whose estimate fits `budget_mb` (0: not even one)."""
    if estimate_mb(1) > budget_mb:
        return 0
    good, bad = 1, 2
    while bad <= cap and estimate_mb(bad) <= budget_mb:
        good, bad = bad, bad * 2
    bad = min(bad, cap + 1)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if estimate_mb(mid) <= budget_mb else (good, mid)
    return good


def advice(
    global_batch: int,
    largest: int,
    processes: int,
    tokens_per_s: float,
    seq: int,
    measured_at: int | None = None,
):
    """Microbatch x accumulation x processes = the global batch, with the largest microbatch
    that fits and divides the per-process share; the step time at the speed measured at
    microbatch `measured_at` (a larger microbatch is often faster: a floor, said so)."""
    share = global_batch // processes if global_batch % processes == 0 else None
    if share is None or largest < 1:
        return {
            "fits": False,
            "reason": (
                f"global batch {global_batch} does not split over {processes} processes"
                if share is None
                else "not even a microbatch of 1 fits the budget; set "
                "training.activation_checkpointing: true (its row above shows the saving), or "
                "shorten model.max_length"
            ),
        }
    micro = max(d for d in range(1, min(share, largest) + 1) if share % d == 0)
    tokens = global_batch * seq
    return {
        "fits": True,
        "microbatch": micro,
        "accumulation": share // micro,
        "processes": processes,
        "global_batch": global_batch,
        "tokens_per_step": tokens,
        "expected_tokens_per_s": round(tokens_per_s * processes, 1),
        "expected_step_s": round(tokens / (tokens_per_s * processes), 3),
        "speed_measured_at": measured_at,
    }


def largest_microbatch(base, estimate_mb, overhead, limit_mb, device, say, probe) -> dict:
    """GPU: try and catch OOM in one probe (with the estimate at the microbatch found, to set
    beside a run's measured peak). CPU: the estimate against the budget, then a measurement at
    that microbatch (stepping down while the measurement exceeds it). `probe` runs one
    configuration in a fresh process (`sizing.run_probe`)."""
    if device == "cuda":
        say("largest microbatch: trying until CUDA runs out of memory")
        r = probe(base | {"mode": "max_microbatch", "steps": 0})
        value = r["max_microbatch"]
        return {
            "value": value,
            "budget_mb": round(r["device_free_mb"] - r["headroom_mb"], 1),
            "budget": f"free device memory, {r['device_free_mb']:,.0f} MiB, less "
            f"{r['headroom_mb']:,.0f} MiB held back for what a run holds beyond a try",
            "method": "tried, out-of-memory caught",
            "estimated_mb": estimate_mb(value, 1, False, overhead)["peak_mb"] if value else None,
            "tried": r["tried"],
        }
    given = limit_mb or _available_mb()
    budget = given * (1 - CPU_HEADROOM)  # what a run adds over its steps stays free
    value = largest_by_estimate(lambda b: estimate_mb(b, 1, False, overhead)["peak_mb"], budget)
    out = {
        "value": value,
        "budget_mb": round(budget, 1),
        "budget": (
            f"{'--memory-limit' if limit_mb else 'available memory'} {given:,.0f} MiB less "
            f"{CPU_HEADROOM:.0%} for what a run's heap adds over its steps"
            + ("" if limit_mb else "; not confirmed")
        ),
        "method": "estimate",
        "estimated_mb": estimate_mb(value, 1, False, overhead)["peak_mb"] if value else None,
        "tried": {},
    }
    if not limit_mb or not value:
        return out
    for _ in range(CONFIRM_TRIES):  # confirm by measuring; step down while it exceeds the budget
        say(f"largest microbatch: measuring {value} against {budget:,.0f} MiB")
        m = probe(base | {"microbatch": value, "steps": CONFIRM_STEPS})
        peak = None if m.get("oom") else m["peak_rss_mb"]
        out["tried"][value] = None if peak is None else round(peak, 1)
        if peak is not None and peak <= budget:
            return out | {
                "value": value,
                "method": "estimate, confirmed by measuring",
                "estimated_mb": estimate_mb(value, 1, False, overhead)["peak_mb"],
                "measured_mb": round(peak, 1),
                "tokens_per_s": m["tokens_per_s"],
            }
        # the step's own memory scales with the microbatch; the framework's does not
        scale = (budget - overhead) / (peak - overhead) if peak and peak > overhead else 0.5
        value = max(0, min(value - 1, int(value * scale * STEP_DOWN_MARGIN)))
        if value == 0:
            break
    est_mb = estimate_mb(value, 1, False, overhead)["peak_mb"] if value else None
    return out | {"value": value, "estimated_mb": est_mb, "method": "estimate; not confirmed"}


def _available_mb() -> float:
    try:
        text = Path("/proc/meminfo").read_text()
        return int(text.split("MemAvailable:")[1].split()[0]) / 1024
    except (OSError, IndexError, ValueError):
        return float("inf")
