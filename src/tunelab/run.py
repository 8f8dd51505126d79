"""`tunelab run`: train one variant, evaluate it with the baseline's protocol, record everything.

The record is opened before training starts, so an interrupted or crashed run stays in the
ledger with its status and error.
"""

from __future__ import annotations

import torch
from peft import TaskType
from rich.console import Console

from tunelab import ledger
from tunelab.evaluate import predict_classifier, score
from tunelab.lab import Lab
from tunelab.model import apply_method, identity, load_classifier, load_tokenizer, save_trained
from tunelab.render import encode_classification
from tunelab.store import write_jsonl
from tunelab.train import total_steps, train


def run_variant(lab: Lab, name: str | None = None, console: Console | None = None) -> dict:
    spec, store = lab.spec, lab.store
    spec.require_plan()
    version = store.current_data()
    labels = store.data_manifest(version)["labels"]
    tokenizer = load_tokenizer(spec.model, lab.path)
    max_len = spec.model.max_length
    train_set = encode_classification(
        tokenizer, store.read_split(version, "train"), labels, max_len
    )
    val_set = encode_classification(
        tokenizer, store.read_split(version, "validation"), labels, max_len
    )

    torch.manual_seed(spec.training.seed)  # the new head's init comes from the seed
    model = load_classifier(spec.model, lab.path, labels, lab.device)
    model, trainable = apply_method(model, spec.method, TaskType.SEQ_CLS)
    record, run_dir = ledger.open_run(
        lab,
        name or spec.method.type,
        "variant",
        version,
        method=spec.method.type,
        base_model=identity(spec.model, lab.path),
        trainable=trainable,
        protocol=spec.evaluation.model_dump() | {"max_length": max_len},
        truncated_train=sum(e.truncated for e in train_set),
    )
    if console:
        console.print(_start_line(record, spec, len(train_set)))
    try:
        record["training"] = train(
            model, train_set, spec.training, lab.device, tokenizer.pad_token_id, console
        )
        predictions = predict_classifier(
            model,
            val_set,
            labels,
            spec.evaluation.batch_size,
            lab.device,
            tokenizer.pad_token_id,
        )
        write_jsonl(run_dir / "predictions.jsonl", predictions)
        record["metrics"] = score(spec.task.type, predictions, labels)
        record["weights"] = {"dir": "weights", "files": save_trained(model, run_dir / "weights")}
    except KeyboardInterrupt as err:
        ledger.close_run(lab, record, "interrupted", err)
        raise
    except Exception as err:
        ledger.close_run(lab, record, "failed", err)
        raise
    ledger.close_run(lab, record, "completed")
    return record


def _start_line(record: dict, spec, n_train: int) -> str:
    t, cfg = record["trainable"], spec.training
    steps = total_steps(cfg, n_train)
    return (
        f"[bold]{record['id']}[/]: {t['method']} · {t['trainable_params']:,} of "
        f"{t['total_params']:,} parameters train ({100 * t['trainable_fraction']:.2f}%) · "
        f"global batch {cfg.global_batch} = {cfg.microbatch} × {cfg.accumulation} accumulation"
        f" · {steps} steps on {n_train} examples"
    )
