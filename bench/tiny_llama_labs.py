"""A small Llama-style decoder with random weights and generative labs over man-page-like rows,
for the benchmarks that train one on a CPU or a GPU (bench/distributed.py, bench/gpu_table.py).
The tokenizer is the test suite's byte-level BPE with its ChatML template
(`tests/assets/make_tiny.py`); the labs are laid out like the tests' extraction lab."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "assets"))

from make_tiny import CORPUS, JSON_CORPUS, PAGE_SCHEMA, PAGES, train_byte_bpe


def build_llama(
    out: Path,
    hidden: int,
    intermediate: int,
    layers: int,
    heads: int,
    kv_heads: int,
    vocab: int | None = None,
    max_positions: int = 512,
    device: str = "cpu",
) -> dict:
    """A Llama-style causal LM with random weights (seed 0) and the tests' tokenizer, saved like
    any local model. `vocab` larger than the tokenizer's gives the model that many output rows
    (the compute of a real vocabulary; the rows past the tokenizer are never an input).
    `device` is where the weights are drawn (a GPU draws a 1B model's faster)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out)
    tokenizer = train_byte_bpe()
    tokenizer.model_max_length = max_positions
    config = LlamaConfig(
        vocab_size=max(vocab or 0, len(tokenizer)),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    del model
    return {
        "path": str(out),
        "parameters": params,
        "hidden": hidden,
        "intermediate": intermediate,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "vocab": config.vocab_size,
        "tokenizer_vocab": len(tokenizer),
    }


def page_rows(n: int, text_tokens: int, tokenizer, seed: int = 0) -> list[dict]:
    """`n` man-page-like documents whose NAME line holds the answer, each with a DESCRIPTION of
    seeded words from the tokenizer's corpus, about `text_tokens` tokens long in all."""
    rng = random.Random(seed)
    words = sorted({w for line in CORPUS + JSON_CORPUS for w in line.split()})
    sample = " ".join(rng.choice(words) for _ in range(2000))
    per_word = len(tokenizer(sample, verbose=False)["input_ids"]) / 2000  # with its space
    n_words = max(1, round(text_tokens / per_word))
    rows = []
    for i in range(n):
        name, section, summary = PAGES[i % len(PAGES)]
        name = f"{name}{i}"
        body = " ".join(rng.choice(words) for _ in range(n_words))
        text = (
            f"{name.upper()}({section})\n\nNAME\n  {name} - {summary}\n\n"
            f"SYNOPSIS\n  {name} -x\n\nDESCRIPTION\n  {body}"
        )
        rows.append(
            {
                "text": text,
                "label": section,
                "target": {"name": name, "section": section, "summary": summary},
            }
        )
    return rows


def write_lab(
    lab: Path,
    model_path: Path,
    rows: list[dict],
    method: dict,
    training: dict,
    max_length: int,
    evaluation: dict | None = None,
    split: dict | None = None,
) -> Path:
    """A generative lab laid out like the tests' `make_extraction_lab` (pages.jsonl and
    tunelab.yaml)."""
    lab.mkdir(parents=True, exist_ok=True)
    (lab / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "hypothesis": {"behaviour": "json", "metric": "exact_match", "min_effect": 0.05},
        "guardrails": [
            {"metric": "json_valid", "scope": "overall", "max_drop": 0.0},
            {"metric": "presence", "scope": "every_field", "max_drop": 0.0},
        ],
        "task": {
            "type": "extraction",
            "json_schema": PAGE_SCHEMA,
            "required": ["name", "section", "summary"],
        },
        "data": {
            "sources": [{"type": "jsonl", "path": "pages.jsonl"}],
            "split": split or {"train": 0.75, "validation": 0.125, "test": 0.125, "seed": 0},
        },
        "model": {"path": str(model_path), "max_length": max_length, "template": "chat"},
        "method": method,
        "training": training,
        "evaluation": evaluation or {"batch_size": 8, "max_new_tokens": 4},
    }
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return lab
