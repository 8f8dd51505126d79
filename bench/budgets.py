"""The demos and the test suites against their time budgets on this machine, as one table.

    .venv/bin/python bench/budgets.py [--only demos|tests] [--demos classification ...]
        [--hold-avx2] [--out /tmp/tunelab-budgets] [--json FILE]

The budgets (issue 28): each demo under 10 minutes, the ablation demo under 15, and `make test`
(the lint, then the fast and the slow suite) under 30 minutes, on a 2-core machine, the slowest
CPU included (AVX2 only: no AVX-512, no native bf16). Each demo runs as a newcomer runs it
(`tunelab demo TASK` at its own budget, a fresh lab, torch's default threads); the tests as
`make test` runs them (`make lint`, then `make test-all`: both suites in one session). Each in
its own process, one after the other; the wall time is the child's, its peak memory `wait4`'s
ru_maxrss (the largest of its processes, not their sum). The CPU's model and the flags that
decide the speed of training (`avx2`, `avx512f`, `avx512_bf16`, `amx_bf16`) head the table,
with the 1-minute load average at the start: the figures are only the machine's when it is idle
(a load near 0 there; the steps themselves then keep it near the number of cores).

`--hold-avx2` runs every step with the libraries held to their AVX2 code paths (`HOLD_AVX2`:
Intel MKL, torch's own kernels, oneDNN, numpy, OpenBLAS), a stand-in for an AVX2-only CPU on
a newer one: it reproduces the instruction set and its numerics (MKL's AVX2 path once made the
check's reload differ: bench/README.md), not an older machine's slower cores.

Expected output (every value in <angle brackets> is a placeholder, not a measurement):

    CPU: <model>, <N> cores; avx2 <yes|no>, avx512f <yes|no>, avx512_bf16 <yes|no>, amx_bf16 <..>
    load average at the start: <load>
    | what | wall | budget | within | peak memory | exit |
    |---|--:|--:|---|--:|--:|
    | demo classification | <m:ss> | 10:00 | <yes|NO> | <GiB> | 0 |
    ...
    | make test (lint + both suites) | <m:ss> | 30:00 | <yes|NO> | | |
    demo classification by section (numbered as in its log): set-up <m:ss>, 1 <m:ss>, ...

The last lines say where each demo's time went, from the demo's own ending ("done in … (m:ss
by section: …)"): first its set-up, then the sections numbered as its report numbers them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from machine import cpuinfo

ROOT = Path(__file__).resolve().parent.parent
DEMOS = {"classification": 600, "extraction": 600, "ablation": 900, "images": 600}
"""Each demo's budget in seconds."""
SUITES = ("lint", "test-all")
"""`make test`'s steps after the set-up, in its order; together under `MAKE_TEST_BUDGET`."""
MAKE_TEST_BUDGET = 1800
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
HOLD_AVX2 = {
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # torch's float32 matrix products on x86
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (bf16 products, convolutions)
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",  # numpy (the data step)
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's BLAS
}
"""The variables that hold each library to AVX2, for `--hold-avx2`."""


def cpu() -> dict:
    """The CPU's model, cores and the flags that decide the speed of training."""
    model, flags = cpuinfo()
    return {
        "model": model,
        "cores": len(os.sched_getaffinity(0)),
        "flags": {f: f in flags for f in FLAGS},
        "load_at_start": round(os.getloadavg()[0], 2),
    }


def timed(
    name: str, argv: list[str], budget: int | None, log: Path, env: dict | None = None
) -> dict:
    """Run `argv` from the repository root, its output to `log`; its wall time and peak."""
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds, code = time.perf_counter() - start, os.waitstatus_to_exitcode(status)
    row = {
        "what": name,
        "command": " ".join(argv),
        "seconds": round(seconds, 1),
        "budget_s": budget,
        "within": None if budget is None else seconds <= budget and code == 0,
        "peak_gib": round(usage.ru_maxrss / 2**20, 2),
        "exit": code,
        "log": str(log),
    }
    print(f"  {name}: {mmss(seconds)} (exit {row['exit']})", file=sys.stderr, flush=True)
    return row


