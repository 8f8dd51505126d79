"""The Python half of bench/gpu_check.sh: build its model and labs, and print its one table.

    python bench/gpu_table.py prepare --config 1b --out DIR [--seq-len 2048] [--microbatch 2]
        [--global-batch 8] [--steps 20] [--rows 48]
    python bench/gpu_table.py table --results DIR [--json]

`prepare` builds a Llama-style causal LM with random weights from its config (`CONFIGS`) in
DIR/model (the test suite's byte-level BPE tokenizer; the model's vocabulary is the config's,
so the output layer costs what a real one does), synthetic man-page documents of about
`--seq-len` tokens, and two generative labs laid out like the tests' extraction lab, DIR/lab-lora
and DIR/lab-full (bf16 autocast over float32 weights, AdamW, constant learning rate). It writes
DIR/model.json (the config and the parameter count).

`table` reads what gpu_check.sh left in the results folder: gpus.csv (`nvidia-smi
--query-gpu=name,memory.total --format=csv,noheader`), model.json, size-METHOD.json,
check-METHOD.json and run-NPROC-STRATEGY-METHOD.json (each a command's
`--json` output; a command that failed leaves its error there, and its stderr in the .log beside
it; STRATEGY is `single` or `largest` for one process: microbatch 2, or the largest microbatch
`size` found), and prints one markdown table, a row per run:

- tokens/s: non-pad tokens over the steps after the warm-up (the first step, and the second
  too when there are more than 4), summed over the ranks; per rank = total / processes.
- MFU: FLOPs per token × tokens/s per rank / the GPU's peak dense bf16 FLOP/s (`PEAK_TFLOPS`,
  by the name nvidia-smi gives; "unknown" for a GPU not in it). FLOPs per token: 6 per
  trainable weight (forward 2, backward 4) and 4 per frozen one (forward 2, the gradient of
  the input 2, none for the weight): so 6·N for full fine-tuning and about 4·N for a LoRA, N
  the parameters less the input embedding (a lookup). Attention's own FLOPs (12 × layers ×
  hidden × sequence per token) are left out, as in the usual 6·N count; the note under the
  table says how much they would add.
- peak memory: rank 0's `torch.cuda.max_memory_allocated` during training (the run record's
  `training.peak_memory_mb`; the other ranks are not recorded).
- estimate: `tunelab size`'s estimate of one process's peak at the same sequence length,
  microbatch and accumulation (at microbatch 2 its variant that accumulates as the run does,
  which holds the gradients between microbatches; at the largest microbatch, the estimate size
  gives with it: `largest_microbatch.estimated_mb`). It models one process: for
  ddp a replica (plus DDP's gradient buckets), for fsdp the unsharded figure, marked so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distributed import one_line
from tiny_llama_labs import build_llama, page_rows, write_lab

GIB = 1024.0
CONFIGS = {
    # name: hidden, intermediate, layers, attention heads, key/value heads, vocabulary
    "1b": {"hidden": 2048, "intermediate": 8192, "layers": 16, "heads": 32, "kv_heads": 8},
    "quick": {"hidden": 256, "intermediate": 688, "layers": 4, "heads": 4, "kv_heads": 2},
}
VOCAB = 32000
PEAK_TFLOPS = [
    # (pattern in nvidia-smi's name, dense bf16 TFLOP/s without sparsity, from NVIDIA's
    # datasheets); the first match wins, so the more specific names come first
    (r"GH200", 989.4),
    (r"H200 NVL", 835.5),
    (r"H200", 989.4),
    (r"H100 NVL", 835.5),
    (r"H100 PCIe", 756.5),
    (r"H100", 989.4),  # SXM ("H100 80GB HBM3")
    (r"H800", 989.4),
    (r"B200", 2250.0),
    (r"A100", 312.0),
    (r"A800", 312.0),
    (r"A30\b", 165.0),
    (r"A10\b", 125.0),  # not the A10G, whose figure NVIDIA does not publish
    (r"L40S", 362.1),
    (r"L40\b", 181.0),
    (r"L4\b", 121.0),
]
METHODS = {
    "lora": {
        "type": "lora",
        "r": 16,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "full": {"type": "full"},
}


# --- prepare --------------------------------------------------------------------------------------


def prepare(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    c = CONFIGS[args.config]
    model = build_llama(
        out / "model",
        c["hidden"],
        c["intermediate"],
        c["layers"],
        c["heads"],
        c["kv_heads"],
        vocab=VOCAB,
        max_positions=max(4096, args.seq_len + 64),
        device="cuda" if _cuda() else "cpu",
    )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model["path"])
    rows = page_rows(args.rows, args.seq_len + 64, tokenizer)  # cut to seq_len by the renderer
    training = {
        "lr": 1e-4,
        "global_batch": args.global_batch,
        "microbatch": args.microbatch,
        "budget": {"steps": args.steps},
        "seed": 0,
        "schedule": "constant",
        "precision": "bf16",
    }
    n = len(rows)
    split = {"train": (n - 8) / n, "validation": 4 / n, "test": 4 / n, "seed": 0}
    for method, spec in METHODS.items():
        write_lab(
            out / f"lab-{method}",
            Path(model["path"]),
            rows,
            spec,
            training,
            args.seq_len,
            evaluation={"batch_size": 4, "max_new_tokens": 4},
            split=split,
        )
    info = {"config": args.config, "seq_len": args.seq_len} | model | {"training": training}
    (out / "model.json").write_text(json.dumps(info, indent=2))
    return info


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# --- table ----------------------------------------------------------------------------------------


def peak_tflops(gpu_name: str) -> float | None:
    for pattern, tflops in PEAK_TFLOPS:
        if re.search(pattern, gpu_name):
            return tflops
    return None


def steady(history: list[dict]) -> float | None:
    """Tokens/s after the warm-up steps (1, or 2 when there are more than 4 steps)."""
    skip = 2 if len(history) > 4 else 1
    if len(history) <= skip:
        return None
    a, b = history[skip - 1], history[-1]
    seconds = b["seconds"] - a["seconds"]
    return (b["tokens"] - a["tokens"]) / seconds if seconds > 0 else None


def flops_per_token(record: dict, model: dict) -> tuple[float, str]:
    """6 per trainable weight, 4 per frozen one, the input embedding left out."""
    t = record["trainable"]
    embedding = model["vocab"] * model["hidden"]
    full = t["method"] == "full"
    trainable = t["trainable_params"] - (embedding if full else 0)
    frozen = t["total_params"] - t["trainable_params"] - (0 if full else embedding)
    how = "6·N" if full else "≈4·N (frozen) + 6·N_lora"
    return 6.0 * trainable + 4.0 * frozen, how


def read_json(path: Path) -> dict | None:
    if not path.exists():
        return None
    text = path.read_text().strip()
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        for line in text.splitlines():  # several ranks' one-line errors
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
    return None


def outcome(data: dict | None, error: str) -> str:
    """How a command that gave no result ended: its input refused (tunelab's exit 2, which
    torchrun reports as its own 1) because of the strategy ("not available": a strategy this
    tunelab does not take yet), refused for another reason, or failed."""
    if data and "error" in data and data.get("internal") is False:
        return "not available" if "strategy" in error else "refused"
    return "failed"


def why_not(path: Path, data: dict | None) -> str:
    """The error a failed command left: its JSON error, else its log's last line."""
    if data and data.get("error"):
        return one_line(str(data["error"]))
    log = path.with_suffix(".log")
    lines = [x for x in log.read_text().splitlines() if x.strip()] if log.exists() else []
    return one_line(lines[-1]) if lines else "no output"


