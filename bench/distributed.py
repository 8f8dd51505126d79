"""Tokens/s of one process against two under `torchrun` on the same CPU cores, same global batch.

    .venv/bin/python bench/distributed.py [--rounds 2] [--steps 6] [--model-size small] [--json]

A small Llama-style decoder with random weights is built from its config in a temporary folder
(bench/tiny_llama_labs.py: the test suite's byte-level BPE tokenizer with its ChatML template),
beside two generative labs laid out like the tests' extraction lab (`pages.jsonl` and a
`tunelab.yaml`): one trains a LoRA, one the full model. Each configuration, a method and a
strategy (`training.strategy=ddp` or `=fsdp`, passed as an override), runs `tunelab run` under
`torchrun --standalone` twice: 1 process with `OMP_NUM_THREADS=T`, then 2 processes (gloo) with
`OMP_NUM_THREADS=T/2` each, so both use the same T cores (default 2), at the same global batch
(8, microbatches of 2: accumulation 4 in one process, 2 per rank in two). The rounds alternate
1, 2, 1, 2... so drift in the machine's load falls on both sides alike.

Reported per configuration: the median over the rounds of the steady tokens/s (the run record's
per-step history after the first step, which holds the warm-up), the ratio 2-process/1-process,
the largest relative difference between the per-step losses of 1 and 2 processes (the same
examples each step, so only the order of floating-point sums differs), and rank 0's peak
memory. A strategy the spec refuses (exit 2: `fsdp` before it exists) is reported as "not
available" with the reason, and not tried again in later rounds; a run that fails otherwise is
reported as failed. Nothing here measures a GPU: see bench/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # before transformers is imported
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = Path(__file__).resolve().parent.parent

from tiny_llama_labs import build_llama, page_rows, write_lab  # noqa: E402 (after the variables)

SIZES = {
    # name: (hidden, intermediate, layers, attention heads, key/value heads)
    "tiny": (128, 344, 4, 4, 2),
    "small": (256, 688, 6, 4, 2),
    "medium": (384, 1024, 8, 6, 2),
    "large": (512, 1376, 6, 8, 4),
}
"""CPU presets; with the test tokenizer's ~400-token vocabulary they hold about 0.8M, 4.6M,
12.9M and 17.8M parameters (the exact count is printed)."""
METHODS = {
    "lora": {
        "type": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    },
    "full": {"type": "full"},
}
"""LoRA dropout 0, as in tests/e2e/test_distributed.py: the losses of 1 and 2 processes then
differ only by the order of sums."""
STRATEGIES = ("ddp", "fsdp")
GLOBAL_BATCH, MICROBATCH, MAX_LENGTH = 8, 2, 256
RUN_TIMEOUT_S = 1800


# --- running tunelab ----------------------------------------------------------------------------


def tunelab_env(threads: int | None = None) -> dict:
    """The environment of a tunelab process: offline, quiet, this checkout importable, and the
    thread count when given (OMP and MKL alike)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def parse_output(stdout: str) -> dict | None:
    """The JSON that `tunelab ... --json` printed: rank 0's record, or the first error line
    (every rank prints its refusal)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


# --- one run ------------------------------------------------------------------------------------


def run_once(lab: Path, name: str, nproc: int, strategy: str, threads: int) -> dict:
    """`tunelab run` under torchrun with `nproc` processes of `threads` threads each."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", str(nproc), "-m", "tunelab.cli", "run", "--lab", str(lab)]
    command += ["--name", name, "--device", "cpu", "--json", f"training.strategy={strategy}"]
    result: dict = {"nproc": nproc, "strategy": strategy, "threads": threads}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=tunelab_env(threads), timeout=RUN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        wall = round(time.perf_counter() - start, 1)
        error = f"no result in {RUN_TIMEOUT_S} s"
        return result | {"wall_s": wall, "status": "failed", "error": error}
    wall = time.perf_counter() - start
    out = parse_output(done.stdout)
    result |= {"wall_s": round(wall, 1), "returncode": done.returncode}
    if done.returncode != 0 or not out or "error" in out or "training" not in out:
        message = (out or {}).get("error") or _last_line(done.stderr) or "no output"
        # the input refused (tunelab's exit 2, which torchrun reports as its own 1) because of
        # the strategy: one this tunelab does not take yet; any other refusal or error: failed
        refused = bool(out and "error" in out and out.get("internal") is False)
        available = not (refused and "strategy" in message)
        return result | {"status": "failed" if available else "not available", "error": message}
    t = out["training"]
    history = t["history"]
    return result | {
        "status": "ok",
        "run": out["id"],
        "tokens_per_s": steady_tokens_per_s(history) or t["tokens_per_s"],
        "record_tokens_per_s": t["tokens_per_s"],
        "train_seconds": t["seconds"],
        "tokens": t["tokens"],
        "losses": [h["loss"] for h in history],
        "peak_memory_mb": t.get("peak_memory_mb"),
        "processes": t.get("processes"),
    }


