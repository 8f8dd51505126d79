"""bench/vs_hf_trainer.py's peer: the same run with transformers' `Trainer` (+ PEFT), written
the way its users write it, and the settings it ran with, read back from the Trainer."""

from __future__ import annotations

import time

from vs_hf_trainer_setup import BATCH, EQUAL, EQUAL_LORA, LR, MAX_LENGTH, read_jsonl, sha256


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
