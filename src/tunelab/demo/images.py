"""The image demo: Twemoji sorted into their Unicode emoji groups on EfficientNet-Lite0, told as
a short lab report.

It chains the real stages on a lab folder the user can go on exploring: a seeded sample of
emoji images written into the lab (`demo.image_data`), the ImageNet-trained EfficientNet-Lite0
converted once into a folder transformers opens (`demo.image_base`), data with its duplicates,
inspection with a contact sheet per group as stored and as the model receives it, the
preflight, the baselines (majority, and a linear probe on the frozen ImageNet features), a LoRA
whose head starts from that probe (LP-FT), an ablation of one choice (full fine-tuning instead),
compare with verdicts, the sealed final and the handover.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tunelab.data import build_data
from tunelab.demo.image_base import IMAGENET, check_photos, lite0_folder
from tunelab.demo.image_data import LABELS, write_image_folder
from tunelab.demo.report import (
    broken_runs,
    check_new_wiring,
    choose_for_final,
    handover,
    open_demo,
    seed_note,
)
from tunelab.stages.baseline.measure import run_baseline
from tunelab.stages.check.steps import run_check
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.final.sealed import run_final
from tunelab.stages.inspect.lab import inspect_lab
from tunelab.stages.run.ablate import run_ablation
from tunelab.stages.run.variant import run_variant
from tunelab.views import check as check_view
from tunelab.views import compare as compare_view
from tunelab.views import data as data_view
from tunelab.views import final as final_view
from tunelab.views import inspect as inspect_view
from tunelab.views import runs as runs_view
from tunelab.views import style

IMAGES = "emoji"
"""The lab's folder of images, one sub-folder per group (written by the demo)."""
BASE = "efficientnet-lite0"
"""The lab's folder of the converted base model."""

# The demo spec: 40 optimizer steps of 16 images (about two passes over the train split) keep
# each variant to a minute or two on two CPU cores at 224x224. Near duplicates at 4 bits of the
# difference hash: the skin tones of one gesture are 0-3 bits apart, while at 5-6 bits 72x72
# emoji of different groups begin to collide (a monkey and a white-haired woman).
SPEC = {
    "compass": {
        "kind": "research",
        "why": "Sort emoji into their Unicode groups, and learn whether fine-tuning beats what "
        "an ImageNet model's features already tell.",
    },
    "hypothesis": {
        "behaviour": "A fine-tuned EfficientNet-Lite0 sorts emoji into their Unicode groups "
        "better than a linear probe on its frozen ImageNet features.",
        "metric": "macro_f1",
        "min_effect": 0.02,
    },
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
    "task": {"type": "image_classification", "labels": list(LABELS)},
    "data": {
        "sources": [{"type": "image_folder", "path": IMAGES}],
        "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        "dedup": {"image_hamming": 4},
    },
    "model": {"path": BASE},
    "method": {"type": "lora", "r": 8, "alpha": 16, "dropout": 0.0, "head_init": "probe"},
    "training": {
        "lr": 1e-3,
        "schedule": "linear",
        "warmup_steps": 4,
        "global_batch": 16,
        "microbatch": 16,
        "budget": {"steps": 40},
        "seed": 0,
    },
    "evaluation": {"split": "validation", "batch_size": 32},
}
# What training every weight buys over the LoRA: one change, everything else equal.
ABLATION = "method.type=full"


