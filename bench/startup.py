"""How long the commands that should answer at once take: `tunelab --help`, `tunelab runs` on a
lab without runs, and refused specs (exit 2), each in a fresh process, side by side.

Each round runs every command once, in a rotated order, so a change in the machine's load
touches them all alike; the table shows the median, the fastest and the slowest wall time of
each over the rounds, and the modules it imported (`python -X importtime` in one more run).
The labs are written to a temporary folder; the model folder is a config.json and a hand-made
safetensors file of a few bytes (no torch is needed to build it).

    .venv/bin/python bench/startup.py --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.5
HEAVY = ("torch", "transformers", "peft", "sklearn", "scipy")
PLAN = {
    "hypothesis": {"behaviour": "topics", "metric": "macro_f1", "min_effect": 0.01},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
}


def tiny_bert_folder(folder: Path) -> Path:
    """A model folder whose safetensors header names BERT's modules (query, key, value...)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    names = [
        f"encoder.layer.0.{m}.weight"
        for m in ("attention.self.query", "attention.self.key", "attention.self.value")
    ] + ["embeddings.word_embeddings.weight"]
    header, offset = {}, 0
    for name in names:
        header[name] = {"dtype": "F32", "shape": [2, 2], "data_offsets": [offset, offset + 16]}
        offset += 16
    raw = json.dumps(header).encode()
    with (folder / "model.safetensors").open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return folder


def write_labs(root: Path) -> dict[str, Path]:
    """A lab without a plan (no hypothesis, no guardrails) and one with a plan, no runs in
    either."""
    model = tiny_bert_folder(root / "model")
    base = {
        "data": {"sources": [{"type": "jsonl", "path": "docs.jsonl"}]},
        "model": {"path": str(model)},
        "method": {"type": "lora", "target_modules": ["query", "value"]},
    }
    labs = {}
    for name, extra in (("bare", {}), ("planned", PLAN)):
        lab = root / name
        lab.mkdir()
        (lab / "tunelab.yaml").write_text(json.dumps({**base, **extra}, indent=1))
        labs[name] = lab
    return labs


def commands(labs: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """(what is measured, the tunelab arguments, the exit code it must give)."""
    bare, planned = str(labs["bare"]), str(labs["planned"])
    return [
        ("tunelab --help", ["--help"], 0),
        ("tunelab runs (a lab without runs)", ["runs", "--lab", bare], 0),
        ("tunelab compare --help", ["compare", "--help"], 0),
        ("tunelab run: no hypothesis (refused)", ["run", "--lab", bare], 2),
        ("tunelab run training.lr=abc (refused)", ["run", "--lab", planned, "training.lr=abc"], 2),
        (
            "tunelab run, LoRA target q_proj on BERT (refused)",
            ["run", "--lab", planned, "method.target_modules=[q_proj]"],
            2,
        ),
    ]


def tunelab_command() -> list[str]:
    """The `tunelab` script beside this interpreter, as a user runs it."""
    script = Path(sys.executable).with_name("tunelab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tunelab.cli"]


def timed(argv: list[str], expected: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != expected:
        raise SystemExit(f"{argv}: exit {done.returncode}, expected {expected}\n{done.stderr}")
    return wall


def imported(args: list[str]) -> list[str]:
    """The heavy top-level packages one run of `tunelab ARGS` imports (`-X importtime`)."""
    code = "import sys; from tunelab.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args], capture_output=True, text=True
    )
    tops = {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return [m for m in HEAVY if m in tops]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="runs of each command (default 9)")
    opts = parser.parse_args()
    tunelab = tunelab_command()
    with tempfile.TemporaryDirectory(prefix="tunelab-startup-") as tmp:
        cases = commands(write_labs(Path(tmp)))
        python = [("python -c pass (interpreter start)", [sys.executable, "-c", "pass"], 0)]
        runs = python + [(name, tunelab + args, code) for name, args, code in cases]
        load_before = os.getloadavg()[0]
        walls: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for r in range(opts.rounds):
            for name, argv, code in runs[r % len(runs) :] + runs[: r % len(runs)]:
                walls[name].append(timed(argv, code))
        load_after = os.getloadavg()[0]
        heavy = {name: imported(args) for name, args, _ in cases}
    print(
        f"{opts.rounds} rounds, {os.cpu_count()} CPUs, load average {load_before:.2f} before "
        f"and {load_after:.2f} after; Python {sys.version.split()[0]}"
    )
    width = max(len(name) for name in walls)
    print(f"{'command':<{width}}  median    min    max  heavy imports")
    for name, values in walls.items():
        mark = "" if name.startswith("python") or statistics.median(values) < TARGET_S else " (!)"
        mods = ", ".join(heavy.get(name, [])) or ("-" if name in heavy else "")
        print(
            f"{name:<{width}}  {statistics.median(values):5.2f}s {min(values):5.2f}s "
            f"{max(values):5.2f}s  {mods}{mark}"
        )
    print(f"(!) median over {TARGET_S} s")


if __name__ == "__main__":
    main()
