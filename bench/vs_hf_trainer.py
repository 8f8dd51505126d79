"""tunelab against transformers' `Trainer` (+ PEFT): the same work, side by side, in one run.

BBC News (the demo's corpus) on all-MiniLM-L6-v2, on the CPU: LoRA and full fine-tuning, each
trained by the Trainer and by `tunelab run` (its Python API, `run_variant`) on byte-identical
data, in alternation (Trainer, tunelab, Trainer, tunelab, ...) so that both see the same
machine load. Every run is a fresh subprocess; nothing is downloaded.

The data. The corpus is read as tunelab's folder loader reads it (UTF-8, a BOM dropped; a file
that is not UTF-8 is left out, as tunelab quarantines it). Exact duplicates under tunelab's own
normalisation (`tunelab.data.dedup.normalise`) are thinned to the first copy in tunelab's
natural id order, and a text seen under two labels goes with every copy, before the split: so
no article is in both splits. The pool is split with scikit-learn (`train_test_split`,
stratified, `--seed`) into `--train` and `--validation` rows, written once to two JSONL files
that both tools read. tunelab gets them as a user's split (`split: train` / `split:
validation`, ids from the `id` field) with no cleaning rules and dedup reporting only, so it
keeps every row. The script stops, naming the difference, unless tunelab's data version holds
exactly the chosen ids and texts, the Trainer read the files with the written sha256 and the
chosen train ids, and both predicted exactly the chosen validation ids.

The settings. `equal` (the default): max length 256, batch 16 (no accumulation), one epoch,
fp32, AdamW (torch's fused `torch.optim.AdamW` on both: the Trainer's default, and tunelab's),
linear schedule, no warmup, weight decay 0, max grad norm 1.0, seed 0 (it also seeds the new
head); LoRA r 8, alpha 16, dropout 0.1 on query and value, the classifier in modules_to_save,
lr 5e-4; full fine-tuning lr 5e-5. `--defaults`: each tool's own defaults with the same
epochs, batch and learning rates: the Trainer's default `TrainingArguments` (but
`save_strategy="no"`: its default saves a checkpoint at the last step, inside `train()`) and
PEFT's default `LoraConfig(task_type=SEQ_CLS)`; tunelab's model, method, training and
evaluation sections of its classification template (`tunelab/templates/classification.yaml`),
the full run with `training.lr` 5e-5. The data section is the one above in both modes. The
settings each side actually ran with are printed under the tables.

The columns (each number from the run's own subprocess):
- train s: the training alone (no model load, tokenisation, evaluation or saving). tunelab:
  its run record's `training.seconds` (the loop, from after the optimizer is built to the
  last step); Trainer: the wall time of `trainer.train()`.
- tok/s: non-pad tokens trained on / train s. tunelab: the record's `training.tokens` (sums of
  the attention masks); Trainer: the sums of the attention masks of the batches its collator
  built during `trainer.train()`. The tokens column shows both counts.
- peak MiB: the process's peak resident set during training: VmHWM (/proc/self/status), reset
  through /proc/self/clear_refs when training starts and read when it ends (tunelab's own
  `training.peak_memory_mb`; the Trainer side does the same around `trainer.train()`).
  Δ MiB: that peak minus the resident set when training starts (what training adds on top of
  the loaded model and data).
- accuracy, macro-F1: on the same validation rows, from each tool's predicted labels, both by
  scikit-learn (`accuracy_score`, `f1_score(average="macro")` over every label).

The ratios: median tunelab / median Trainer. Speed (Trainer's median seconds / tunelab's) and
tok/s: > 1 means tunelab is faster. Memory: < 1 means tunelab uses less. Metrics: tunelab -
Trainer, in points.

    .venv/bin/python bench/vs_hf_trainer.py                    # equal settings, 2 repeats each
    .venv/bin/python bench/vs_hf_trainer.py --defaults         # each tool's defaults
    .venv/bin/python bench/vs_hf_trainer.py --mode both --json vs_hf_trainer.json
    .venv/bin/python bench/vs_hf_trainer.py --train 48 --validation 32 --repeats 1   # a smoke test

This file runs the benchmark and tunelab's side; the settings and the data both tools read are
in vs_hf_trainer_setup.py, the Trainer's side in vs_hf_trainer_peer.py, the numbers and tables
in vs_hf_trainer_report.py, the machine's description in machine.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import machine
from vs_hf_trainer_peer import trainer_run
from vs_hf_trainer_report import check_same_data, markdown, notes, ratios, summarise
from vs_hf_trainer_setup import (
    EQUAL,
    FULL,
    LR,
    OFFLINE,
    TOOLS,
    build_lab,
    choose_split,
    distinct,
    lab_spec,
    read_corpus,
    read_jsonl,
    template_sections,
    write_data,
)

# --- one run, in a fresh subprocess --------------------------------------------------------


def run_job(job: dict) -> dict:
    """Run one job in a fresh interpreter (this file's `_worker`); its result."""
    command = [sys.executable, str(Path(__file__).resolve()), "_worker", json.dumps(job)]
    proc = subprocess.run(command, capture_output=True, text=True, env=os.environ | OFFLINE)
    if proc.returncode or not Path(job["result"]).exists():
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise SystemExit(f"{job['tool']} {job['mode']} {job['method']} failed:\n{tail}")
    return json.loads(Path(job["result"]).read_text())


def worker(job: dict) -> None:
    import torch

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    result = trainer_run(job) if job["tool"] == "trainer" else tunelab_run(job)
    result["torch_threads"] = torch.get_num_threads()
    Path(job["result"]).write_text(json.dumps(result))


def tunelab_run(job: dict) -> dict:
    """`tunelab run` through its Python API. The one addition: the resident set when training
    starts, read by wrapping the loop's `start_peak` (the call that resets the peak)."""
    import tunelab.training.loop as loop
    from tunelab.core.lab import open_lab
    from tunelab.stages.run.variant import run_variant
    from tunelab.training.memory import rss_mb

    at_start: dict = {}
    reset = loop.start_peak

    def start_peak(device):
        at_start["rss_mb"] = rss_mb()
        return reset(device)

    loop.start_peak = start_peak
    lab = open_lab(Path(job["lab"]), FULL if job["method"] == "full" else {}, device="cpu")
    record = run_variant(lab, f"{job['method']}-{job['repeat']}", None)
    training = record["training"]
    run_dir = lab.store.run_dir(record["id"])
    predictions = read_jsonl(str(run_dir / "predictions.jsonl"))
    return {
        "seconds": training["seconds"],
        "tokens": training["tokens"],
        "steps": training["steps"],
        "peak_mb": training["peak_memory_mb"],
        "peak_source": training["peak_memory_source"],
        "rss_start_mb": at_start["rss_mb"],
        "final_loss": training["final_loss"],
        "predictions": [{k: p[k] for k in ("id", "gold", "predicted")} for p in predictions],
        "data_version": record["data_version"],
        "run": record["id"],
        "own_metrics": {k: record["metrics"][k] for k in ("accuracy", "macro_f1")},
        "rejected_train": len(record.get("rejected_train") or []),
        "settings": tunelab_settings(lab.spec, record["trainable"]),
    }


def tunelab_settings(spec, trainable: dict) -> dict:
    """What tunelab ran with: its spec, and the modules the run adapted (a LoRA spec may leave
    its targets to tunelab's default)."""
    t, m = spec.training, spec.method
    settings = {
        "lr": t.lr,
        "optimizer": "AdamW (torch, fused)",  # tunelab.training.step.make_optimizer
        "schedule": t.schedule,
        "warmup": t.warmup_steps,
        "weight_decay": t.weight_decay,
        "max_grad_norm": t.max_grad_norm,
        "batch": f"{t.microbatch} x {t.accumulation}",
        "seed": t.seed,
        "eval_batch": spec.evaluation.batch_size,
        "head": getattr(m, "head_init", "new"),
        "trainable": f"{trainable['trainable_params']:,}",
    }
    if m.type == "lora":
        adapted = trainable.get("adapted_modules") or []
        targets = m.target_modules or sorted({n.rsplit(".", 1)[-1] for n in adapted})
        saved = sorted(set(trainable.get("modules_to_save") or m.modules_to_save or []))
        settings["lora"] = f"r {m.r}, alpha {m.alpha:g}, dropout {m.dropout}, "
        settings["lora"] += f"{'/'.join(targets)}, saved {saved}"
    other = {f"training.{k}": v for k, v in t.model_dump().items() if k not in KNOWN["training"]}
    other |= {
        f"model.{k}": v for k, v in spec.model.model_dump().items() if k not in KNOWN["model"]
    }
    settings["other"] = ", ".join(f"{k} {v}" for k, v in other.items())
    return settings


KNOWN = {
    "training": {*EQUAL["training"], "decay_fraction", "checkpoint_every", "strategy"},
    "model": {"path", "revision", "dtype", "max_length", "trust_remote_code", "kind", "template"},
}
KNOWN["model"] |= {"truncation", "loss_on_prompt", "init", "arch", "tokenizer", "bpe"}
"""Spec fields the settings table has a column for, or that cannot change a CPU run of one
process on a pretrained base (the scratch model's fields); any other (a speed lever added
later) is listed under `other`, with its value."""


# --- the benchmark -------------------------------------------------------------------------


def modes(args) -> list[str]:
    return {"equal": ["equal"], "defaults": ["defaults"], "both": ["equal", "defaults"]}[args.mode]


def prepare(args, work: Path) -> dict:
    """The chosen rows, their two files, and one lab per mode, checked to hold exactly them."""
    from tunelab.demo.assets import bbc_news, minilm

    rows, not_utf8 = read_corpus(bbc_news())
    pool, dropped = distinct(rows)
    splits = choose_split(pool, args.train, args.validation, args.seed)
    files = write_data(splits, work / "data")
    sections = {"equal": lambda: EQUAL, "defaults": template_sections}
    labs = {}
    for mode in modes(args):
        spec = lab_spec(files, minilm(), sections[mode]())
        path = work / f"lab-{mode}"
        labs[mode] = {"path": str(path), "version": build_lab(path, spec, splits)}
    return {
        "pool": len(pool),
        "dropped": {"not UTF-8": not_utf8, **dropped},
        "splits": splits,
        "files": files,
        "labs": labs,
        "labels": sorted({r["label"] for r in splits["train"]}),
        "model": str(minilm()),
    }


def schedule(args) -> list[tuple[str, str, int, str]]:
    """(mode, method, repeat, tool) in the order they run: Trainer, tunelab, Trainer, ..."""
    return [
        (mode, method, repeat, tool)
        for mode in modes(args)
        for method in args.methods
        for repeat in range(1, args.repeats + 1)
        for tool in TOOLS
    ]


def job_for(args, work: Path, prepared: dict, mode: str, method: str, repeat: int, tool: str):
    name = f"{mode}-{method}-{repeat}"
    result = work / "results" / f"{name}-{tool}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    return {
        "tool": tool,
        "mode": mode,
        "method": method,
        "repeat": repeat,
        "threads": args.threads,
        "lab": prepared["labs"][mode]["path"],
        "model": prepared["model"],
        "files": prepared["files"],
        "output_dir": str(work / "trainer" / name),
        "result": str(result),
    }


