"""The runs of bench/vs_trl.py, one per fresh subprocess: `python bench/vs_trl_peer.py JOB`
(JSON) writes the run's result to the job's `result` file.

`trl_run` (the peer) trains the lab's LoRA with TRL's `SFTTrainer` (+ PEFT) on the lab's own
train split, rendered by tunelab's renderer and handed to TRL as a processed prompt-completion
dataset (`input_ids` + `completion_mask`, `completion_only_loss=True`), on the float32 folder
tunelab dequantized the GGUF base into (the lab's store). Every setting comes from the lab's
spec; the learning-rate schedule is tunelab's own factor function, given to the Trainer through
`create_scheduler` (transformers' cosine warmup is s / w where tunelab's is (s + 1) / w). Before
training, `check_masks` stops the run unless TRL's labels equal tunelab's on every row and the
first global batch TRL collates equals the one tunelab collates.

`tunelab_run` is `tunelab run` through its Python API. Both sides copy their trainable weights
after the curve's steps (`Snapshots`) and evaluate the copies after training (`curve_outputs`).
Nothing heavy is imported at the top, and TRL only in TRL's run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from vs_hf_trainer import tunelab_settings
from vs_hf_trainer_peer import trainer_settings
from vs_hf_trainer_setup import read_jsonl

REASON = "bench/vs_trl.py: tunelab against TRL's SFTTrainer at the demo's settings"


class Snapshots:
    """Copies of the trainable weights after chosen optimizer steps, taken during training (a
    LoRA's tensors: a fraction of a millisecond) and evaluated after it, off the clock."""

    def __init__(self, steps: list[int]):
        self.steps, self.done, self.saved = set(steps), 0, {}

    def after_step(self, params: list) -> None:
        self.done += 1
        if self.done in self.steps:
            self.saved[self.done] = [p.detach().clone() for p in params]


def curve_outputs(snapshots: Snapshots, params: list, predict) -> dict[int, list[dict]]:
    """`predict()`'s outputs with each copy's weights in place; the trained weights after."""
    import torch

    trained, out = [p.detach().clone() for p in params], {}
    for step, saved in sorted(snapshots.saved.items()):
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)
        out[step] = predict()
    with torch.no_grad():
        for p, s in zip(params, trained, strict=True):
            p.copy_(s)
    return out


def outputs_of(predictions: list[dict]) -> list[dict]:
    """What the scoring reads of each generated answer: its page, target and raw output."""
    return [{k: p[k] for k in ("id", "target", "output")} for p in predictions]


def run(job: dict) -> None:
    """Run the job's tool and write its result (with the torch threads it ran with)."""
    import torch

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    result = trl_run(job) if job["tool"] == "trl" else tunelab_run(job)
    result["torch_threads"] = torch.get_num_threads()
    Path(job["result"]).write_text(json.dumps(result))


