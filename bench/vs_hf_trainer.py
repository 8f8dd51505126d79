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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from importlib import resources
from importlib.metadata import version
from pathlib import Path

OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TUNELAB_DEVICE": "cpu",
}
os.environ.update(OFFLINE)

TOOLS = ("trainer", "tunelab")
LR = {"lora": 5e-4, "full": 5e-5}
EQUAL_LORA = {
    "type": "lora",
    "r": 8,
    "alpha": 16,
    "dropout": 0.1,
    "target_modules": ["query", "value"],
    "modules_to_save": ["classifier"],
}
EQUAL = {
    "model": {"dtype": "float32", "max_length": 256},
    "method": EQUAL_LORA,
    "training": {
        "optimizer": "adamw",
        "lr": LR["lora"],
        "weight_decay": 0.0,
        "schedule": "linear",
        "warmup_steps": 0,
        "global_batch": 16,
        "microbatch": 16,
        "budget": {"epochs": 1},
        "seed": 0,
        "max_grad_norm": 1.0,
        "precision": "fp32",
    },
    "evaluation": {"batch_size": 64},
}
FULL = {"method": {"type": "full"}, "training.lr": LR["full"]}
"""A full run's overrides of the lab's LoRA spec (as in the demo)."""
MAX_LENGTH = EQUAL["model"]["max_length"]
BATCH = EQUAL["training"]["global_batch"]


# --- the data ------------------------------------------------------------------------------


def read_corpus(folder: Path) -> tuple[list[dict], int]:
    """Every article as tunelab's folder loader reads it (one sub-folder per label, sorted),
    and how many files are not UTF-8 (tunelab quarantines those as `bad_encoding`)."""
    rows, not_utf8 = [], 0
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder)
        if len(rel.parts) < 2 or any(part.startswith(".") for part in rel.parts):
            continue
        try:
            text = file.read_bytes().decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            not_utf8 += 1
            continue
        rows.append({"id": rel.as_posix(), "text": text, "label": rel.parts[0]})
    return rows, not_utf8


