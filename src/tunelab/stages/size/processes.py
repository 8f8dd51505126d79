"""`tunelab size --nproc N`: one rank's step measured in N real processes, beside its estimate.

`size` itself runs in one process; for the measurement it starts ``python -m
torch.distributed.run --standalone --nproc_per_node N -m tunelab.stages.size.probe <args>``
with OMP_NUM_THREADS = max(1, cores // N) (the ranks share this machine's cores), and reads
every rank's result file. Each rank takes global_batch / N examples per step in microbatches
(accumulation per rank = global_batch / (N × microbatch)), wraps its model as the strategy
says (DDP, or FSDP2 sharding), takes a warm-up step, resets its peak and measures its steps:
the same measurement as one process, per rank. The per-rank estimate is
`tunelab.stages.size.ranks`; its error is against the largest rank's peak.

The one-process variants (accumulation, checkpointing) and the gradient check are not run
here: `tunelab size` without --nproc gives them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.core.env import run_child
from tunelab.core.errors import TunelabError
from tunelab.stages.size import ranks
from tunelab.stages.size.advice import advice, largest_by_estimate
from tunelab.stages.size.during import During
from tunelab.stages.size.launch import SizingError, probe_folder
from tunelab.training.distributed import oversubscribed

MIB = 2**20


def omp_threads(nproc: int) -> int:
    """Threads per rank: this machine's cores shared out, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // nproc)


def torchrun_command(nproc: int, payload: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "-m",
        "tunelab.stages.size.probe",
        payload,
    ]


