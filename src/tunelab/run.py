"""`tunelab run`: train one variant, evaluate it with the baseline's protocol, record everything.

The record is opened before training starts, so an interrupted or crashed run stays in the
ledger with its status and error.
"""

from __future__ import annotations

import torch
from peft import TaskType
from rich.console import Console

from tunelab import ledger
from tunelab.evaluate import evaluate_rows, protocol
from tunelab.inspection import blocking, training_findings
from tunelab.lab import Lab
from tunelab.model import (
    apply_method,
    identity,
    load_causal,
    load_classifier,
    load_tokenizer,
    save_trained,
)
from tunelab.render import make_renderer
from tunelab.store import write_jsonl
from tunelab.train import total_steps, train


def load_base(lab: Lab, labels: list[str]) -> tuple[torch.nn.Module, TaskType]:
    """The pretrained model this lab fine-tunes: a new-headed classifier or a causal LM."""
    if lab.spec.model_kind == "encoder":
        return load_classifier(lab.spec.model, lab.path, labels, lab.device), TaskType.SEQ_CLS
    return load_causal(lab.spec.model, lab.path, lab.device), TaskType.CAUSAL_LM


class BlockedError(ValueError):
    """Blocking inspect findings and no recorded reason to train anyway."""


def run_variant(
    lab: Lab,
    name: str | None = None,
    console: Console | None = None,
    allow_warnings: str | None = None,
) -> dict:
    spec, store = lab.spec, lab.store
    spec.require_plan()
    version = store.current_data()
    labels = store.data_manifest(version)["labels"]
    tokenizer = load_tokenizer(spec.model, lab.path)
    renderer = make_renderer(spec, tokenizer, labels, lab.path)
    train_rows = store.read_split(version, "train")
    train_set, rejected = renderer.training(train_rows)
    findings = training_findings(renderer, train_rows, rejected)
    if blocking(findings) and not allow_warnings:
        raise BlockedError(
            "training refuses to start: "
            + "; ".join(
                f"{f['code']} ({f['count']} rows, e.g. {f['example']})" for f in blocking(findings)
            )
            + '. See `tunelab inspect`; to train anyway pass --allow-warnings "why".'
        )
    val_rows = store.read_split(version, "validation")

    torch.manual_seed(spec.training.seed)  # the new head's init comes from the seed
    model, task_type = load_base(lab, labels)
    model, trainable = apply_method(model, spec.method, task_type)
    record, run_dir = ledger.open_run(
        lab,
        name or spec.method.type,
        "variant",
        version,
        method=spec.method.type,
        base_model=identity(spec.model, lab.path),
        trainable=trainable,
        protocol=protocol(lab.spec),
        rejected_train=rejected,
        findings=findings,
        warnings_allowed=allow_warnings,
    )
    if console:
        console.print(_start_line(record, spec, len(train_set)))
    try:
        record["training"] = train(
            model, train_set, spec.training, lab.device, renderer.pad_id, console
        )
        e = spec.evaluation
        predictions, record["metrics"] = evaluate_rows(
            model, renderer, val_rows, e.batch_size, e.max_new_tokens, lab.device
        )
        write_jsonl(run_dir / "predictions.jsonl", predictions)
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