def rows_of(results: Path) -> tuple[list[dict], list[str]]:
    model = json.loads((results / "model.json").read_text())
    gpus = [g.strip() for g in (results / "gpus.csv").read_text().splitlines() if g.strip()]
    gpu_name = gpus[0].split(",")[0].strip() if gpus else "?"
    peak = peak_tflops(gpu_name)
    notes = [
        f"GPU: {len(gpus)} × {gpus[0] if gpus else '?'}; peak dense bf16 "
        + (f"{peak:g} TFLOP/s (datasheet)" if peak else "unknown (not in PEAK_TFLOPS)")
    ]
    sizes = {m: read_json(results / f"size-{m}.json") for m in METHODS}
    estimates = {}  # (method, microbatch, accumulation per rank) -> MiB
    for method, s in sizes.items():
        if s and "estimate" in s:
            estimates[(method, s["microbatch"], 1)] = s["estimate"]["peak_mb"]
            for v in s.get("variants") or []:  # accumulating keeps the gradients: more
                if not v["checkpointing"] and v.get("estimated_peak_mb"):
                    key = (method, v["microbatch"], v["accumulation"])
                    estimates[key] = v["estimated_peak_mb"]
            big = s.get("largest_microbatch") or {}
            if big.get("estimated_mb"):
                estimates[(method, big["value"], 1)] = big["estimated_mb"]
    for method in METHODS:
        check_path = results / f"check-{method}.json"
        check = read_json(check_path)
        if check is None or "passed" not in check:
            notes.append(f"check {method}: did not run ({why_not(check_path, check)})")
        else:
            failed = ", ".join(check.get("failed") or []) or "none"
            notes.append(
                f"check {method}: {'passed' if check['passed'] else 'FAILED'} "
                f"(failed items: {failed})"
            )
        s = sizes[method]
        if s is None or "estimate" not in s:
            notes.append(
                f"size {method}: no estimate ({why_not(results / f'size-{method}.json', s)})"
            )
        else:
            notes.append(
                f"size {method}: estimate {s['estimate']['peak_mb'] / GIB:.1f} GiB, measured "
                f"{s['measured_peak_mb'] / GIB:.1f} GiB (1 process, microbatch "
                f"{s['microbatch']}, {s['seq_len']['value']} tokens); largest microbatch "
                f"{s.get('largest_microbatch', {}).get('value', '?')}"
            )
    rows: list[dict] = []
    for path in sorted(results.glob("run-*-*-*.json"), key=_run_order):
        _, nproc, strategy, method = path.stem.split("-", 3)
        row = {
            "config": model["config"],
            "processes": int(nproc),
            "method": method,
            "strategy": strategy if int(nproc) > 1 else "—",
            "largest": strategy == "largest",
        }
        record = read_json(path)
        if record is None or "training" not in record:
            error = why_not(path, record)
            rows.append(row | {"status": outcome(record, error), "error": error})
            continue
        t = record["training"]
        total = steady(t["history"]) or t["tokens_per_s"]
        per_rank = total / int(nproc)
        fpt, how = flops_per_token(record, model)
        mfu = fpt * per_rank / (peak * 1e12) if peak else None
        estimate = estimates.get((method, t["microbatch"], t["accumulation"]))
        rows.append(
            row
            | {
                "microbatch": t["microbatch"],
                "tokens_per_s": total,
                "tokens_per_s_per_rank": per_rank,
                "mfu": mfu,
                "flops": how,
                "peak_gib_rank0": t["peak_memory_mb"] / GIB,
                "estimate_gib": None if estimate is None else estimate / GIB,
                "estimate_unsharded": strategy == "fsdp" and int(nproc) > 1,
                "steps": t["steps"],
                "tokens": t["tokens"],
                "run": record["id"],
            }
        )
    layers, hidden, seq = model["layers"], model["hidden"], model["seq_len"]
    n = model["parameters"] - model["vocab"] * hidden
    attention = 12 * layers * hidden * seq  # FLOPs per token, forward and backward
    notes.append(
        f"MFU counts 6·N FLOPs per token for full fine-tuning and ≈4·N for LoRA (frozen weights: "
        f"no weight gradient), N = {_count(n)} parameters less the input embedding; "
        f"attention's 12·layers·hidden·seq = {_count(attention)} FLOPs per token "
        f"(+{100 * attention / (6 * n):.0f}% of 6·N) is left out."
    )
    return rows, notes


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%" if x >= 0.01 else f"{100 * x:.2g}%"