def tunelab_run(job: dict) -> dict:
    """`tunelab run` through its Python API (`run_variant`). Three wrappers, none inside a
    step's work: the resident set when training starts (around the loop's `start_peak`), a
    copy of the trainable weights after the curve's steps (around `train_step`), and the run's
    evaluation restricted to the chosen pages (around its `evaluate_rows`, which also hands
    over the trained model for the curve)."""
    import tunelab.stages.run.variant as variant
    import tunelab.training.loop as loop
    from tunelab.core.lab import open_lab
    from tunelab.core.layout import PREDICTIONS
    from tunelab.training.memory import rss_mb

    at_start, seen, snapshots = {}, {}, Snapshots(job["curve_steps"])
    reset, step, evaluate = loop.start_peak, loop.train_step, variant.evaluate_rows
    wanted = set(job["validation_ids"])

    def start_peak(device):
        at_start["rss_mb"] = rss_mb()
        return reset(device)

    def train_step(model, optimizer, params, *args, **kwargs):
        out = step(model, optimizer, params, *args, **kwargs)
        snapshots.after_step(params)
        seen["params"] = params
        return out

    def evaluate_rows(model, renderer, rows, *args, **kwargs):
        chosen = [r for r in rows if r["id"] in wanted]
        seen.update(model=model, renderer=renderer, rows=chosen, args=args, kwargs=kwargs)
        return evaluate(model, renderer, chosen, *args, **kwargs)

    loop.start_peak, loop.train_step, variant.evaluate_rows = start_peak, train_step, evaluate_rows
    lab = open_lab(Path(job["lab"]), job["overrides"], device="cpu")
    lab.data = job["version"]
    record = variant.run_variant(lab, job["name"], reason=REASON)

    def predict() -> list[dict]:
        s = seen
        return outputs_of(
            evaluate(s["model"], s["renderer"], s["rows"], *s["args"], **s["kwargs"])[0]
        )

    training = record["training"]
    settings = tunelab_settings(lab.spec, record["trainable"])
    settings |= {
        "schedule": f"{lab.spec.training.schedule} (tunelab's factors, LambdaLR)",
        "precision": training["precision"]["used"],
        "checkpointing": lab.spec.training.activation_checkpointing,
        "max_length": lab.spec.model.max_length,
        "loss": "loss_mask (the answer and its end token)",
    }
    return {
        "seconds": training["seconds"],
        "tokens": training["tokens"],
        "steps": training["steps"],
        "peak_mb": training["peak_memory_mb"],
        "peak_source": training["peak_memory_source"],
        "rss_start_mb": at_start["rss_mb"],
        "final_loss": training["final_loss"],
        "step_seconds": [h["seconds"] for h in training["history"]],
        "lrs": [h["lr"] for h in training["history"]],
        "step_tokens": [h["tokens"] for h in training["history"]],  # cumulative
        "outputs": outputs_of(read_jsonl(str(lab.store.run_dir(record["id"]) / PREDICTIONS))),
        "curve_outputs": curve_outputs(snapshots, seen["params"], predict),
        "own_metrics": {k: record["metrics"][k] for k in ("exact_match", "json_valid")},
        "data_version": record["data_version"],
        "run": record["id"],
        "rejected_train": sorted(r["id"] for r in record.get("rejected_train") or []),
        "settings": settings,
    }