BY_SECTION = re.compile(r"done in [\d.]+ min \((?:m:ss )?by section: ([^)]*)\)")
"""A demo's ending, which gives its time by section."""


def demo_sections(log: Path) -> str | None:
    """The time by section a demo's log ends with (None when it did not get there); the
    console may have wrapped the line."""
    found = BY_SECTION.search(" ".join(log.read_text(errors="replace").split()))
    return found.group(1) if found else None


def mmss(seconds: float | None) -> str:
    return "" if seconds is None else f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def table(machine: dict, rows: list[dict]) -> str:
    flags = ", ".join(f"{f} {'yes' if on else 'no'}" for f, on in machine["flags"].items())
    held = machine.get("held")
    lines = [
        f"CPU: {machine['model']}, {machine['cores']} cores; {flags}",
        *([f"held to AVX2: {' '.join(f'{k}={v}' for k, v in held.items())}"] if held else []),
        f"load average at the start: {machine['load_at_start']:.2f}",
        "| what | wall | budget | within | peak memory | exit |",
        "|---|--:|--:|---|--:|--:|",
    ]
    for r in rows:
        within = "" if r["within"] is None else ("yes" if r["within"] else "NO")
        peak = f"{r['peak_gib']:.1f} GiB" if r.get("peak_gib") is not None else ""
        exit_code = "" if r.get("exit") is None else r["exit"]
        lines.append(
            f"| {r['what']} | {mmss(r['seconds'])} | {mmss(r['budget_s'])} | {within} | "
            f"{peak} | {exit_code} |"
        )
    lines += [
        f"{r['what']} by section (numbered as in its log): {r['sections']}"
        for r in rows
        if r.get("sections")
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("demos", "tests"), help="one half only")
    parser.add_argument("--demos", nargs="+", choices=list(DEMOS), default=list(DEMOS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/tunelab-budgets"))
    parser.add_argument("--json", type=Path, help="also write the rows and the CPU here")
    parser.add_argument(
        "--hold-avx2", action="store_true", help="every library on its AVX2 path (a stand-in)"
    )
    args = parser.parse_args(argv)
    tunelab = ROOT / ".venv" / "bin" / "tunelab"
    if args.only != "tests" and not tunelab.exists():
        parser.error(f"{tunelab} is missing: run `make` first (the README's set-up)")
    args.out.mkdir(parents=True, exist_ok=True)
    machine, rows = cpu(), []
    env = None
    if args.hold_avx2:
        machine["held"] = HOLD_AVX2
        # inductor's cache is not keyed on ATEN_CPU_CAPABILITY: a compiled model from one
        # setting loaded under the other aborted or trained to garbage (bench/README.md)
        env = os.environ | HOLD_AVX2 | {"TORCHINDUCTOR_CACHE_DIR": str(args.out / "inductor")}
    print(f"writing labs and logs under {args.out}", file=sys.stderr)
    if args.only != "tests":
        for demo in args.demos:
            lab = args.out / f"demo-{demo}"
            subprocess.run(["rm", "-rf", str(lab)], check=True)  # a fresh lab, as a newcomer's
            argv = [str(tunelab), "demo", demo, "--dir", str(lab)]
            log = args.out / f"{demo}.log"
            row = timed(f"demo {demo}", argv, DEMOS[demo], log, env)
            rows.append(row | {"sections": demo_sections(log)})
    if args.only != "demos":
        suites = [
            timed(f"make {s}", ["make", s], None, args.out / f"make-{s}.log", env) for s in SUITES
        ]
        total = sum(r["seconds"] for r in suites)
        rows += suites
        rows.append(
            {
                "what": "make test (lint + both suites)",
                "seconds": round(total, 1),
                "budget_s": MAKE_TEST_BUDGET,
                "within": total <= MAKE_TEST_BUDGET and all(r["exit"] == 0 for r in suites),
            }
        )
    print(table(machine, rows))
    if args.json:
        args.json.write_text(json.dumps({"cpu": machine, "rows": rows}, indent=2) + "\n")
    return 0 if all(r["within"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