def steady_tokens_per_s(history: list[dict]) -> float | None:
    """Tokens/s over the steps after the first (which holds the warm-up); None for one step."""
    if len(history) < 2:
        return None
    first, last = history[0], history[-1]
    seconds = last["seconds"] - first["seconds"]
    return round((last["tokens"] - first["tokens"]) / seconds, 1) if seconds > 0 else None


def one_line(text: str, limit: int = 200) -> str:
    """An error on one table line: whitespace collapsed, '|' escaped, the middle cut out when
    it is long (a spec error names the field at its end)."""
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= limit else f"{text[:80]} … {text[-(limit - 83) :]}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# --- the benchmark ------------------------------------------------------------------------------


def loss_difference(a: list[float], b: list[float]) -> float | None:
    """The largest relative difference of two per-step loss curves."""
    if not a or len(a) != len(b):
        return None
    return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b, strict=True))


def summarise(method: str, strategy: str, runs: list[dict]) -> dict:
    one = [r for r in runs if r["nproc"] == 1]
    two = [r for r in runs if r["nproc"] == 2]
    row: dict = {"method": method, "strategy": strategy, "rounds": len(two)}
    bad = next((r for r in one + two if r["status"] != "ok"), None)
    if bad is not None:
        return row | {"status": bad["status"], "error": bad["error"], "nproc_failed": bad["nproc"]}
    t1 = statistics.median(r["tokens_per_s"] for r in one)
    t2 = statistics.median(r["tokens_per_s"] for r in two)
    diffs = [loss_difference(a["losses"], b["losses"]) for a, b in zip(one, two, strict=True)]
    return row | {
        "status": "ok",
        "tokens_per_s_1": round(t1, 1),
        "tokens_per_s_2": round(t2, 1),
        "ratio": round(t2 / t1, 3),
        "tokens_per_s_1_all": [r["tokens_per_s"] for r in one],
        "tokens_per_s_2_all": [r["tokens_per_s"] for r in two],
        "max_rel_loss_diff": max(known) if (known := [d for d in diffs if d is not None]) else None,
        "peak_mb_1": max(r["peak_memory_mb"] or 0 for r in one),
        "peak_mb_2_rank0": max(r["peak_memory_mb"] or 0 for r in two),
        "tokens_per_step": one[0]["tokens"] // max(1, len(one[0]["losses"])),
    }