def run(lab: Path, console: Console, quiet: bool = False, overrides: dict | None = None) -> dict:
    report = open_demo(
        lab,
        "Twemoji by Unicode emoji group on EfficientNet-Lite0",
        SPEC,
        {},
        console,
        quiet,
        overrides,
        before=_materials,
    )
    out, handle, progress = report.out, report.lab, report.progress

    report.section("The data")
    written = report.materials
    out.print(
        f"{written['images']} Twemoji PNGs, a seeded sample of {written['per_label']} per group "
        f"({written['source']['package']} {written['source']['version']}, "
        f"{written['source']['licence']}; groups from {written['groups']['package']}); the base "
        f"{BASE}: ImageNet weights converted once into {handle.path / BASE}."
    )
    out.print(photo_line(written["photos"]))
    data = build_data(handle.spec, handle.path, handle.store)
    data_view.data(data, out)

    report.section("The inspection: sizes, modes, and the images as the model receives them")
    seen = inspect_lab(handle)
    inspect_view.inspect(seen, out)

    report.section("The preflight (tunelab check, on a slice)")
    check = run_check(handle, progress)
    check_view.check(check, out)

    report.section("The baselines (validation split)")
    baselines = run_baseline(handle, progress)
    runs_view.baseline(baselines, out)

    report.section("The variant: LoRA on the convolutions, its head started from the probe")
    lora = run_variant(handle, "lora", progress, allow_warnings=_allowed(seen))
    runs_view.run(lora, out)

    report.section(f"An ablation of the LoRA run: {ABLATION}")
    ablation = run_ablation(
        handle.path, ABLATION, lora["id"], progress, prepare=check_new_wiring(report)
    )
    runs_view.ablation(ablation, out)

    report.section("The verdict")
    result = compare(handle)
    compare_view.compare(result, out)
    out.print(seed_note(result))
    out.print(conclusion(result))
    for said in broken_runs(handle.store, result):
        out.print(said)

    report.section("The sealed final")
    chosen, reason = choose_for_final(result, out)
    final = run_final(handle, chosen, reason)
    final_view.final(final, out)

    report.section("The handover: export, verify, a rental plan, the lab report")
    handed = handover(report, chosen)
    return {
        "lab": str(handle.path),
        "materials": written,
        "data": data,
        "inspect": seen,
        "check": check,
        "compare": result,
        "ablation": ablation,
        "final": final,
        **handed,
        **report.finish("inspect", "runs", "compare"),
    }


def _materials(lab: Path) -> dict:
    """The images and the base, written into the new lab before it opens, and the base's
    ImageNet answers on real photos (a wrong conversion would show there first)."""
    written = write_image_folder(lab / IMAGES)
    written["base"] = lite0_folder(lab / BASE)
    written["photos"] = check_photos(lab / BASE)
    return written


EXPECTED = {"chelsea.png": "cat", "coffee.png": "espresso", "rocket.jpg": "rocket"}
"""The photos whose ImageNet class is not in doubt, and the classes they must fall in."""

ARTICLE = {"cat": "a", "espresso": "an", "rocket": "a"}


def photo_line(photos: list[dict]) -> str:
    """The base's top-1 on each photo with an expected class, and whether it is one of them."""
    said = []
    for p in photos:
        kind = EXPECTED.get(p["photo"])
        if kind is None:
            continue
        ok = p["index"] in IMAGENET[kind]
        said.append(
            f"{p['photo']} -> ImageNet class {p['index']} ({p['probability']:.0%}), "
            + (
                f"{ARTICLE[kind]} {kind} class"
                if ok
                else f"[red]NOT {ARTICLE[kind]} {kind} class[/]"
            )
        )
    return "The converted base on scikit-image's photos: " + "; ".join(said) + "."


def _allowed(seen: dict) -> str | None:
    """A reason to train past blocking findings, recorded with the run, when there are any."""
    blocking = [f["code"] for f in seen["findings"] if f["blocking"]]
    return f"the demo trains past {', '.join(blocking)} to show it" if blocking else None


def conclusion(result: dict) -> str:
    """The answer to the question, from the verdicts against the reference and the scores."""
    metric, reference = result["primary_metric"], result["reference"]
    scores = {r["id"]: r[metric] for r in result["runs"]}
    variants = [r for r in result["runs"] if r["kind"] == "variant"]
    best = max(variants, key=lambda r: r[metric])
    said = (
        f"The best variant, {best['id']}, scores {style.pct(best[metric])}% macro-F1 against "
        f"{style.pct(scores[reference])}% for {reference}: verdict {best['verdict']}."
    )
    won = [r["id"] for r in variants if r["verdict"] == "improved"]
    if won:
        return f"{said} Fine-tuning beat the reference beyond the seeds' noise ({', '.join(won)})."
    won = [r["id"] for r in variants if r["verdict"] == "improved on one seed"]
    if won:
        return (
            f"{said} Fine-tuning beat the reference on one seed each ({', '.join(won)}): whether "
            "a new seed would too is not measured here."
        )
    if best["verdict"] == "guardrail unresolved":
        return (
            f"{said} It gained, but a guardrail is unresolved: more validation images would say "
            "what it costs."
        )
    b = (best.get("vs_reference") or {}).get("bootstrap")
    if b is None or b["high"] < 0:
        return f"{said} No variant beat the reference."
    return (
        f"{said} No variant beat the reference, and none is shown to add nothing either: the "
        f"best's interval, {100 * b['low']:+.1f} to {100 * b['high']:+.1f} points, holds gains "
        f"and losses alike; {best.get('n', 'these')} validation images on one seed cannot tell "
        "them apart at this budget."
    )
