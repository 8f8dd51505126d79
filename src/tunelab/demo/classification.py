"""The classification demo: BBC News topics on all-MiniLM-L6-v2, told as a short lab report.

It chains the real stages (spec, data with its duplicates, baselines, a LoRA run whose new head
starts from a linear probe (LP-FT), an ablation of that one choice, compare with verdicts, and
the sealed final on the run chosen on validation) on a lab folder the user can go on exploring
with every other command.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tunelab.data import build_data
from tunelab.demo.assets import bbc_news, minilm
from tunelab.demo.report import (
    broken_runs,
    check_new_wiring,
    choose_for_final,
    cut_note,
    handover,
    open_demo,
    seed_note,
)
from tunelab.stages.baseline.measure import run_baseline
from tunelab.stages.check.steps import run_check
from tunelab.stages.compare.rules import LOSSES
from tunelab.stages.compare.two_level import SEEDS
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.final.sealed import run_final
from tunelab.stages.run.ablate import run_ablation
from tunelab.stages.run.variant import run_variant
from tunelab.views import check as check_view
from tunelab.views import compare as compare_view
from tunelab.views import data as data_view
from tunelab.views import final as final_view
from tunelab.views import runs as runs_view
from tunelab.views import style

# The demo spec: the first 128 tokens of an article carry its topic, and 60 optimizer steps of
# 16 articles (about 960 articles) keep each variant to a couple of minutes on two CPU cores.
# The LoRA adapts every linear layer of the blocks (the default) and its head starts from a
# linear probe on the head's own features (LP-FT, `method.head_init: probe`). No LoRA dropout:
# 60 steps see each article at most once, and on a CPU its masks on the 36 adapted layers'
# inputs cost more than a quarter of each step (bench/README.md, "LoRA dropout on a CPU").
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
        "sources": [{"type": "folder", "path": "{corpus}", "name": "bbcnews"}],
        "cleaning": [{"rule": "unicode_nfkc"}, {"rule": "whitespace"}],
        "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        "allow_outside_lab": True,  # the data is read where it is installed
    },
    "model": {"path": "{model}", "max_length": 128},
    "method": {
        "type": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.0,
        "modules_to_save": ["classifier"],
        "head_init": "probe",
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
# What LP-FT buys: the same LoRA run with a new, random head; one change, everything else equal.
ABLATION = "method.head_init=new"


def run(lab: Path, console: Console, quiet: bool = False, overrides: dict | None = None) -> dict:
    paths = {"corpus": bbc_news(), "model": minilm()}
    report = open_demo(
        lab, "BBC News topics on all-MiniLM-L6-v2", SPEC, paths, console, quiet, overrides
    )
    out, handle, progress = report.out, report.lab, report.progress

    report.section("The data")
    data = build_data(handle.spec, handle.path, handle.store)
    data_view.data(data, out)
    if said := cut_note(handle):
        out.print(said)

    report.section("The preflight (tunelab check, on a slice)")
    check = run_check(handle, progress)
    check_view.check(check, out)

    report.section("The baselines (validation split)")
    baselines = run_baseline(handle, progress)
    runs_view.baseline(baselines, out)

    report.section("The variant: LoRA, its head started from a linear probe (LP-FT)")
    lora = run_variant(handle, "lora", progress)
    runs_view.run(lora, out)

    report.section(f"An ablation of the LoRA run: {ABLATION}")
    ablation = run_ablation(
        handle.path, ABLATION, lora["id"], progress, prepare=check_new_wiring(report)
    )
    runs_view.ablation(ablation, out)

    report.section("The verdict")
    result = compare(handle)
    compare_view.compare(result, out)
    _story(result, baselines, out, {r["id"] for r in ablation["runs"]})
    for said in broken_runs(handle.store, result):
        out.print(said)

    report.section("The sealed final")
    chosen, reason = choose_for_final(result, out)
    final = run_final(handle, chosen, reason)
    final_view.final(final, out)

    report.section("The handover: export, verify, a rental plan, the lab report")
    handed = handover(report, chosen, merge=True)
    return {
        "lab": str(handle.path),
        "data": data,
        "check": check,
        "compare": result,
        "ablation": ablation,
        "final": final,
        **handed,
        **report.finish("runs", "compare"),
    }


def _story(result: dict, baselines: dict, out: Console, ablation_runs: set[str]) -> None:
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
            f"• {r['id']}: macro-F1 {style.pct(r['macro_f1'])}%, {100 * gain:+.1f} points over "
            f"the majority class; {100 * boot['delta']:+.1f} against {result['reference']}, "
            f"{against} it (95% CI) → [{style.VERDICT_STYLE[r['verdict']]}]{r['verdict']}[/]."
        )
    ablated = next((r for r in variants if r["id"] in ablation_runs and r.get("vs_parent")), None)
    if ablated:
        out.print(_heads_sentence(ablated))
    out.print(seed_note(result))
    out.print(_conclusion(result, variants))


def _heads_sentence(ablated: dict) -> str:
    """What LP-FT bought: the random-head run against its LP-FT parent, and on what basis."""
    boot = ablated["vs_parent"]["bootstrap"]
    how = (
        "beyond the seeds' noise"
        if boot["basis"] == SEEDS
        else "on these validation examples, on one seed each: whether a new seed would too "
        "is not measured here"
    )
    if boot["high"] < 0:
        said = f"LP-FT did better than a random head {how}"
    elif boot["low"] > 0:
        said = f"a random head did better than LP-FT {how}"
    else:
        said = "the two heads cannot be told apart on this validation split"
    return (
        f"What LP-FT bought: {ablated['id']} (a random head) against its parent "
        f"{ablated['vs_parent']['run']}: {100 * boot['delta']:+.1f} points of macro-F1 "
        f"(95% CI {100 * boot['low']:+.1f} to {100 * boot['high']:+.1f}); {said}."
    )


def _conclusion(result: dict, variants: list[dict]) -> str:
    """The answer to the question, from the verdicts against the reference."""
    reference = result["reference"]
    for word, how in (("improved", "beyond the seeds' noise"), ("improved on one seed", "")):
        won = [r["id"] for r in variants if r["verdict"] == word]
        if won:
            return f"{', '.join(won)} beat {reference} {how or 'on one seed each'}" + (
                ": whether a new seed would too is not measured here." if not how else "."
            )
    held = [r["id"] for r in variants if r["verdict"] == "guardrail unresolved"]
    if held:
        return (
            f"{', '.join(held)} gained on {reference}, but a guardrail is unresolved: more "
            "validation examples, or a limit accepted with a reason, would settle what it costs."
        )
    worse = [f"{r['id']} did {r['verdict']}" for r in variants if r["verdict"] in LOSSES]
    below = f" ({', '.join(worse)})" if worse else ""
    if reference.endswith("-probe"):
        score = next((r.get("macro_f1") for r in result["runs"] if r["id"] == reference), None)
        scored = f" scores {style.pct(score)}% macro-F1 and" if score is not None else ""
        return (
            f"A linear probe on frozen MiniLM embeddings ({reference}, mean-pooled, as the model "
            f"was trained to be used){scored} is not beaten by these short fine-tuning "
            f"runs{below}: the honest answer to the question is 'not shown at this budget'."
        )
    return f"No variant beats {reference}{below}: the answer is 'not shown at this budget'."
