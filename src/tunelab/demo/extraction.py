"""The extraction demo: Debian manual pages to JSON on SmolLM2-135M-Instruct (a GGUF base).

The ground truth comes from each page's own structure (its NAME line and section), so the
question is clean: does a LoRA teach a 135M model to answer with valid JSON holding the right
fields, without losing what the base model already does?
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tunelab.data import build_data
from tunelab.demo.assets import bbc_news, manpages, smollm2_gguf
from tunelab.demo.report import handover, open_demo, seed_note
from tunelab.stages.baseline.measure import run_baseline
from tunelab.stages.check.steps import run_check
from tunelab.stages.compare.two_level import SEEDS
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.inspect.lab import inspect_lab
from tunelab.stages.run.variant import run_variant
from tunelab.views import check as check_view
from tunelab.views import compare as compare_view
from tunelab.views import data as data_view
from tunelab.views import inspect as inspect_view
from tunelab.views import runs as runs_view
from tunelab.views import style

FIELDS = ["name", "section", "summary"]
NEWS = "general/bbc_news.jsonl"
STATUS_WORDS = {"holds": "holds", "broken": "is broken", "unresolved": "is unresolved"}
"""The forgetting guardrail's text: BBC News openings (`news_guard`), in the lab."""
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the page's name(s), as in its NAME line"},
        "section": {"type": "string", "description": "the manual section, e.g. 1, 3, 3type"},
        "summary": {"type": "string", "description": "the one-line description"},
    },
    "required": FIELDS,
}
# 12 steps of 8 pages (96 of the 360 train pages, ~230 tokens each) keep the demo within its 10
# minutes on the slowest CPU it may meet: 24 steps took it to 5.9 minutes on an AMD EPYC with
# AVX-512 (two cores), 12 to 4.2, and an AVX2-only EPYC trained 1.7x slower (107 against 179
# tokens/s in bench/vs_trl.py) and ran the check 3x slower. Over three seeds 12 steps answered
# 73.9% of the pages exactly against 85.6% at 24, and kept the news guardrail (+0.030 bits per
# byte, +0.018 to +0.042) where 24 left it unresolved (+0.051, +0.035 to +0.068): bench/README.md,
# "Fewer training steps to fit the slow CPU". 40 steps scored no better than 24 (exact match
# 85.0% against 88.3%, with LoRA dropout 0.05).
# float32: on a CPU without native bf16 units (no AVX512-BF16 or AMX) bf16 autocast is emulated
# and was 2.8x slower per step here (8 s against 22 s).
# No LoRA dropout: the steps see each page at most once, so there is no repetition for it to
# regularise, and on a CPU its random masks (one per adapted projection) cost a fifth of each
# step (137 s against 112 s of training) for the same exact match over three seeds (84.4% on
# average both ways; bench/README.md, "LoRA dropout on a CPU").
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
        # what the LoRA may cost on prose it never trains on (news_guard writes it)
        {"metric": "bits_per_byte", "on": NEWS, "max_drop": 0.05},
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
        "fields": {"id": "id", "text": "text", "target": "target", "group": "group"},
        "split": {"train": 0.6, "validation": 0.1, "test": 0.3, "seed": 0, "stratify": False},
        "allow_outside_lab": True,  # the data is read where it is installed
    },
    "model": {"path": "{model}", "template": "chat", "max_length": 320},
    "method": {
        "type": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "training": {
        "lr": 2e-3,
        "schedule": "cosine",
        "warmup_steps": 3,
        "global_batch": 8,
        "microbatch": 4,
        "budget": {"steps": 12},
        "seed": 0,
    },
    "evaluation": {"split": "validation", "batch_size": 16, "max_new_tokens": 72},
}


def run(lab: Path, console: Console, quiet: bool = False, overrides: dict | None = None) -> dict:
    paths = {"data": manpages(), "model": smollm2_gguf()}
    title = "manual pages to JSON on SmolLM2-135M-Instruct"
    report = open_demo(lab, title, SPEC, paths, console, quiet, overrides, before=news_guard)
    out, handle, progress = report.out, report.lab, report.progress

    report.section("The data")
    data = build_data(handle.spec, handle.path, handle.store)
    data_view.data(data, out)

    report.section("What the trainer sees (tunelab inspect)")
    report.note("dequantizing the GGUF base once (cached in the lab's store)…")
    view = inspect_lab(handle, sample=1)
    view["examples"] = view["examples"][:1]
    inspect_view.inspect(view, out)

    report.section("The preflight (tunelab check, on a slice)")
    check = run_check(handle, progress)
    check_view.check(check, out)

    report.section("The baseline: the base model, zero-shot")
    baselines = run_baseline(handle, progress)
    runs_view.baseline(baselines, out)

    report.section("The variant: LoRA")
    lora = run_variant(handle, "lora", progress)
    runs_view.run(lora, out)

    report.section("Before and after")
    result = compare(handle)
    before_after(baselines["runs"][0], lora, out)
    compare_view.compare(result, out, metric_tables=False)  # the table above has them all
    out.print(forgetting_note(result, baselines["runs"][0], lora))
    out.print(seed_note(result))

    report.section("The handover: export, verify, a rental plan, the lab report")
    handed = handover(report, lora["id"])
    return {
        "lab": str(handle.path),
        "data": data,
        "check": check,
        "compare": result,
        **handed,
        **report.finish("runs", "inspect"),
    }


