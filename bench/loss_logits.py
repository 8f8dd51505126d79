"""Loss-only logits: a causal LM's training step with the vocabulary projection on the target
positions only (`training/step.py`, `logits_to_keep` at the targets' positions) against the
same step with every position's logits, on the extraction demo's model and pages.

SmolLM2-135M-Instruct (the demo's GGUF base, dequantized to float32), LoRA r 8 on q/k/v/o as in
the demo, microbatches of 4 manual pages rendered with the demo's chat template (max length
320). Each round times one forward + backward of each way, alternating which goes first, so
both see the same machine load; the ratio is the median of the per-round ratios. The losses
and the LoRA gradients of the two ways are compared on the first microbatch.

    .venv/bin/python bench/loss_logits.py --rounds 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model

from tunelab.core.spec import ModelSpec
from tunelab.demo.assets import manpages, smollm2_gguf
from tunelab.demo.extraction import SPEC
from tunelab.modeling.gguf import materialize
from tunelab.modeling.model import load_causal, load_tokenizer
from tunelab.modeling.render import make_template, render_example
from tunelab.tasks.extraction import render_target
from tunelab.training.step import make_batch, summed_loss

CPU = torch.device("cpu")


def whole_sequence_loss(model, batch):
    """Every position's logits, then the loss on the target positions (the way before)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    shifted = logits[:, :-1].float().reshape(-1, logits.size(-1))
    targets = batch["labels"][:, 1:].reshape(-1)
    return F.cross_entropy(shifted, targets, ignore_index=-100, reduction="sum")


def batches(cache: Path, n: int, micro: int):
    folder, _ = materialize(smollm2_gguf(), cache)
    spec = ModelSpec(path=str(folder), max_length=320, template="chat")
    tokenizer = load_tokenizer(spec, folder)
    task = SPEC["task"]
    template = make_template(tokenizer, "chat", task["instruction"])
    rows = [json.loads(line) for line in manpages().read_text().splitlines()[: n * micro]]
    examples = [
        render_example(tokenizer, template, r, render_target(r["target"], task["json_schema"]), 320)
        for r in rows
    ]
    model = load_causal(spec, folder, CPU)
    method = SPEC["method"]
    config = LoraConfig(
        r=method["r"],
        lora_alpha=method["alpha"],
        lora_dropout=0.0,
        target_modules=method["target_modules"],
    )
    model = get_peft_model(model, config).train()
    parts = [examples[i : i + micro] for i in range(0, len(examples), micro)]
    return model, [make_batch(p, tokenizer.pad_token_id, CPU) for p in parts]


def timed(model, batch, loss_fn) -> tuple[float, float]:
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss = loss_fn(model, batch)
    loss.backward()
    return time.perf_counter() - start, float(loss.detach())


def lora_grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--microbatch", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        model, data = batches(Path(tmp), args.rounds, args.microbatch)
        timed(model, data[0], summed_loss)  # warm-up, both ways
        timed(model, data[0], whole_sequence_loss)
        _, kept_loss = timed(model, data[0], summed_loss)
        kept_grads = lora_grads(model)
        _, whole_loss = timed(model, data[0], whole_sequence_loss)
        whole_grads = lora_grads(model)
        worst = max(
            float((kept_grads[n] - g).abs().max() / g.abs().max().clamp_min(1e-30))
            for n, g in whole_grads.items()
        )
        rows = []
        for i, batch in enumerate(data):
            ways = [("kept", summed_loss), ("whole", whole_sequence_loss)]
            seconds = {name: timed(model, batch, fn)[0] for name, fn in ways[:: 1 - 2 * (i % 2)]}
            targets = int((batch["labels"] != -100).sum())
            rows.append(
                {**seconds, "tokens": int(batch["attention_mask"].sum()), "targets": targets}
            )
    ratio = statistics.median(r["whole"] / r["kept"] for r in rows)
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}")
    print(
        f"loss: kept {kept_loss:.6f}, whole {whole_loss:.6f}; LoRA gradients differ by at "
        f"most {worst:.1e} of their largest entry"
    )
    print("| round | tokens | target tokens | whole logits, s | target logits only, s | speed-up |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rows):
        print(
            f"| {i} | {r['tokens']} | {r['targets']} | {r['whole']:.2f} | {r['kept']:.2f} "
            f"| {r['whole'] / r['kept']:.2f}x |"
        )
    print(f"median speed-up of a forward + backward: {ratio:.2f}x")


if __name__ == "__main__":
    main()
