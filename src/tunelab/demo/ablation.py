"""The ablation demo: a small decoder trained from scratch on two real text sources, and four
questions asked one change at a time, read against a fifth (the seed), before a large run.

The sources ship offline: BBC News articles (`news`) and Debian manual pages (`manuals`), two
sources of one mixture. A byte-level BPE is trained on the train split, a ~4.5M-parameter
Llama-style decoder is built from its config, and a reference run (all heads, RoPE in every
layer, a dense MLP, the manuals upsampled to half the sequences) is set against five variants,
each changing one key from it: first its seed alone (the noise of training itself, which the
paired interval over documents does not see), then grouped key/value heads, layers without
positions, a mixture of experts at matched active parameters, and the mixture weight of the
small source. Every run sees the same token budget and validation documents; `compare` pairs
them per document in bits per byte with intervals, and the report draws their loss curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tunelab.data import build_data
from tunelab.demo.assets import bbc_news, manpages
from tunelab.demo.report import open_demo
from tunelab.stages.baseline import run_baseline
from tunelab.stages.check.steps import run_check
from tunelab.stages.compare.compute import mismatched
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.run.ablate import run_ablation
from tunelab.stages.run.variant import run_variant
from tunelab.views import check as check_view
from tunelab.views import compare as compare_view
from tunelab.views import data as data_view
from tunelab.views import runs as runs_view

# About 4.5M parameters (a 4,096-token BPE, 4 layers of width 256), sequences of 256 tokens and
# a budget of 262k tokens per run (64 steps of 16 sequences) keep each run to about a minute and
# a half on two CPU cores, the whole demo to about 9 minutes. The manuals (~90k tokens) are
# upsampled to half the sequences by their weight of 1 against the news (~1.2M tokens): the
# mixture question asks what that costs.
SPEC = {
    "compass": {
        "kind": "research",
        "why": "Settle attention, positions, experts and the data mixture with small runs "
        "before paying for a large one.",
    },
    "hypothesis": {
        "behaviour": "One architecture or data change lowers validation bits per byte of a small "
        "decoder trained from scratch on news and manual pages.",
        "metric": "bits_per_byte",
        "min_effect": 0.01,
    },
    "guardrails": [{"metric": "bits_per_byte", "scope": "every_source", "max_drop": 0.02}],
    "task": {"type": "pretrain", "sequence_length": 256, "boundaries": "mask"},
    "data": {
        "sources": [
            {"type": "folder", "path": "{news}", "name": "news"},
            {"type": "jsonl", "path": "{manuals}", "name": "manuals"},
        ],
        "fields": {"text": "text"},
        "split": {"train": 0.92, "validation": 0.04, "test": 0.04, "seed": 0},
        "mixture": {"weights": {"news": 1, "manuals": 1}},
        "allow_outside_lab": True,  # the data is read where it is installed
    },
    "model": {
        "init": "scratch",
        "max_length": 256,
        "arch": {
            "hidden_size": 256,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 8,
            "intermediate_size": 768,
        },
        "bpe": {"vocab_size": 4096},
    },
    "method": {"type": "full"},
    "training": {
        "lr": 2e-3,
        "schedule": "wsd",
        "warmup_steps": 4,
        "global_batch": 16,
        "microbatch": 8,
        "budget": {"tokens": 262_144},
        "seed": 0,
        "max_grad_norm": 1.0,
    },
    "evaluation": {"split": "validation", "batch_size": 16},
}


@dataclass(frozen=True)
class Question:
    title: str
    assignment: str
    """The one change, as `tunelab ablate` takes it."""
    reference: str
    variant: str


QUESTIONS = (
    Question(
        "Noise: how far apart are two runs of the reference that differ only in their seed "
        "(weights drawn and batches ordered anew)?",
        "training.seed=1",
        "seed 0",
        "seed 1",
    ),
    Question(
        "Attention: every head its own keys and values (MHA), or 4 query heads per key/value "
        "head (GQA)?",
        "model.arch.num_key_value_heads=2",
        "MHA",
        "GQA",
    ),
    Question(
        "Positions: RoPE in every layer, or none in every other layer (NoPE, as SmolLM3)?",
        "model.arch.rope.nope_layers=[1,3]",
        "RoPE everywhere",
        "NoPE in layers 1 and 3",
    ),
    Question(
        "Experts: a dense MLP, or 4 experts with 2 per token at the same active width (MoE)?",
        "model.arch.moe.num_experts=4",
        "dense",
        "MoE",
    ),
    Question(
        "Data: the manuals upsampled to half the sequences, or sampled by their size (1:13)?",
        "data.mixture.weights.manuals=0.08",
        "manuals upsampled",
        "manuals by size",
    ),
)


def run(lab: Path, console: Console, quiet: bool = False, overrides: dict | None = None) -> dict:
    paths = {"news": bbc_news(), "manuals": manpages()}
    title = "architecture and mixture ablations of a small decoder from scratch"
    report = open_demo(lab, title, SPEC, paths, console, quiet, overrides)
    out, handle, progress = report.out, report.lab, report.progress

    report.section("The data: news articles and manual pages, two sources of one mixture")
    data = build_data(handle.spec, handle.path, handle.store)
    data_view.data(data, out)

    report.section("The preflight (tunelab check, on a slice)")
    check = run_check(handle, progress)
    check_view.check(check, out)

    report.section("The baseline: the untrained model")
    baselines = run_baseline(handle, progress)
    runs_view.baseline(baselines, out)

    report.section("The reference: MHA, RoPE in every layer, a dense MLP, manuals upsampled")
    reference = run_variant(handle, "reference", progress)
    runs_view.run(reference, out)

    ablations = []
    for question in QUESTIONS:
        report.section(f"{question.title}  ({question.assignment})")
        ablation = run_ablation(handle.path, question.assignment, reference["id"], progress)
        runs_view.ablation(ablation, out)
        ablations.append(ablation)

    report.section("The verdicts, each variant against the reference")
    result = compare(handle, against=reference["id"])
    compare_view.compare(result, out)

    report.section("What the evidence settles at this scale")
    answers = _story(result, ablations, handle.store, out)

    report.section("The lab report")
    from tunelab.stages.report.html import write_report

    page = write_report(handle)
    out.print(f"The lab report, loss curves included: {page['file']}")
    return {
        "lab": str(handle.path),
        "data": data,
        "check": check,
        "reference": reference["id"],
        "ablations": ablations,
        "compare": result,
        "answers": answers,
        "report": page,
        "seconds": report.finish("runs", "compare"),
    }


def _story(result: dict, ablations: list[dict], store, out: Console) -> list[dict]:
    """One sentence per question: the paired reduction in bits per byte with its interval, what
    it does and does not settle, and whether the two runs spent the same compute."""
    rows = {r["id"]: r for r in result["runs"]}
    reference = store.read_record(result["reference"])
    answers: list[dict] = []
    for question, ablation in zip(QUESTIONS, ablations, strict=True):
        (variant,) = ablation["runs"]
        row = rows[variant["id"]]
        boot = row["vs_reference"]["bootstrap"]
        answer = {
            "question": question.title,
            "change": question.assignment,
            "run": variant["id"],
            "verdict": row["verdict"],
            "bits_per_byte": row["bits_per_byte"],
            "reduction": boot["delta"],
            "low": boot["low"],
            "high": boot["high"],
            "per_source": {
                source: check["delta"]
                for rail in row.get("guardrails", [])
                for source, check in rail["checks"].items()
                if rail["scope"] == "every_source"
            },
            "compute": {
                name: list(pair)
                for name, pair in mismatched(reference, store.read_record(variant["id"])).items()
            },
        }
        if answers:  # the first question is the seed: the others are read against it
            said = _sentence(question, answer, result["min_effect"])
            said += " " + _against_seed(answer, answers[0])
        else:
            said = _seed_sentence(answer)
        answers.append(answer)
        out.print(f"• {question.title}\n  {said}")
    out.print(_settled(QUESTIONS, answers))
    return answers


def _seed_sentence(seed: dict) -> str:
    delta, low, high = (1000 * seed[k] for k in ("reduction", "low", "high"))
    return (
        f"Seed 1 against seed 0: {delta:+.1f} mbit/byte (95% CI {low:+.1f} to {high:+.1f}). The "
        "interval resamples documents, not training runs, so it does not hold the noise of "
        f"training itself; this {abs(delta):.1f} mbit/byte is the yardstick for the answers below."
    )


def _beyond_seed(answer: dict, seed: dict) -> tuple[bool, list[tuple[str, float, float]]]:
    """Did the change move bits per byte more than twice what a new seed alone moved, overall,
    and on which sources (each with the change's and the seed's delta there)?"""
    overall = abs(answer["reduction"]) > 2 * abs(seed["reduction"])
    sources = [
        (source, d, seed["per_source"][source])
        for source, d in answer["per_source"].items()
        if source in seed["per_source"] and abs(d) > 2 * abs(seed["per_source"][source])
    ]
    return overall, sources


def _against_seed(answer: dict, seed: dict) -> str:
    """The change against the seed's yardstick: the paired interval resamples documents, not
    training runs, so a difference within the seed's reach is not the change's."""
    floor = 1000 * abs(seed["reduction"])
    overall, sources = _beyond_seed(answer, seed)
    if overall:
        return (
            f"That is more than twice the {floor:.1f} mbit/byte a new seed alone moved the "
            "reference."
        )
    said = (
        f"A new seed alone moved the reference by {floor:.1f} mbit/byte, so one run each "
        "cannot tell this change from the luck of the draw overall"
    )
    if not sources:
        return said + ": repeat both over seeds before deciding."
    return (
        said
        + "; but "
        + ", ".join(
            f"on {source} it moved {1000 * d:+.1f} mbit/byte against the seed's "
            f"{1000 * f:+.1f} there"
            for source, d, f in sources
        )
        + ", beyond the luck of the draw."
    )


def _settled(questions: tuple[Question, ...], answers: list[dict]) -> str:
    """The closing sentence: which questions this scale settles and which it does not."""
    seed, settled, open_ = answers[0], [], []
    for question, answer in zip(questions[1:], answers[1:], strict=True):
        overall, sources = _beyond_seed(answer, seed)
        (settled if overall or sources else open_).append(question.variant)
    said = "Settled at this scale, beyond a seed's reach: " + (", ".join(settled) or "none")
    said += "; not settled by one run each: " + (", ".join(open_) or "none") + ". "
    return said + (
        "Small runs rank choices for a model of this size, data and budget: a choice that a "
        "large run will rely on should be seen again over seeds and at a second scale (a wider "
        "model, more tokens) before it is trusted."
    )


def _sentence(question: Question, answer: dict, min_effect: float | None) -> str:
    delta, low, high = (1000 * answer[k] for k in ("reduction", "low", "high"))
    said = f"{delta:+.1f} mbit/byte (95% CI {low:+.1f} to {high:+.1f}) for {question.variant}: "
    smallest = 1000 * (min_effect or 0)
    better, worse = (question.variant, question.reference)
    if high < 0:
        better, worse = worse, better
    if low > 0 or high < 0:
        said += f"{better} did better than {worse} beyond the noise"
        if abs(delta) < smallest:
            said += f", by less than the {smallest:g} mbit/byte that would count"
    else:
        said += "the two cannot be told apart on these validation documents at this budget"
    said += f"; verdict {answer['verdict']}."
    compute = answer["compute"]
    if not compute:
        return said + " Parameters and FLOPs per token are matched (within 5%)."
    if set(compute) == {"total parameters"}:
        before, after = compute["total parameters"]
        return (
            said + f" Active parameters and FLOPs per token are matched; the experts hold "
            f"{after / before:.2f}x the parameters in all, as a mixture of experts does."
        )
    named = ", ".join(f"{k} {a:,} -> {b:,}" for k, (a, b) in compute.items())
    return (
        said + f" Compute is not matched ({named}): the difference mixes the change with the "
        "model's size."
    )