def distinct(rows: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """The rows without empty texts, without exact duplicates (tunelab's normalisation; the
    first by natural id order stays) and without texts under two labels (every copy goes)."""
    from tunelab.data.dedup import normalise
    from tunelab.data.loaders import Example

    groups: dict[str, list[dict]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: Example.sort_key_of(r["id"])):
        if row["text"].strip():
            groups[normalise(row["text"])].append(row)
    agreed = [g for g in groups.values() if len({r["label"] for r in g}) == 1]
    dropped = {
        "empty": sum(1 for r in rows if not r["text"].strip()),
        "duplicates": sum(len(g) - 1 for g in agreed),
        "label conflicts": sum(len(g) for g in groups.values()) - sum(len(g) for g in agreed),
    }
    return [g[0] for g in agreed], dropped


def choose_split(pool: list[dict], n_train: int, n_val: int, seed: int) -> dict[str, list]:
    """A stratified split of `n_train` and `n_val` rows (scikit-learn, seeded), in id order."""
    from sklearn.model_selection import train_test_split

    train, validation = train_test_split(
        pool,
        train_size=n_train,
        test_size=n_val,
        stratify=[r["label"] for r in pool],
        random_state=seed,
    )
    by_id = lambda r: r["id"]  # noqa: E731
    return {"train": sorted(train, key=by_id), "validation": sorted(validation, key=by_id)}


def write_data(splits: dict[str, list[dict]], folder: Path) -> dict[str, dict]:
    """One JSONL file per split; each file's path and sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, rows in splits.items():
        path = folder / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
        files[split] = {"path": str(path), "sha256": sha256(path)}
    return files


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- the tunelab labs ----------------------------------------------------------------------


def lab_spec(files: dict[str, dict], model: Path, sections: dict) -> dict:
    """A lab over the two files as a user's split that keeps every row (no cleaning, dedup
    reporting only); `sections` holds the model settings, method, training and evaluation."""
    return {
        "compass": {"kind": "benchmark", "why": "bench/vs_hf_trainer.py: tunelab and Trainer"},
        "hypothesis": {
            "behaviour": "Fine-tuning MiniLM sorts BBC News articles into their desks.",
            "metric": "macro_f1",
            "min_effect": 0.01,
        },
        "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}],
        "task": {"type": "classification"},
        "data": {
            "sources": [
                {"type": "jsonl", "path": files[s]["path"], "split": s}
                for s in ("train", "validation")
            ],
            "fields": {"text": "text", "label": "label", "id": "id"},
            "cleaning": [],
            "dedup": {"exact": True, "near": False, "policy": "report", "conflicts": "report"},
            "allow_outside_lab": True,
        },
        "model": {**sections["model"], "path": str(model)},
        **{k: sections[k] for k in ("method", "training", "evaluation")},
    }


def template_sections() -> dict:
    """tunelab's defaults: its classification template's model settings (not the path),
    method, training and evaluation."""
    import yaml

    text = resources.files("tunelab").joinpath("templates/classification.yaml").read_text()
    template = yaml.safe_load(text)
    model = {k: v for k, v in template["model"].items() if k != "path"}
    return {"model": model, **{k: template[k] for k in ("method", "training", "evaluation")}}


def build_lab(lab: Path, spec: dict, splits: dict[str, list[dict]]) -> str:
    """Write the spec, build the data version, check that it holds exactly the chosen rows
    (ids, texts, labels); its version id."""
    import yaml

    from tunelab.core.lab import open_records_lab
    from tunelab.data import build_data

    lab.mkdir(parents=True, exist_ok=True)
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    handle = open_records_lab(lab)
    report = build_data(handle.spec, handle.path, handle.store)
    for split, rows in splits.items():
        want = {r["id"]: (r["text"], r["label"]) for r in rows}
        got = {
            r["id"]: (r["text"], r["label"])
            for r in handle.store.read_split(report["version"], split)
        }
        if got != want:
            lost, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
            raise SystemExit(
                f"tunelab's {split} split in {lab} is not the chosen rows: missing {lost[:5]} "
                f"({len(lost)}), extra {extra[:5]} ({len(extra)}), changed {changed[:5]} "
                f"({len(changed)}); quarantine {report['quarantine']}"
            )
    return report["version"]


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


def trainer_run(job: dict) -> dict:
    """The same run with transformers' Trainer (+ PEFT), written the way its users write it."""
    import torch
    from transformers import DataCollatorWithPadding, Trainer

    from tunelab.training.memory import peak_rss_mb, reset_peak, rss_mb

    tokenizer, data, labels = trainer_data(job)
    args = training_arguments(job)
    torch.manual_seed(args.seed)  # the new head's weights and LoRA's A come from the seed
    model = trainer_model(job, labels)
    collator = CountingCollator(DataCollatorWithPadding(tokenizer))
    trainer = Trainer(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=data["train"],
        processing_class=tokenizer,
    )
    rss_start = rss_mb()
    peak_source = "VmHWM since trainer.train() started" if reset_peak() else "ru_maxrss"
    started = time.perf_counter()
    output = trainer.train()
    seconds = time.perf_counter() - started
    peak, tokens = peak_rss_mb(), collator.tokens
    collator.counting = False
    predicted = trainer.predict(data["validation"]).predictions.argmax(axis=-1).tolist()
    return {
        "seconds": round(seconds, 2),
        "tokens": tokens,
        "steps": output.global_step,
        "peak_mb": round(peak, 1),
        "peak_source": peak_source,
        "rss_start_mb": rss_start,
        "final_loss": output.training_loss,
        "train_runtime": output.metrics.get("train_runtime"),
        "predictions": [
            {"id": r["id"], "gold": r["label"], "predicted": labels[i]}
            for r, i in zip(data["validation_rows"], predicted, strict=True)
        ],
        "files_sha256": data["sha256"],
        "train_ids": [r["id"] for r in data["train_rows"]],
        "settings": trainer_settings(trainer, model),
    }


class CountingCollator:
    """Pads as the wrapped collator does and counts the non-pad tokens of its batches."""

    def __init__(self, inner):
        self.inner, self.tokens, self.counting = inner, 0, True

    def __call__(self, features):
        batch = self.inner(features)
        if self.counting:
            self.tokens += int(batch["attention_mask"].sum())
        return batch


