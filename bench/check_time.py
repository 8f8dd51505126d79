"""Where `tunelab check` spends its time inside each demo: the demo's own lab (its spec, its
data, for extraction the GGUF base dequantized into the lab's cache the way the demo's `inspect`
section leaves it), then `tunelab check --lab LAB --json` in a fresh process, timed.

The table shows each step's seconds (the record's `timing`; for an older record, each item's
`seconds`, which the items of one step share), the reload's own split, the check's total (the
record's `seconds`: what a demo spends on it) and the wall time of the whole command (interpreter
start and imports included). The labs go to a temporary folder unless `--root` names one (kept,
so a later `--reuse` times the check alone); `--src` times the tunelab of another source tree.

    .venv/bin/python bench/check_time.py classification extraction
    .venv/bin/python bench/check_time.py --root /tmp/labs --reuse --src /tmp/before/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from tunelab.data import build_data
from tunelab.demo import classification, extraction
from tunelab.demo.assets import bbc_news, manpages, minilm, smollm2_gguf
from tunelab.demo.report import open_demo
from tunelab.modeling.model import resolve_path

DEMOS = {
    "classification": (classification.SPEC, lambda: {"corpus": bbc_news(), "model": minilm()}),
    "extraction": (extraction.SPEC, lambda: {"data": manpages(), "model": smollm2_gguf()}),
}


def build_lab(task: str, lab: Path) -> Path:
    """The demo's lab up to its check: spec, data and (GGUF) the dequantized base."""
    spec, paths = DEMOS[task]
    handle = open_demo(lab, task, spec, paths(), Console(quiet=True), quiet=True).lab
    build_data(handle.spec, handle.path, handle.store)
    resolve_path(handle.spec.model, handle.path)  # the demo's `inspect` does this first
    return handle.path


def time_check(lab: Path, src: Path | None = None) -> dict:
    """`tunelab check --lab LAB --json` in a fresh process (with `src` first on the path: time
    another tree, e.g. `git archive af64339 src | tar -x -C /tmp/before`); record and wall."""
    env = dict(os.environ, PYTHONPATH=str(src)) if src else None
    command = [sys.executable, "-m", "tunelab.cli", "check", "--lab", str(lab), "--json"]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check did not run ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout) | {"wall": wall, "load": os.getloadavg()[0]}


def split(result: dict) -> dict[str, float]:
    """Seconds per step: the record's `timing`, or (an older record) each item's `seconds`,
    once per run of items that share them; the reload's own split when it has one."""
    steps = dict(result.get("timing") or {})
    if not steps:
        for i in result["items"]:
            if "seconds" in i and i["seconds"] not in steps.values():
                steps[i["name"]] = i["seconds"]
    reload = next((i for i in result["items"] if i["name"] == "reload"), {})
    for part, s in reload.get("process", {}).get("seconds", {}).items():
        steps[f"reload: {part}"] = s
    return steps


def table(results: dict[str, dict]) -> str:
    """One row per step, then the check's own total, the command's wall time and the load."""
    splits = {name: split(r) for name, r in results.items()}
    rows = list(dict.fromkeys(step for s in splits.values() for step in s))
    lines = ["| step | " + " | ".join(results) + " |", "|---" * (len(results) + 1) + "|"]
    for step in rows:
        cells = [f"{s[step]:.1f} s" if step in s else "" for s in splits.values()]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    totals = (("the check (record's `seconds`)", "seconds"), ("the command, wall", "wall"))
    for label, key in totals:
        cells = " | ".join(f"**{r[key]:.1f} s**" for r in results.values())
        lines.append(f"| {label} | {cells} |")
    loads = " | ".join(f"{r['load']:.2f}" for r in results.values())
    lines.append(f"| load average at the end | {loads} |")
    verdicts = ["passed" if r["passed"] else f"FAILED {r['failed']}" for r in results.values()]
    lines.append("| verdict | " + " | ".join(verdicts) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", default=list(DEMOS), choices=list(DEMOS))
    parser.add_argument("--root", type=Path, help="where the labs go (kept)")
    parser.add_argument("--reuse", action="store_true", help="time the labs already in --root")
    parser.add_argument("--src", type=Path, help="time the tunelab of this src folder instead")
    parser.add_argument("--out", type=Path, help="also write the check records here (JSON)")
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="check-time-"))
    results = {}
    for task in args.tasks:
        lab = root / task
        if not (args.reuse and lab.exists()):
            print(f"building the {task} demo lab in {lab}…", file=sys.stderr)
            build_lab(task, lab)
        print(f"timing `tunelab check` on {lab}…", file=sys.stderr)
        results[task] = time_check(lab, args.src)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))
    print(table(results))


if __name__ == "__main__":
    main()
