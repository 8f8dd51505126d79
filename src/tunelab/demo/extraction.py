"""The extraction demo: Debian manual pages to JSON on SmolLM2-135M-Instruct (a GGUF base).

The ground truth comes from each page's own structure (its NAME line and section), so the
question is clean: does a LoRA teach a 135M model to answer with valid JSON holding the right
fields, without losing what the base model already does?
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from tunelab import show
from tunelab.baseline import run_baseline
from tunelab.compare import compare
from tunelab.data import build_data
from tunelab.demo.assets import manpages, set_aside, smollm2_gguf
from tunelab.inspection import inspect_lab
from tunelab.lab import open_lab
from tunelab.run import run_variant
from tunelab.spec import SPEC_FILE

FIELDS = ["name", "section", "summary"]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the page's name(s), as in its NAME line"},
        "section": {"type": "string", "description": "the manual section, e.g. 1, 3, 3type"},
        "summary": {"type": "string", "description": "the one-line description"},
    },
    "required": FIELDS,
}
# 40 steps of 8 pages (about 320 of the 360 train pages, ~200 tokens each) keep the LoRA run to a
# few minutes on two CPU cores; bf16 autocast uses the CPU's AMX units where it has them.
SPEC = {
    "compass": {
        "kind": "research",
        "why": "Turn Unix manual pages into a JSON index (name, section, summary) with a model "
        "small enough for a laptop.",
    },
    "hypothesis": {
        "behaviour": "A LoRA on SmolLM2-135M-Instruct answers with the page's exact name, "
        "section and summary as JSON far more often than the base model.",
        "metric": "exact_match",
        "min_effect": 0.1,
    },
    "guardrails": [
        {"metric": "json_valid", "scope": "overall", "max_drop": 0.0},
        {"metric": "presence", "scope": "every_field", "max_drop": 0.0},
    ],
    "task": {
        "type": "extraction",
        "json_schema": SCHEMA,
        "required": FIELDS,
        "instruction": 'Read the manual page below. Answer with JSON only, in the form {"name": '
        '"...", "section": "...", "summary": "..."}.',
    },
    "data": {
        "sources": [{"type": "jsonl", "path": "{data}"}],
        "fields": {"text": "text", "target": "target", "group": "group"},
        "split": {"train": 0.6, "validation": 0.1, "test": 0.3, "seed": 0, "stratify": False},
    },
    "model": {"path": "{model}", "template": "chat", "max_length": 320},
    "method": {
        "type": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.05,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "training": {
        "lr": 2e-3,
        "schedule": "cosine",
        "warmup_steps": 4,
        "global_batch": 8,
        "microbatch": 4,
        "budget": {"steps": 40},
        "seed": 0,
        "precision": "bf16",
    },
    "evaluation": {"split": "validation", "batch_size": 16, "max_new_tokens": 72},
}


def write_spec(lab: Path) -> Path:
    text = yaml.safe_dump(SPEC, sort_keys=False)
    text = text.replace("'{data}'", str(manpages())).replace("'{model}'", str(smollm2_gguf()))
    lab.mkdir(parents=True, exist_ok=True)
    (lab / SPEC_FILE).write_text("# tunelab demo: manual pages to JSON\n" + text)
    return lab / SPEC_FILE


def run(lab: Path, console: Console, quiet: bool = False) -> dict:
    out = Console(quiet=True) if quiet else console
    progress = None if quiet else show.console(stderr=True)
    started = time.perf_counter()
    moved = set_aside(lab)
    write_spec(lab)
    handle = open_lab(lab)
    spec = handle.spec

    out.print(Rule("[bold]tunelab demo: manual pages to JSON on SmolLM2-135M-Instruct"))
    out.print(
        f"lab: {handle.path}" + (f"  (the previous demo lab was moved to {moved})" if moved else "")
    )
    out.print(f"[bold]Question.[/] {spec.hypothesis.behaviour}")
    out.print("Guardrails: JSON validity and the presence of every field must not drop.")

    out.print(Rule("1. The data"))
    report = build_data(spec, handle.path, handle.store)
    show.data(report, out)

    out.print(Rule("2. What the trainer sees (tunelab inspect)"))
    if progress:
        progress.print("[dim]dequantizing the GGUF base once (cached in the lab's store)…[/]")
    view = inspect_lab(handle, sample=1)
    view["examples"] = view["examples"][:1]
    show.inspect(view, out)

    out.print(Rule("3. The baseline: the base model, zero-shot"))
    baselines = run_baseline(handle, progress)
    show.baseline(baselines, out)

    out.print(Rule("4. The variant: LoRA"))
    lora = run_variant(handle, "lora", progress)
    show.run(lora, out)

    out.print(Rule("5. Before and after"))
    result = compare(handle)
    before_after(baselines["runs"][0], lora, out)
    show.compare(result, out)
    seconds = time.perf_counter() - started
    out.print(Rule())
    out.print(
        f"done in {seconds / 60:.1f} min. Explore it: `tunelab runs --lab {lab}`, "
        f"`tunelab inspect --lab {lab}`."
    )
    return {
        "lab": str(handle.path),
        "data": report,
        "compare": result,
        "seconds": round(seconds, 1),
    }


def before_after(base: dict, variant: dict, out: Console) -> None:
    b, v = base["metrics"], variant["metrics"]
    table = Table("on validation", "base (zero-shot)", "LoRA", title="before / after")
    for key in ("json_valid", "schema_valid", "field_presence", "exact_match"):
        table.add_row(key.replace("_", " "), show.pct(b[key]), show.pct(v[key]))
    for field in FIELDS:
        for part in ("presence", "exact"):
            table.add_row(
                f"  {field} {part}",
                show.pct(b["per_field"][field][part]),
                show.pct(v["per_field"][field][part]),
            )
    out.print(table)