def trl_run(job: dict) -> dict:
    """One TRL run: train, evaluate the chosen validation pages with tunelab's `evaluate_rows`
    (greedy, the lab's batch size and new tokens), then the curve's copies."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tunelab.core.lab import open_lab
    from tunelab.modeling.model import DTYPES, compute_kwargs, resolve_path
    from tunelab.modeling.render import lab_renderer
    from tunelab.training.evaluate import evaluate_rows
    from tunelab.training.loop import total_steps
    from tunelab.training.memory import peak_rss_mb, reset_peak, rss_mb

    lab = open_lab(Path(job["lab"]), job["overrides"], device="cpu")
    spec, version = lab.spec, job["version"]
    renderer = lab_renderer(spec, lab.path, lab.store.data_manifest(version)["labels"], version)
    rows = lab.store.read_split(version, "train")
    rendered, rejected = renderer.training(rows)
    steps = total_steps(spec.training, len(rendered))
    base = resolve_path(spec.model, lab.path)  # the cached float32 copy of the GGUF
    tokenizer = AutoTokenizer.from_pretrained(base)
    data = Dataset.from_dict(
        {
            "input_ids": [e.input_ids for e in rendered],
            "completion_mask": [e.loss_mask for e in rendered],
        }
    )
    torch.manual_seed(spec.training.seed)  # LoRA's A matrices are drawn when PEFT wraps
    model = AutoModelForCausalLM.from_pretrained(
        base, dtype=DTYPES[spec.model.dtype], use_safetensors=True, **compute_kwargs(spec.model)
    )
    trainer = same_schedule_trainer(spec, steps)(
        model=model,
        args=sft_config(job, spec, steps),
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=lora_config(spec.method),
    )
    masks = check_masks(trainer, rendered, renderer.pad_id)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    clock = StepClock.make(Snapshots(job["curve_steps"]), params)
    trainer.add_callback(clock)
    rss_start = rss_mb()
    peak_source = "VmHWM since trainer.train() started" if reset_peak() else "ru_maxrss"
    clock.start = started = time.perf_counter()
    output = trainer.train()
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    wanted = set(job["validation_ids"])
    val = [r for r in lab.store.read_split(version, "validation") if r["id"] in wanted]
    ev, primary = spec.evaluation, spec.hypothesis.metric

    def predict() -> list[dict]:
        args = (ev.batch_size, ev.max_new_tokens, lab.device, None, primary)
        return outputs_of(evaluate_rows(trainer.model, renderer, val, *args)[0])

    outputs = predict()
    logged = [h for h in trainer.state.log_history if "num_tokens" in h]
    return {
        "seconds": round(seconds, 2),
        "tokens": int(logged[-1]["num_tokens"]),
        "step_tokens": [int(h["num_tokens"]) for h in logged],  # cumulative, logged each step
        "steps": output.global_step,
        "peak_mb": round(peak, 1),
        "peak_source": peak_source,
        "rss_start_mb": rss_start,
        "final_loss": output.training_loss,
        "step_seconds": [round(s, 3) for s in clock.seconds],
        "lrs": clock.lrs,
        "outputs": outputs,
        "curve_outputs": curve_outputs(clock.snapshots, params, predict),
        "train_ids": [e.id for e in rendered],
        "rejected_train": sorted(r["id"] for r in rejected),
        "masks": masks,
        "text_path": text_path(tokenizer, renderer, rendered),
        "base": str(base),
        "settings": trl_settings(trainer, spec),
    }


def sft_config(job: dict, spec, steps: int):
    """TRL's arguments at the lab's settings. TRL's own defaults that differ from them are set
    back: bf16 (TRL: on unless fp16), activation checkpointing (TRL: on), lr, max length."""
    import torch
    from trl import SFTConfig

    from tunelab.training.precision import resolve

    t = spec.training
    precision = resolve(t.precision, torch.device("cpu"))[0]
    return SFTConfig(
        output_dir=job["output_dir"],
        max_steps=steps,
        per_device_train_batch_size=t.microbatch,
        gradient_accumulation_steps=t.global_batch // t.microbatch,
        learning_rate=t.lr,
        lr_scheduler_type=t.schedule if t.schedule != "wsd" else "warmup_stable_decay",
        warmup_steps=t.warmup_steps,  # the factors themselves are tunelab's (create_scheduler)
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm or 0.0,
        optim="adamw_torch_fused",  # torch.optim.AdamW(fused=True), as tunelab's
        seed=t.seed,
        bf16=precision == "bf16",
        fp16=False,
        gradient_checkpointing=t.activation_checkpointing,
        max_length=spec.model.max_length,
        completion_only_loss=True,
        use_cpu=True,
        dataloader_num_workers=0,
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        logging_steps=1,  # each step's lr and token count, as tunelab's history holds them
        disable_tqdm=True,  # tunelab's API call shows no progress bar
    )


def lora_config(method):
    from peft import LoraConfig

    return LoraConfig(
        task_type="CAUSAL_LM",
        r=method.r,
        lora_alpha=method.alpha,
        lora_dropout=method.dropout,
        target_modules=method.target_modules,
        modules_to_save=method.modules_to_save,
    )


def same_schedule_trainer(spec, steps: int):
    """`SFTTrainer` whose scheduler is a LambdaLR over tunelab's own factor function."""
    from torch.optim.lr_scheduler import LambdaLR
    from trl import SFTTrainer

    from tunelab.training.loop import lr_factor

    t = spec.training
    factor = lr_factor(t.schedule, t.warmup_steps, steps, t.decay_fraction)

    class SameSchedule(SFTTrainer):
        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None:
                self.lr_scheduler = LambdaLR(optimizer or self.optimizer, factor)
            return self.lr_scheduler

    return SameSchedule