def bench(args) -> dict:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="vs_hf_trainer-")).resolve()
    print(f"working in {work}", file=sys.stderr)
    info = machine()
    prepared = prepare(args, work)
    rows = []
    for mode, method, repeat, tool in schedule(args):
        print(f"{mode} {method} #{repeat}: {tool} …", file=sys.stderr, end=" ", flush=True)
        result = run_job(job_for(args, work, prepared, mode, method, repeat, tool))
        check_same_data(result, tool, prepared, mode)
        row = {"mode": mode, "method": method, "tool": tool, "repeat": repeat}
        row |= summarise(result, prepared["labels"])
        print(f"{row['train_s']:.1f} s, macro-F1 {100 * row['macro_f1']:.1f}", file=sys.stderr)
        raw = {k: v for k, v in result.items() if k not in ("predictions", "train_ids")}
        rows.append(row | {"raw": raw})
    command = [".venv/bin/python", "bench/vs_hf_trainer.py", *sys.argv[1:]]
    return {
        "command": " ".join(shlex.quote(a) for a in command),
        "machine": info,
        "load_after": os.getloadavg()[0],
        "data": {
            "train": len(prepared["splits"]["train"]),
            "validation": len(prepared["splits"]["validation"]),
            "seed": args.seed,
            "pool": prepared["pool"],
            "dropped": prepared["dropped"],
            "files": prepared["files"],
            "labs": prepared["labs"],
        },
        "workdir": str(work),
        "runs": rows,
        "ratios": ratios(rows),
        "notes": notes(rows, args.train),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=int, default=800, help="train rows (default 800)")
    p.add_argument("--validation", type=int, default=300, help="validation rows (default 300)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stratified split (0)")
    p.add_argument("--repeats", type=int, default=2, help="runs per tool and method (2)")
    p.add_argument("--methods", default="lora,full", help="lora,full (the default), or one")
    p.add_argument("--mode", choices=["equal", "defaults", "both"], default="equal")
    p.add_argument("--defaults", dest="mode", action="store_const", const="defaults")
    p.add_argument("--threads", type=int, help="torch threads in every run (torch's default)")
    p.add_argument("--workdir", help="for the data, labs and results (default: a new temp dir)")
    p.add_argument("--json", type=Path, help="also write the whole result here")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if not args.methods or set(args.methods) - set(LR):
        p.error(f"--methods: a comma-separated list of {sorted(LR)}")
    return args


def main(argv: list[str]) -> None:
    if argv[:1] == ["_worker"]:
        worker(json.loads(argv[1]))
        return
    args = parse(argv)
    result = bench(args)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
