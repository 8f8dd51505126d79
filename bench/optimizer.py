"""AdamW's step on a CPU: torch's default loop, `foreach` and the fused kernel, side by side.

tunelab's training step (`tunelab.training.step.make_optimizer`) uses the fused kernel wherever
every trainable tensor is a floating CPU or CUDA tensor, as transformers' Trainer does by default
(`adamw_torch_fused`). This measures what that is worth on the demo's encoder: all 22.7M
parameters of all-MiniLM-L6-v2 (full fine-tuning's trainable set) with a gradient, each
implementation's `optimizer.step()` timed over `--steps` steps, the three in turn `--repeats`
times in one process (so they see the same machine load), the median reported. The final
weights of the three are compared too: they must agree to rounding.

    .venv/bin/python bench/optimizer.py                    # ~1 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

KINDS = {"loop (default)": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def parameters(seed: int = 0) -> list[torch.nn.Parameter]:
    from transformers import AutoModel

    from tunelab.demo.assets import minilm

    torch.manual_seed(seed)
    params = list(AutoModel.from_pretrained(minilm()).parameters())
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    return params


def timed(params: list[torch.nn.Parameter], options: dict, steps: int) -> tuple[float, list]:
    """Seconds per step over `steps` steps (after one untimed), and the weights after them."""
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for c, p in zip(copies, params, strict=True):
        c.grad = p.grad
    optimizer = torch.optim.AdamW(copies, lr=1e-4, weight_decay=0.01, **options)
    optimizer.step()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) / steps, [c.detach() for c in copies]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    params = parameters()
    seconds: dict[str, list[float]] = {k: [] for k in KINDS}
    weights = {}
    for _ in range(args.repeats):
        for kind, options in KINDS.items():
            s, weights[kind] = timed(params, options, args.steps)
            seconds[kind].append(s)
    loop = statistics.median(seconds["loop (default)"])
    rows = []
    for kind in KINDS:
        ms = 1000 * statistics.median(seconds[kind])
        diff = max(
            float((a - b).abs().max())
            for a, b in zip(weights[kind], weights["loop (default)"], strict=True)
        )
        rows.append(
            {
                "kind": kind,
                "ms_per_step": round(ms, 1),
                "speedup": round(loop * 1000 / ms, 2),
                "max_weight_diff": diff,
            }
        )
    n = sum(p.numel() for p in params)
    print(
        f"AdamW on {n:,} parameters, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print("| implementation | ms / step | vs the loop | largest weight difference |")
    print("|---|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['kind']} | {r['ms_per_step']} | {r['speedup']}x | {r['max_weight_diff']:.1e} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"parameters": n, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