def table(rows: list[dict], threads: int) -> str:
    half = threads // 2
    lines = [
        f"| method | strategy | tok/s 1 process ({threads} threads) "
        f"| tok/s 2 processes ({half} thread{'s' if half > 1 else ''} each) | 2-proc / 1-proc "
        "| max rel. loss diff | peak MiB 1 proc | peak MiB rank 0 of 2 | rounds |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        if r["status"] != "ok":
            why = one_line(r["error"])
            lines.append(f"| {r['method']} | {r['strategy']} | {r['status']}: {why} | | | | | | |")
            continue
        diff = r["max_rel_loss_diff"]
        lines.append(
            f"| {r['method']} | {r['strategy']} | {r['tokens_per_s_1']:,.0f} "
            f"| {r['tokens_per_s_2']:,.0f} | {r['ratio']:.2f} "
            f"| {'n/a' if diff is None else f'{diff:.1e}'} | {r['peak_mb_1']:,.0f} "
            f"| {r['peak_mb_2_rank0']:,.0f} | {r['rounds']} |"
        )
    return "\n".join(lines)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def busy(threads: int) -> bool:
    """Other work on the machine: a 1-minute load average above a quarter of the cores this
    benchmark uses. Two OpenMP threads sharing cores with another process wait for each other
    at every parallel region, which slows the 1-process side far more than the 2-process side
    (1 thread each), so the ratio is then no measurement."""
    try:
        return os.getloadavg()[0] > threads / 4
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="1-process/2-process pairs per row")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run (>= 2)")
    parser.add_argument("--model-size", choices=sorted(SIZES), default="small")
    parser.add_argument(
        "--threads", type=int, default=2, help="cores for 1 process; 2 processes get half each"
    )
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=["lora", "full"])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--keep", type=Path, help="build the labs here and keep them")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.steps < 2 or args.rounds < 1 or args.threads < 2 or args.threads % 2:
        parser.error("--steps must be >= 2, --rounds >= 1, --threads even and >= 2")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    root = args.keep or Path(tempfile.mkdtemp(prefix="tunelab-bench-dist-"))
    root.mkdir(parents=True, exist_ok=True)
    started, load_before = time.perf_counter(), load_average()
    was_busy = busy(args.threads)
    try:
        hidden, inter, layers, heads, kv = SIZES[args.model_size]
        model = build_llama(root / "model", hidden, inter, layers, heads, kv)
        say(
            f"model {args.model_size}: {model['parameters'] / 1e6:.1f}M parameters "
            f"(hidden {hidden}, {layers} layers, {heads} heads / {kv} kv, vocab {model['vocab']})"
        )
        from transformers import AutoTokenizer

        rows = page_rows(48, MAX_LENGTH + 40, AutoTokenizer.from_pretrained(model["path"]))
        training = {
            "lr": 1e-3,
            "global_batch": GLOBAL_BATCH,
            "microbatch": MICROBATCH,
            "budget": {"steps": args.steps},
            "seed": 0,
            "schedule": "constant",
        }
        labs = {}
        for method in args.methods:
            labs[method] = write_lab(
                root / f"lab-{method}",
                Path(model["path"]),
                rows,
                METHODS[method],
                training,
                MAX_LENGTH,
            )
            done = subprocess.run(
                [sys.executable, "-m", "tunelab.cli", "data", "--lab", str(labs[method]), "--json"],
                capture_output=True,
                text=True,
                env=tunelab_env(),
            )
            if done.returncode != 0:
                say(f"tunelab data failed for {method}: {done.stdout}{done.stderr}")
                return 1
        half = args.threads // 2
        say(
            f"threads: 1 process × OMP_NUM_THREADS={args.threads}; 2 processes × "
            f"OMP_NUM_THREADS={half} (the same {args.threads} cores); global batch "
            f"{GLOBAL_BATCH}, microbatch {MICROBATCH}, {args.steps} steps, max_length {MAX_LENGTH}"
        )
        configs = [(m, s) for m in args.methods for s in args.strategies]
        runs: dict[tuple[str, str], list[dict]] = {c: [] for c in configs}
        given_up: set[tuple[str, str]] = set()
        for rnd in range(1, args.rounds + 1):
            for method, strategy in configs:
                if (method, strategy) in given_up:
                    continue
                for nproc, threads in ((1, args.threads), (2, half)):
                    name = f"{method}-{strategy}-{nproc}p-r{rnd}"
                    r = run_once(labs[method], name, nproc, strategy, threads)
                    runs[(method, strategy)].append(r)
                    shown = (
                        f"{r['tokens_per_s']:,.0f} tok/s, final loss {r['losses'][-1]:.4f}"
                        if r["status"] == "ok"
                        else f"{r['status']}: {r['error'][:200]}"
                    )
                    say(f"round {rnd} {name}: {shown} ({r['wall_s']:.0f} s wall)")
                    if r["status"] != "ok":
                        given_up.add((method, strategy))
                        break
        summary = [summarise(m, s, runs[(m, s)]) for m, s in configs]
        result = {
            "machine": {
                "cpus": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "python": sys.version.split()[0],
            },
            "threads": {"one_process": args.threads, "two_processes_each": half},
            "model": {"size": args.model_size} | model,
            "training": training | {"max_length": MAX_LENGTH},
            "rows": summary,
            "runs": {f"{m}-{s}": runs[(m, s)] for m, s in configs},
            "wall_s": round(time.perf_counter() - started, 1),
            "busy": was_busy or busy(args.threads),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(
                f"threads: 1 process × OMP_NUM_THREADS={args.threads}, 2 processes × "
                f"OMP_NUM_THREADS={half}; model {args.model_size} "
                f"({model['parameters'] / 1e6:.1f}M parameters); global batch {GLOBAL_BATCH}; "
                f"{args.steps} steps × {args.rounds} round(s); load average {load_before} "
                f"before, {result['machine']['load_average_after']} after; "
                f"{result['wall_s']:.0f} s in all"
            )
            if result["busy"]:
                print(
                    "WARNING: the machine was busy (load average above a quarter of "
                    f"{args.threads} cores at the start or the end): these timings are not a "
                    "measurement; the loss agreement still is"
                )
            print()
            print(table(summary, args.threads))
            print()
            print(
                "tok/s: median over the rounds of tokens/s after the first step (warm-up "
                "left out); loss diff: largest relative difference of the per-step losses, "
                "1 process against 2, same round."
            )
        failed = [r for r in summary if r["status"] == "failed"]
        return 1 if failed else 0
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