def run_rank_probes(
    args: dict[str, Any], nproc: int, timeout: float, scratch: Path | None = None
) -> dict[str, Any]:
    """Run one configuration as `nproc` ranks under torchrun; every rank's result, in rank
    order. A rank the kernel killed, or one that ran out of memory, makes it {"oom": True}."""
    threads = omp_threads(nproc)
    with probe_folder(args, scratch, "probe-ranks-") as folder:
        cmd = torchrun_command(nproc, folder.payload)
        env = folder.env | {"OMP_NUM_THREADS": str(threads)}
        proc = run_child(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        out = folder.out
        files = [out.with_name(f"{out.name}.rank{r}") for r in range(nproc)]
        results = [json.loads(f.read_text()) if f.exists() else None for f in files]
    shown = " ".join(cmd[:-1]) + " '<args>'"
    common = {"omp_num_threads": threads, "command": shown, "returncode": proc.returncode}
    failed = [r for r in results if r is None or "error" in r]
    if failed:
        oom = any(r is not None and r.get("oom") for r in failed) or proc.returncode < 0
        errors = [r["error"] for r in failed if r is not None]
        error = "; ".join(errors) or proc.stderr.strip()[-2000:] or f"exit {proc.returncode}"
        if not oom:
            raise SizingError(f"the sizing probe under torchrun failed: {error}")
        return common | {"oom": True, "error": error, "ranks": results}
    return common | {"ranks": results}


def measure_processes(
    base: dict[str, Any],
    facts: tuple,
    nproc: int,
    strategy: str,
    global_batch: int,
    budget_mb: float | None,
    say: Callable[[str], None],
    probe_ranks: Callable[[dict[str, Any], int], dict[str, Any]],
) -> dict[str, Any]:
    """The per-rank section of the record: the ranks' peaks beside the per-rank estimate, the
    largest per-rank microbatch by that estimate and what the advice needs."""
    shape, tr, units = facts
    mb, seq = base["microbatch"], base["seq_len"]
    device = base["device"].split(":")[0]  # each rank takes its own GPU (`cuda:LOCAL_RANK`)
    share, acc = ranks.per_rank_split(global_batch, nproc, mb)
    say(f"{strategy} × {nproc} processes: each rank {acc} microbatch(es) of {mb}, {seq} tokens")
    crowded = oversubscribed(nproc) if device == "cpu" else None
    if crowded:
        say(f"warning: {crowded}")
    m = probe_ranks(base | {"accumulation": acc, "strategy": strategy}, nproc)
    if m.get("oom"):
        raise TunelabError(
            f"microbatch {mb} at {seq} tokens does not fit on a rank under {strategy} × "
            f"{nproc}: {m['error']}"
        )
    rows = [_rank_row(r, device) for r in m["ranks"]]
    overhead = max(r["rss_framework_mb"] for r in m["ranks"]) if device == "cpu" else 0.0

    def estimate(b: int, k: int) -> dict:
        return ranks.rank_estimate(
            strategy,
            nproc,
            shape,
            tr,
            units,
            b,
            seq,
            k,
            int(overhead * MIB),
            device,
            base["precision"],
            base.get("targets"),
            During.from_args(base),
        )

    e = estimate(mb, acc)
    top = max(r["measured_peak_mb"] for r in rows)
    peak_mb = _mb(e["peak_bytes"])
    budget, source = _budget(budget_mb, nproc, device, m["ranks"])
    largest = largest_by_estimate(
        lambda b: _mb(estimate(b, 1 if b >= share else 2)["peak_bytes"]), budget, cap=share
    )
    return {
        "nproc": nproc,
        "strategy": strategy,
        "oversubscribed": crowded,
        "omp_num_threads": m["omp_num_threads"],
        "command": m["command"],
        "examples_per_rank": share,
        "microbatch": mb,
        "accumulation_per_rank": acc,
        "ranks": rows,
        "max_peak_mb": top,
        "estimate": {
            "terms_mb": {k: _mb(v) for k, v in e["terms"].items()},
            "terms": e["described"],
            "phases_mb": {k: _mb(v) for k, v in e["phases"].items()},
            "peak_phase": e["peak_phase"],
            "peak_mb": peak_mb,
            "approximate": e["approximate"],
        },
        "error_pct": round(100 * (peak_mb - top) / top, 1),
        "fsdp": m["ranks"][0].get("fsdp"),
        "units": {
            "blocks": units.blocks,
            "largest_block_mb": _mb(units.largest_block_bytes),
            "root_mb": _mb(units.root_bytes),
        },
        "largest_microbatch": {
            "value": largest,
            "budget_mb": round(budget, 1),
            "budget": source,
            "method": "per-rank estimate (not confirmed by measuring)"
            + (f"; capped at the per-rank share of {share}" if largest == share else ""),
            "estimated_mb": _mb(estimate(largest, 1 if largest >= share else 2)["peak_bytes"])
            if largest
            else None,
            "tried": {},
        },
        "tokens_per_s_per_rank": min(r["tokens_per_s"] or 0.0 for r in rows),
    }


def processes_record(ranks: dict, global_batch: int, seq: int) -> dict:
    """The record's top-level fields for `measure_processes`'s section: the per-rank estimate in
    the one-process record's shape (so the report and the plan read it as they read any size
    record), the largest rank's peak and its error, the slowest rank's speed, the advice."""
    pe, largest = ranks["estimate"], ranks["largest_microbatch"]
    slowest = max(ranks["ranks"], key=lambda r: r["step_s"])
    told = advice(
        global_batch, largest["value"], ranks["nproc"], ranks["tokens_per_s_per_rank"], seq
    )
    whole = pe["terms_mb"].get("whole_model")
    if not told["fits"] and whole is not None and whole > largest["budget_mb"]:
        told["reason"] = (
            f"the whole model ({whole:,.1f} MiB of weights) does not fit one rank's "
            f"{largest['budget_mb']:,.0f} MiB: every rank loads it whole before FSDP shards it, "
            "and rank 0 evaluates it whole after training, so more processes do not help; take "
            "a device with more memory, or model.dtype: bfloat16 (half the weights)"
        )
    return {
        "estimate": {
            "components_mb": pe["terms_mb"],
            "phases_mb": pe["phases_mb"],
            "peak_phase": pe["peak_phase"],
            "peak_mb": pe["peak_mb"],
            "approximate": pe["approximate"],
            "per_rank": True,
        },
        "measured": {k: slowest[k] for k in ("rank", "step_s", "tokens_per_s")},
        "measured_peak_mb": ranks["max_peak_mb"],
        "error_pct": ranks["error_pct"],
        "processes": ranks,
        "largest_microbatch": largest,
        "advice": told,
    }


def _rank_row(r: dict, device: str) -> dict:
    peak = r["cuda_peak_allocated_mb"] if device == "cuda" else r["peak_rss_mb"]
    loaded = r.get("cuda_loaded_mb", r["rss_loaded_mb"])
    return {
        "rank": r.get("rank"),
        "measured_peak_mb": round(peak, 1),
        "baseline_mb": round(loaded, 1),
        "step_mb": round(peak - loaded, 1),
        "peak_reset": r.get("peak_reset"),
        "threads": r.get("threads"),
        "step_s": r["step_s"],
        "tokens_per_s": r["tokens_per_s"],
    }


def _budget(
    limit_mb: float | None, nproc: int, device: str, ranks: list[dict]
) -> tuple[float, str]:
    """One rank's budget: --memory-limit, else on CPU this machine's available memory / N (the
    ranks share it), on CUDA the least free memory a rank's device had before its model loaded,
    as each probe read it (this process opens no CUDA context of its own, which would hold
    memory on a GPU the ranks use)."""
    if limit_mb:
        return limit_mb, "--memory-limit (per rank)"
    if device == "cuda":
        free = min(r["cuda_free_mb"] for r in ranks)
        return free, "free memory of the fullest device, as its rank found it"
    from tunelab.stages.size.advice import _available_mb

    return _available_mb() / nproc, f"available memory / {nproc} ranks (not confirmed)"


def _mb(x: float) -> float:
    return round(x / MIB, 1)
