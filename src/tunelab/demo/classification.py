"""The classification demo: BBC News topics on all-MiniLM-L6-v2, told as a short lab report.

It chains the real stages (init-like spec, data, baseline, a LoRA run, a full fine-tuning run,
compare) on a lab folder the user can go on exploring with every other command.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.rule import Rule

from tunelab import show
from tunelab.baseline import run_baseline
from tunelab.compare import compare
from tunelab.data import build_data
from tunelab.demo.assets import bbc_news, minilm, set_aside
from tunelab.lab import open_lab
from tunelab.run import run_variant
from tunelab.spec import SPEC_FILE

# The demo spec: the first 128 tokens of an article carry its topic, and 60 optimizer steps of
# 16 articles (about 960 articles) keep each variant to a couple of minutes on two CPU cores.
SPEC = {
    "compass": {
        "kind": "research",
        "why": "Sort BBC News articles into their five desks, and learn whether fine-tuning "
        "beats what the pretrained encoder already knows.",
    },
    "hypothesis": {
        "behaviour": "A fine-tuned MiniLM sorts articles into topics better than a linear probe "
        "on its frozen embeddings.",
        "metric": "macro_f1",
        "min_effect": 0.01,
    },
    "guardrails": [
        {"metric": "f1", "scope": "every_class", "max_drop": 0.03},
        {"metric": "accuracy", "scope": "overall", "max_drop": 0.01},
    ],
    "task": {"type": "classification"},
    "data": {
        "sources": [{"type": "folder", "path": "{corpus}"}],
        "cleaning": [{"rule": "unicode_nfkc"}, {"rule": "whitespace"}],
        "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
    },
    "model": {"path": "{model}", "max_length": 128},
    "method": {
        "type": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.05,
        "target_modules": ["query", "key", "value", "dense"],
        "modules_to_save": ["classifier"],
    },
    "training": {
        "lr": 1e-3,
        "schedule": "linear",
        "warmup_steps": 6,
        "global_batch": 16,
        "microbatch": 16,
        "budget": {"steps": 60},
        "seed": 0,
    },
    "evaluation": {"split": "validation", "batch_size": 64},
}
# Full fine-tuning moves every weight: it needs a far smaller learning rate than an adapter.
FULL = {"method": {"type": "full"}, "training.lr": 5e-5}


def write_spec(lab: Path) -> Path:
    text = yaml.safe_dump(SPEC, sort_keys=False)
    text = text.replace("'{corpus}'", str(bbc_news())).replace("'{model}'", str(minilm()))
    lab.mkdir(parents=True, exist_ok=True)
    (lab / SPEC_FILE).write_text("# tunelab demo: BBC News topic classification\n" + text)
    return lab / SPEC_FILE


def run(lab: Path, console: Console, quiet: bool = False) -> dict:
    out = Console(quiet=True) if quiet else console
    progress = None if quiet else show.console(stderr=True)
    started = time.perf_counter()
    moved = set_aside(lab)
    write_spec(lab)
    handle = open_lab(lab)
    spec = handle.spec

    out.print(Rule("[bold]tunelab demo: BBC News topics on all-MiniLM-L6-v2"))
    out.print(
        f"lab: {handle.path}" + (f"  (the previous demo lab was moved to {moved})" if moved else "")
    )
    out.print(f"[bold]Question.[/] {spec.hypothesis.behaviour}")
    out.print(
        f"Primary metric {spec.hypothesis.metric}, minimum effect "
        f"{spec.hypothesis.min_effect}; guardrails: "
        + "; ".join(
            f"{g.metric} ({g.scope}) may drop at most {g.max_drop}" for g in spec.guardrails
        )
    )

    out.print(Rule("1. The data"))
    report = build_data(spec, handle.path, handle.store)
    show.data(report, out)

    out.print(Rule("2. The baselines (validation split)"))
    baselines = run_baseline(handle, progress)
    show.baseline(baselines, out)

    out.print(Rule("3. The variants"))
    lora = run_variant(handle, "lora", progress)
    show.run(lora, out)
    why = "full fine-tuning needs a far smaller learning rate than LoRA"
    full = run_variant(open_lab(lab, FULL), "full", progress, reason=why)
    show.run(full, out)

    out.print(Rule("4. The verdict"))
    result = compare(handle)
    show.compare(result, out)
    _story(result, baselines, out)
    seconds = time.perf_counter() - started
    out.print(Rule())
    out.print(
        f"done in {seconds / 60:.1f} min. Explore it: `tunelab runs --lab {lab}`, "
        f"`tunelab compare --lab {lab} --json`."
    )
    return {
        "lab": str(handle.path),
        "data": report,
        "compare": result,
        "seconds": round(seconds, 1),
    }


def _story(result: dict, baselines: dict, out: Console) -> None:
    """Say in words what the table shows, including when the probe is hard to beat."""
    majority = next(r for r in baselines["runs"] if r["name"] == "majority")
    variants = [r for r in result["runs"] if r["kind"] == "variant"]
    for r in variants:
        gain = r["macro_f1"] - majority["metrics"]["macro_f1"]
        boot = r["vs_reference"]["bootstrap"]
        if boot["low"] > 0:
            against = "above"
        elif boot["high"] < 0:
            against = "below"
        else:
            against = "not distinguishable from"
        out.print(
            f"• {r['id']}: macro-F1 {show.pct(r['macro_f1'])}%, {100 * gain:+.1f} points over "
            f"the majority class; {100 * boot['delta']:+.1f} against {result['reference']}, "
            f"{against} it (95% CI) → [{show.VERDICT_STYLE[r['verdict']]}]{r['verdict']}[/]."
        )
    if not any(r["verdict"] == "improved" for r in variants):
        out.print(
            "A linear probe on frozen MiniLM embeddings is already strong on this easy topic "
            "task, and these short fine-tuning runs do not beat it: the honest answer to the "
            "question is no, not at this budget."
        )