def trainer_data(job: dict):
    """The tokenizer, the two files tokenised (truncated to the max length; each batch is
    padded by the collator to its longest row) with their rows and sha256, the labels."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    splits = ("train", "validation")
    rows = {s: read_jsonl(job["files"][s]["path"]) for s in splits}
    labels = sorted({r["label"] for r in rows["train"]})  # tunelab's order: sorted
    index = {label: i for i, label in enumerate(labels)}

    def tokenised(split: str) -> Dataset:
        texts = [r["text"] for r in rows[split]]
        encoded = dict(tokenizer(texts, truncation=True, max_length=MAX_LENGTH))
        return Dataset.from_dict(encoded | {"labels": [index[r["label"]] for r in rows[split]]})

    data = {s: tokenised(s) for s in splits} | {f"{s}_rows": rows[s] for s in splits}
    data["sha256"] = {s: sha256(job["files"][s]["path"]) for s in splits}
    return tokenizer, data, labels


def training_arguments(job: dict):
    from transformers import TrainingArguments

    common = {
        "output_dir": job["output_dir"],
        "num_train_epochs": 1,
        "per_device_train_batch_size": BATCH,
        "learning_rate": LR[job["method"]],
        "use_cpu": True,
        "save_strategy": "no",  # the default saves a checkpoint inside train(): not training
    }
    if job["mode"] == "defaults":
        return TrainingArguments(**common)
    return TrainingArguments(
        **common,
        lr_scheduler_type="linear",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch_fused",  # torch.optim.AdamW(fused=True), as tunelab's
        seed=EQUAL["training"]["seed"],
        per_device_eval_batch_size=EQUAL["evaluation"]["batch_size"],
        dataloader_num_workers=0,  # the collator counts tokens in this process
        disable_tqdm=True,  # tunelab's API call shows no progress bar
    )


def trainer_model(job: dict, labels: list[str]):
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(
        job["model"],
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        dtype=torch.float32,
        use_safetensors=True,
    )
    if job["method"] == "full":
        return model
    if job["mode"] == "defaults":
        return get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS))
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=EQUAL_LORA["r"],
        lora_alpha=EQUAL_LORA["alpha"],
        lora_dropout=EQUAL_LORA["dropout"],
        target_modules=EQUAL_LORA["target_modules"],
        modules_to_save=EQUAL_LORA["modules_to_save"],
    )
    return get_peft_model(model, config)


def trainer_settings(trainer, model) -> dict:
    """What the Trainer ran with, read back from its arguments, optimizer and PEFT config."""
    args = trainer.args
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    package = type(optimizer).__module__.split(".")[0]
    fused = ", fused" if optimizer.defaults.get("fused") else ""
    settings = {
        "lr": args.learning_rate,
        "optimizer": f"{type(optimizer).__name__} ({package}{fused})",
        "schedule": getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type),
        "warmup": args.warmup_steps,
        "weight_decay": args.weight_decay,
        "max_grad_norm": args.max_grad_norm,
        "batch": f"{args.per_device_train_batch_size} x {args.gradient_accumulation_steps}",
        "seed": args.seed,
        "eval_batch": args.per_device_eval_batch_size,
        "head": "new",
        "trainable": f"{sum(p.numel() for p in model.parameters() if p.requires_grad):,}",
    }
    config = getattr(model, "peft_config", {}).get("default")
    if config is not None:
        targets = "/".join(sorted(config.target_modules))
        saved = sorted(set(config.modules_to_save or []))  # PEFT lists its defaults too
        settings["lora"] = f"r {config.r}, alpha {config.lora_alpha:g}, dropout "
        settings["lora"] += f"{config.lora_dropout}, {targets}, saved {saved}"
    return settings


# --- checks and numbers --------------------------------------------------------------------


def check_same_data(result: dict, tool: str, prepared: dict, mode: str) -> None:
    """The run trained on the chosen train rows and predicted the chosen validation rows."""
    splits, problems = prepared["splits"], []
    if sorted(p["id"] for p in result["predictions"]) != [r["id"] for r in splits["validation"]]:
        problems.append("its predictions are not of the chosen validation rows")
    if tool == "trainer":
        if sorted(result["train_ids"]) != [r["id"] for r in splits["train"]]:
            problems.append("it read other train rows")
        if result["files_sha256"] != {s: f["sha256"] for s, f in prepared["files"].items()}:
            problems.append("the files it read are not the ones written")
    else:
        if result["data_version"] != prepared["labs"][mode]["version"]:
            problems.append(f"it trained on another data version ({result['data_version']})")
        if result["rejected_train"]:
            problems.append(f"{result['rejected_train']} train rows could not be rendered")
    if problems:
        raise SystemExit(f"{tool} ({mode}): not the same data: " + "; ".join(problems))


def metrics(predictions: list[dict], labels: list[str]) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    gold = [p["gold"] for p in predictions]
    pred = [p["predicted"] for p in predictions]
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0)),
    }


def summarise(result: dict, labels: list[str]) -> dict:
    return {
        "train_s": result["seconds"],
        "tokens": result["tokens"],
        "tok_s": result["tokens"] / result["seconds"],
        "peak_mb": result["peak_mb"],
        "delta_mb": result["peak_mb"] - result["rss_start_mb"],
        **metrics(result["predictions"], labels),
        "steps": result["steps"],
        "threads": result["torch_threads"],
    }


MEASURES = ("train_s", "tok_s", "peak_mb", "delta_mb", "accuracy", "macro_f1")


def medians(rows: list[dict], mode: str, method: str, tool: str) -> dict[str, float]:
    mine = [r for r in rows if (r["mode"], r["method"], r["tool"]) == (mode, method, tool)]
    return {k: statistics.median(r[k] for r in mine) for k in MEASURES}


def ratios(rows: list[dict]) -> list[dict]:
    """Per mode and method: median tunelab against median Trainer."""
    out = []
    for mode, method in dict.fromkeys((r["mode"], r["method"]) for r in rows):
        t, h = (medians(rows, mode, method, tool) for tool in ("tunelab", "trainer"))
        out.append(
            {
                "mode": mode,
                "method": method,
                "speed": h["train_s"] / t["train_s"],
                "tok_s": t["tok_s"] / h["tok_s"],
                "peak_mb": t["peak_mb"] / h["peak_mb"],
                "delta_mb": t["delta_mb"] / h["delta_mb"] if h["delta_mb"] > 0 else None,
                "accuracy_pts": 100 * (t["accuracy"] - h["accuracy"]),
                "macro_f1_pts": 100 * (t["macro_f1"] - h["macro_f1"]),
                "medians": {"tunelab": t, "trainer": h},
            }
        )
    return out


def notes(rows: list[dict], n_train: int) -> list[str]:
    """What a reader should know to read the numbers, and any disagreement found."""
    out = [
        "each tool draws its batches in its own seeded order (and its own dropout masks), so at "
        "equal settings the metrics differ by that alone (a different seed's noise)."
    ]
    if n_train % BATCH:
        out.append(
            f"{n_train} train rows are not a multiple of the batch ({BATCH}): the Trainer ends "
            "the epoch on a short batch, tunelab fills its last batch from a second epoch, so "
            "their work differs (compare tok/s, not seconds)."
        )
    for r in rows:
        own = r["raw"].get("own_metrics")
        if own and any(abs(own[k] - r[k]) > 1e-9 for k in own):
            out.append(f"{r['mode']} {r['method']} #{r['repeat']}: tunelab's own metrics {own}")
    for mode, method in dict.fromkeys((r["mode"], r["method"]) for r in rows):
        tokens = {r["tokens"] for r in rows if (r["mode"], r["method"]) == (mode, method)}
        if len(tokens) > 1 and n_train % BATCH == 0:  # one epoch: every row once, both tools
            out.append(f"{mode} {method}: one epoch, yet different token counts {sorted(tokens)}")
    return out


def cpuinfo() -> tuple[str, set[str]]:
    """The CPU's model name and flags (/proc/cpuinfo; the platform's name elsewhere)."""
    path = Path("/proc/cpuinfo")
    lines = path.read_text().splitlines() if path.exists() else []
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return fields.get("model name", platform.processor()), set(fields.get("flags", "").split())


def machine() -> dict:
    import torch

    cpu, flags = cpuinfo()
    packages = ["torch", "transformers", "peft", "accelerate", "datasets", "scikit-learn"]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "flags": {f: f in flags for f in ("amx_bf16", "avx512_bf16", "avx512f")},
        # the kernels torch and oneDNN may use: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
        # hold an AVX-512 CPU to AVX2 code (a stand-in where no AVX2-only CPU is at hand)
        "kernels": {
            "aten": torch.backends.cpu.get_cpu_capability(),
            "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "(the CPU's best)"),
        },
        "python": platform.python_version(),
        "versions": {p: version(p) for p in [*packages, "tunelab"]},
        "load_before": os.getloadavg()[0],
    }


# --- the markdown --------------------------------------------------------------------------


def markdown(result: dict) -> str:
    parts = [header(result), runs_table(result["runs"]), ratios_table(result["ratios"])]
    parts.append(settings_table(result["runs"]))
    parts.append("\n".join(f"Note: {n}" for n in result["notes"]))
    return "\n\n".join(parts)


def _kernels(m: dict) -> str:
    k = m.get("kernels") or {}
    return f"ATen {k.get('aten', '?')}, oneDNN up to {k.get('onednn_max_isa', '?')}"


def header(result: dict) -> str:
    m, d = result["machine"], result["data"]
    flags = ", ".join(f"{f} {'yes' if on else 'no'}" for f, on in m["flags"].items())
    threads = ", ".join(str(t) for t in sorted({r["threads"] for r in result["runs"]}))
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    dropped = ", ".join(f"{k} {v}" for k, v in d["dropped"].items())
    return "\n".join(
        [
            f"`{result['command']}`",
            "",
            f"Machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), torch "
            f"threads {threads}; {flags}; kernels: {_kernels(m)}. Load average "
            f"{m['load_before']:.2f} before, "
            f"{result['load_after']:.2f} after.",
            f"Versions: {versions}, Python {m['python']}.",
            f"Data: {d['train']} train / {d['validation']} validation rows (stratified, seed "
            f"{d['seed']}) of {d['pool']} distinct articles (left out: {dropped}); the same two "
            "files for both tools.",
        ]
    )


def runs_table(runs: list[dict]) -> str:
    lines = [
        "| mode | method | tool | # | train s | tok/s | peak MiB | Δ MiB | accuracy | macro-F1 "
        "| steps | tokens |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['mode']} | {r['method']} | {r['tool']} | {r['repeat']} | {r['train_s']:.1f} "
            f"| {r['tok_s']:,.0f} | {r['peak_mb']:,.0f} | {r['delta_mb']:,.0f} "
            f"| {100 * r['accuracy']:.1f} | {100 * r['macro_f1']:.1f} | {r['steps']} "
            f"| {r['tokens']:,} |"
        )
    return "\n".join(lines)


def ratios_table(ratios: list[dict]) -> str:
    lines = [
        "Median tunelab / median Trainer. Speed (1 / train s) and tok/s: > 1 means tunelab is "
        "faster; memory: < 1 means tunelab uses less; metrics: tunelab - Trainer in points.",
        "",
        "| mode | method | speed | tok/s | peak MiB | Δ MiB | accuracy | macro-F1 |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for q in ratios:
        delta = "n/a" if q["delta_mb"] is None else f"{q['delta_mb']:.2f}"
        lines.append(
            f"| {q['mode']} | {q['method']} | {q['speed']:.2f}x | {q['tok_s']:.2f}x "
            f"| {q['peak_mb']:.2f} | {delta} | {q['accuracy_pts']:+.1f} "
            f"| {q['macro_f1_pts']:+.1f} |"
        )
    return "\n".join(lines)


SETTINGS = ("lr", "optimizer", "schedule", "warmup", "weight_decay", "max_grad_norm", "batch")
SETTINGS += ("seed", "eval_batch", "head", "trainable", "lora", "other")


def settings_table(runs: list[dict]) -> str:
    """What each side ran with (its first repeat), read back from each tool."""
    lines = [
        "Settings as each tool ran them (batch: microbatch x accumulation):",
        "",
        "| mode | method | tool | " + " | ".join(SETTINGS) + " |",
        "|---|---|---|" + "---|" * len(SETTINGS),
    ]
    for r in runs:
        if r["repeat"] == 1:
            s = r["raw"]["settings"]
            values = " | ".join(str(s.get(k, "")) for k in SETTINGS)
            lines.append(f"| {r['mode']} | {r['method']} | {r['tool']} | {values} |")
    return "\n".join(lines)


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