class StepClock:
    """A `TrainerCallback` (built by `make`: transformers loads only in the worker): each
    step's learning rate and its end in seconds since `start`, and the curve's copies."""

    @staticmethod
    def make(snapshots: Snapshots, params: list):
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self):
                self.snapshots, self.params, self.start = snapshots, params, 0.0
                self.seconds, self.lrs = [], []

            def on_step_begin(self, args, state, control, lr_scheduler=None, **kwargs):
                self.lrs.append(lr_scheduler.get_last_lr()[0])

            def on_step_end(self, args, state, control, **kwargs):
                self.seconds.append(time.perf_counter() - self.start)
                self.snapshots.after_step(self.params)

        return Clock()


def check_masks(trainer, rendered: list, pad_id: int) -> dict:
    """Stop unless TRL's prepared rows hold tunelab's tokens with the loss on the same positions
    (labels: the token on the loss mask, -100 elsewhere), and TRL's collator builds the first
    global batch exactly as tunelab's `collate_causal` does (ids, attention, labels)."""
    import torch

    from tunelab.modeling.render import collate_causal

    data, t = trainer.train_dataset, trainer.args
    ids, labels = data["input_ids"], data["labels"]
    problems = [] if len(ids) == len(rendered) else [f"{len(ids)} rows, not {len(rendered)}"]
    for i, e in enumerate(rendered[: len(ids)]):
        want = [tok if m else -100 for tok, m in zip(e.input_ids, e.loss_mask, strict=True)]
        if ids[i] != e.input_ids or labels[i] != want:
            problems.append(f"row {e.id}: other tokens or another loss mask")
    first = t.per_device_train_batch_size * t.gradient_accumulation_steps
    batches = 0
    for at in range(0, min(first, len(rendered)), t.per_device_train_batch_size):
        part = range(at, min(at + t.per_device_train_batch_size, len(rendered)))
        theirs = trainer.data_collator([data[i] for i in part])
        ours = collate_causal([rendered[i] for i in part], pad_id, torch.device("cpu"))
        for key in ("input_ids", "attention_mask", "labels"):
            if not torch.equal(theirs[key], ours[key]):
                problems.append(f"microbatch {batches + 1}: {key} differ")
        batches += 1
    if problems:
        raise SystemExit("TRL's and tunelab's training inputs differ: " + "; ".join(problems[:5]))
    targets = sum(sum(e.loss_mask) for e in rendered)
    return {"rows": len(rendered), "loss_tokens": targets, "batches_compared": batches}


def text_path(tokenizer, renderer, rendered: list) -> dict:
    """How many rows TRL's text path would tokenise differently: the same prompt (template,
    page cut as tunelab cut it) and completion (target + EOS) as one string, as TRL's
    prompt-completion preparation does, against tunelab's ids (the prompt tokenised whole,
    the target apart). The first difference is kept as an example."""
    before, after = renderer.template.text
    differ, example = 0, None
    for e in rendered:
        page = renderer.template.input_of(tokenizer, e.prompt_ids)
        text = before + page + after + e.target_text + tokenizer.eos_token
        ids = tokenizer(text=text)["input_ids"]
        if ids != e.input_ids:
            differ += 1
            if example is None:
                pairs = zip(ids, e.input_ids, strict=False)  # the lengths may differ
                at = next((i for i, (a, b) in enumerate(pairs) if a != b), 0)
                pieces = [
                    tokenizer.convert_ids_to_tokens(x[at : at + 2]) for x in (e.input_ids, ids)
                ]
                example = f"at token {at}: tunelab {pieces[0]}, one string {pieces[1]}"
    return {"rows": len(rendered), "differ": differ, "example": example}


def trl_settings(trainer, spec) -> dict:
    """What TRL ran with, read back from its arguments, optimizer and PEFT config."""
    args = trainer.args
    settings = trainer_settings(trainer, trainer.model)
    for key in ("head", "eval_batch"):
        settings.pop(key, None)
    schedule = type(trainer.lr_scheduler).__name__
    settings["schedule"] = f"{spec.training.schedule} (tunelab's factors, {schedule})"
    settings["precision"] = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    settings["checkpointing"] = bool(args.gradient_checkpointing)
    settings["max_length"] = args.max_length
    settings["loss"] = f"completion_mask (completion_only_loss={trainer.completion_only_loss})"
    return settings


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