def news_guard(lab: Path, per_category: int = 5, chars: int = 900) -> dict:
    """The forgetting set: the opening paragraphs (about `chars` characters) of
    `per_category` BBC News articles of each category, drawn with a fixed seed, written to
    NEWS in the lab. Prose the base model reads well and the manual pages never show it."""
    root = bbc_news()
    rng = random.Random(0)
    rows = []
    for category in sorted(p.name for p in root.iterdir() if p.is_dir()):
        files = sorted((root / category).glob("*.txt"))
        for path in sorted(rng.sample(files, per_category)):
            paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")]
            text = ""
            for paragraph in (p for p in paragraphs if p):
                text = f"{text}\n\n{paragraph}" if text else paragraph
                if len(text) >= chars:
                    break
            rows.append({"id": f"{category}/{path.name}", "text": text})
    (lab / NEWS).parent.mkdir(parents=True, exist_ok=True)
    (lab / NEWS).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"news": len(rows)}


def forgetting_note(result: dict, base: dict, variant: dict) -> str:
    """What the LoRA cost on the news prose, in words, from the comparison's guardrail."""
    row = next(r for r in result["runs"] if r["id"] == variant["id"])
    g = next(g for g in row.get("guardrails", []) if g.get("on") == NEWS)
    c = g["checks"]["overall"]
    if "not_checked" in c:
        return f"The forgetting guardrail was not checked: {c['not_checked']}."
    before, after = (r["guard"][NEWS]["metrics"]["bits_per_byte"] for r in (base, variant))
    text = (
        f"What the LoRA cost: on {base['guard'][NEWS]['metrics']['n']} news openings neither "
        f"model trained on, bits per byte went from {before:.3f} to {after:.3f} "
        f"({-c['delta']:+.3f}, 95% CI {-c['high']:+.3f} to {-c['low']:+.3f}); the limit is "
        f"+{g['max_drop']:g}: the guardrail {STATUS_WORDS[g['status']]}."
    )
    if g["status"] == "holds" and c.get("basis") != SEEDS:
        text += (
            " On this seed: the interval counts the documents, not the seeds' spread, and "
            "another seed may lose more (`tunelab noise` measures it)."
        )
    if g["status"] == "broken":
        seeds = (
            ""
            if c.get("basis") == SEEDS
            else " on this seed (the interval counts the documents, not the seeds' spread: "
            "another seed may lose less)"
        )
        text += (
            f" So the verdict is '{row.get('verdict') or 'guardrail broken'}', not 'improved': "
            f"the answers are far better and some of the base's prose is lost{seeds}. The "
            "bundle's model card records both. If the model must still write prose, a smaller "
            "rank or fewer steps is the next variant (one change at a time)."
        )
    return text


def before_after(base: dict, variant: dict, out: Console) -> None:
    b, v = base["metrics"], variant["metrics"]
    table = Table("on validation", "base (zero-shot)", "LoRA", title="before / after")
    for key in ("json_valid", "schema_valid", "field_presence", "field_accuracy", "exact_match"):
        table.add_row(key.replace("_", " "), style.pct(b[key]), style.pct(v[key]))
    for field in FIELDS:
        for part in ("presence", "exact"):
            table.add_row(
                f"  {field} {part}",
                style.pct(b["per_field"][field][part]),
                style.pct(v["per_field"][field][part]),
            )
    bg, vg = (run.get("guard", {}).get(NEWS) for run in (base, variant))
    if bg and vg:  # the forgetting set: prose neither saw in training
        table.add_section()
        table.add_row(
            f"news prose ({bg['metrics']['n']} openings): bits per byte, less is better",
            f"{bg['metrics']['bits_per_byte']:.3f}",
            f"{vg['metrics']['bits_per_byte']:.3f}",
        )
    out.print(table)
