"""The GGUF base's one-time dequantize-and-save, with and without `read_once`.

    .venv/bin/python bench/gguf_load.py [--rounds 2]

transformers reads a GGUF file's header three times (config, weights, tokenizer) and maps the
tensor names once per module; `tunelab.modeling.gguf.read_once` makes each happen once. Each
round times `_save_plain_copy` (what `materialize` does the first time a lab meets the file) on
the extraction demo's SmolLM2-135M-Instruct GGUF both ways, alternating which goes first, each in
a fresh process, and checks that both wrote the same bytes (every file's sha256).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ONE = """
import contextlib, hashlib, json, os, sys, time
from pathlib import Path
import torch
from tunelab.demo.assets import smollm2_gguf
from tunelab.modeling import gguf as g
if sys.argv[1] == "without":
    g.read_once = contextlib.nullcontext
out = Path(sys.argv[2])
start = time.perf_counter()
g._save_plain_copy(smollm2_gguf(), out, torch.float32, "llama")
seconds = time.perf_counter() - start
files = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(out.iterdir())}
print(json.dumps({"seconds": seconds, "files": files}))
"""


def one(way: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(
            [sys.executable, "-c", ONE, way, out],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TQDM_DISABLE": "1"},
        )
    return json.loads(run.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"without": [], "with": []}
    files = set()
    for r in range(args.rounds):
        for way in ("without", "with") if r % 2 == 0 else ("with", "without"):
            result = one(way)
            times[way].append(result["seconds"])
            files.add(json.dumps(result["files"], sort_keys=True))
            print(f"round {r} {way:>7} read_once: {result['seconds']:.2f} s", flush=True)
    if len(files) != 1:
        raise SystemExit("the two ways wrote different files")
    without, with_ = (statistics.median(times[w]) for w in ("without", "with"))
    print(f"median without {without:.2f} s, with {with_:.2f} s: {without / with_:.2f}x; same files")


if __name__ == "__main__":
    main()
