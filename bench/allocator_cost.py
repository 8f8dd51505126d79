"""What fixing glibc's mmap threshold costs in step time (the allocator `tunelab run` uses on CPU).

    .venv/bin/python bench/allocator_cost.py [--rounds 2] [--steps 3] [--cache DIR]

For each configuration, fresh `tunelab.stages.size.probe` processes run `--steps` timed training
steps (after a warm-up step) with glibc's default allocator settings and with the mmap
threshold fixed at 128 KiB, alternating default/fixed for `--rounds` rounds so that drift in
the machine's load falls on both sides alike. Printed: the median step time of each side, the
ratio fixed/default, and the system CPU seconds per step (page faults on fresh mappings are
where the fixed threshold pays).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from size_accuracy import MMAP_THRESHOLD, probe_args

from tunelab.stages.size import measure as sizing

CONFIGS = ["minilm-lora-128", "minilm-full-512-ckpt", "smollm2-lora-128", "smollm2-full-128"]


def measure(name: str, cache: Path, rounds: int, steps: int) -> dict:
    args = probe_args(name, cache) | {"steps": steps}
    sides: dict[str, dict[str, list[float]]] = {
        s: {"step_s": [], "sys_s": [], "peak_mb": []} for s in ("default", "fixed")
    }
    for _ in range(rounds):
        for side in ("default", "fixed"):
            extra = {"mmap_threshold": MMAP_THRESHOLD} if side == "fixed" else {}
            r = sizing.run_probe(args | extra)
            sides[side]["step_s"] += r["step_seconds"]
            sides[side]["sys_s"].append(r["cpu_s"][1] / steps)
            sides[side]["peak_mb"].append(r["peak_rss_mb"])
    row = {"config": name, "rounds": rounds, "steps": steps}
    for side, v in sides.items():
        row[f"step_s_{side}"] = round(statistics.median(v["step_s"]), 3)
        row[f"sys_s_{side}"] = round(statistics.median(v["sys_s"]), 3)
        row[f"peak_mb_{side}"] = round(max(v["peak_mb"]), 1)
    row["ratio"] = round(row["step_s_fixed"] / row["step_s_default"], 3)
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| configuration | step s default | step s fixed | fixed / default "
        "| system s/step default | fixed | peak MiB default | fixed |",
        "|" + "---|" * 8,
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['step_s_default']:.3f} | {r['step_s_fixed']:.3f} "
            f"| {r['ratio']:.2f} | {r['sys_s_default']:.2f} | {r['sys_s_fixed']:.2f} "
            f"| {r['peak_mb_default']:,.0f} | {r['peak_mb_fixed']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=CONFIGS)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tunelab-bench-cache"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in args.only or CONFIGS:
        rows.append(measure(name, args.cache, args.rounds, args.steps))
        print(f"{name}: {rows[-1]}", file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