def _count(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"  # B: 10^9


def _run_order(path: Path) -> tuple:
    _, nproc, strategy, method = path.stem.split("-", 3)
    rank = list(METHODS).index(method) if method in METHODS else 9
    return (rank, int(nproc), strategy != "single", strategy)


HEADER = (
    "| config | processes | strategy | method | microbatch | tokens/s total | tokens/s per rank "
    "| MFU | peak memory per rank (GiB, rank 0) | estimate (GiB, from size) |"
)


def markdown(rows: list[dict]) -> str:
    lines = [HEADER, "|" + "---|" * 10]
    for r in rows:
        head = f"| {r['config']} | {r['processes']} | {r['strategy']} | {r['method']} "
        if "error" in r:
            why = r["error"]  # one line already (why_not)
            mb = "largest" if r["largest"] else ""
            lines.append(head + f"| {mb} | {r['status']}: {why} | | | | |")
            continue
        mfu = "unknown" if r["mfu"] is None else _percent(r["mfu"])
        est = "—" if r["estimate_gib"] is None else f"{r['estimate_gib']:.1f}"
        if r["estimate_unsharded"] and r["estimate_gib"] is not None:
            est += " (unsharded)"
        mb = f"{r['microbatch']}" + (" (largest)" if r["largest"] else "")
        lines.append(
            head + f"| {mb} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s_per_rank']:,.0f} | {mfu} "
            f"| {r['peak_gib_rank0']:.1f} | {est} |"
        )
    return "\n".join(lines)


def table(args: argparse.Namespace) -> None:
    results = Path(args.results)
    rows, notes = rows_of(results)
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}, indent=2))
        return
    print(markdown(rows))
    print()
    for note in notes:
        print(f"- {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="build the model and the two labs")
    p.add_argument("--config", choices=sorted(CONFIGS), default="1b")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--microbatch", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rows", type=int, default=48)
    t = sub.add_parser("table", help="print the table from a results folder")
    t.add_argument("--results", type=Path, required=True)
    t.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "prepare":
        print(json.dumps(prepare(args)))
    else:
        table(args)


if __name__ == "__main__":
    main()
