"""The ablation demo: a small decoder trained from scratch on two real text sources, its noise
floor measured over seeds, and four questions asked one change at a time against it, before a
large run.

The sources ship offline: BBC News articles (`news`) and Debian manual pages (`manuals`), two
sources of one mixture. A byte-level BPE is trained on the train split, a ~4.5M-parameter
Llama-style decoder is built from its config, and a reference run (all heads, RoPE in every
layer, a dense MLP, the manuals upsampled to half the sequences) is trained over three seeds
(`tunelab noise`: the noise of training itself, which an interval over documents does not see),
then set against four variants, each changing one key from it: grouped key/value heads, layers
without positions, a mixture of experts at matched active parameters, and the mixture weight of
the small source. Every run sees the same token budget and validation documents; `compare`
pairs them per document in bits per byte, with intervals over the documents and over the
reference's seeds together, and the report draws their loss curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tunelab.data import build_data
from tunelab.demo.assets import bbc_news, manpages
from tunelab.demo.report import check_new_wiring, open_demo
from tunelab.stages.baseline.measure import run_baseline
from tunelab.stages.check.steps import run_check
from tunelab.stages.compare.compute import TOLERANCE, mismatched
from tunelab.stages.compare.rules import BROKEN_VERDICT
from tunelab.stages.compare.two_level import SEEDS
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.noise import measure_noise
from tunelab.stages.run.ablate import run_ablation
from tunelab.stages.run.variant import run_variant
from tunelab.views import check as check_view
from tunelab.views import compare as compare_view
from tunelab.views import data as data_view
from tunelab.views import runs as runs_view

# About 4.5M parameters (a 4,096-token BPE, 4 layers of width 256), sequences of 256 tokens and
# a budget of 197k tokens per run (48 steps of 16 sequences) keep each run to about a minute on
# two CPU cores; seven runs (the reference's three seeds, four variants) make the demo. The
# budget was 262k (64 steps) when the demo trained six runs: a quarter fewer steps pays for the
# noise floor's extra seeds and leaves every run a little less trained. The manuals (~90k
# tokens) are upsampled to half the sequences by their weight of 1 against the news (~1.2M
# tokens): the mixture question asks what that costs.
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
        "budget": {"tokens": 196_608},
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


NOISE_SEEDS = 3
"""Seeds of the reference, its own included, that measure the noise floor."""

QUESTIONS = (
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

    report.section(
        f"The noise floor: the reference over {NOISE_SEEDS} seeds (weights drawn and batches "
        "ordered anew), nothing else changed"
    )
    floor = measure_noise(handle.path, reference["id"], NOISE_SEEDS, progress)
    runs_view.noise(floor, out)

    ablations, checked = [], check_new_wiring(report)
    for question in QUESTIONS:
        report.section(f"{question.title}  ({question.assignment})")
        ablation = run_ablation(
            handle.path, question.assignment, reference["id"], progress, prepare=checked
        )
        runs_view.ablation(ablation, out)
        ablations.append(ablation)

    report.section("The verdicts, each variant against the reference's seeds")
    result = compare(handle, against=reference["id"])
    compare_view.compare(result, out)

    report.section("What the evidence settles at this scale")
    seed_control = _seed_control(result, out)
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
        "noise": floor,
        "seed_control": seed_control,
        "ablations": ablations,
        "compare": result,
        "answers": answers,
        "report": page,
        **report.finish("runs", f"compare --against {reference['id']}"),
    }


def _seed_control(result: dict, out: Console) -> list[dict]:
    """Each further seed of the reference against its first: what a new seed alone moves."""
    said = []
    for row in result["runs"]:
        if row.get("arm") != result["reference"]:
            continue
        vs = row["vs_first"]
        boot = vs["bootstrap"]
        delta, low, high = (1000 * boot[k] for k in ("delta", "low", "high"))
        excludes = boot["low"] > 0 or boot["high"] < 0
        out.print(
            f"• Seed control: {row['id']} (seed {_seed(row, result)}) against the reference: "
            f"{_moved(boot['delta'])} (reduction {delta:+.1f}; 95% CI over documents "
            f"{low:+.1f} to {high:+.1f}), "
            + ("an interval that excludes zero" if excludes else "an interval across zero")
            + f"; only the seed differs, so the verdict is {vs['verdict']}."
        )
        said.append({"run": row["id"], "delta": boot["delta"], "verdict": vs["verdict"]})
    return said


def _moved(reduction: float) -> str:
    """A reduction in words: less is better, so a positive reduction is bits per byte falling:
    `bits per byte fell by 37.8 mbit/byte`."""
    if reduction == 0:
        return "bits per byte unchanged"
    way = "fell" if reduction > 0 else "rose"
    return f"bits per byte {way} by {abs(1000 * reduction):.1f} mbit/byte"


def _seed(row: dict, result: dict) -> int | None:
    ref = next(r for r in result["runs"] if r["id"] == result["reference"])
    return next(s["seed"] for s in ref.get("seeds", []) if s["run"] == row["id"])


def _story(result: dict, ablations: list[dict], store, out: Console) -> list[dict]:
    """One sentence per question: the paired reduction in bits per byte, its interval over
    the documents and over the reference's seeds too, what that settles, and whether the two
    runs spent the same compute."""
    rows = {r["id"]: r for r in result["runs"]}
    reference = store.read_record(result["reference"])
    answers: list[dict] = []
    for question, ablation in zip(QUESTIONS, ablations, strict=True):
        (variant,) = ablation["runs"]
        row = rows[variant["id"]]
        boot = row["vs_reference"]["bootstrap"]
        record = store.read_record(variant["id"])
        answer = {
            "question": question.title,
            "change": question.assignment,
            "run": variant["id"],
            "verdict": row["verdict"],
            "bits_per_byte": row["bits_per_byte"],
            "reduction": boot["delta"],
            "low": boot["low"],
            "high": boot["high"],
            "basis": boot["basis"],
            "example": boot["example"],
            "seed_sd": (boot.get("seeds") or {}).get("seed_sd"),
            "per_source": {
                source: check
                for rail in row.get("guardrails", [])
                for source, check in rail["checks"].items()
                if rail["scope"] == "every_source"
            },
            "compute": {name: list(pair) for name, pair in mismatched(reference, record).items()},
            "routing": ((record.get("metrics") or {}).get("routing") or {}).get("warning"),
        }
        answers.append(answer)
        out.print(f"• {question.title}\n  {_sentence(question, answer, result['min_effect'])}")
    out.print(_settled(QUESTIONS, answers))
    return answers


def _sentence(question: Question, answer: dict, min_effect: float | None) -> str:
    delta, low, high = (1000 * answer[k] for k in ("reduction", "low", "high"))
    ex = {k: 1000 * answer["example"][k] for k in ("low", "high")}
    said = (
        f"with {question.variant}, {_moved(answer['reduction'])} (reduction {delta:+.1f}; "
        f"95% CI over the documents alone {ex['low']:+.1f} to {ex['high']:+.1f}"
    )
    if answer["basis"] == SEEDS:
        said += (
            f", with the reference's seed noise (sd {1000 * answer['seed_sd']:.1f} mbit/byte) "
            f"{low:+.1f} to {high:+.1f}): "
        )
    else:
        said += "; no seed noise known): "
    smallest = 1000 * (min_effect or 0)
    better, worse = (question.variant, question.reference)
    if high < 0:
        better, worse = worse, better
    if low > 0 or high < 0:
        said += f"{better} did better than {worse} " + (
            "beyond the seeds' reach"
            if answer["basis"] == SEEDS
            else "on these documents, on one seed each: whether a new seed would too is not "
            "measured"
        )
        if abs(delta) < smallest:
            said += f", by less than the {smallest:g} mbit/byte that would count"
    elif ex["low"] > 0 or ex["high"] < 0:
        said += (
            "the documents tell the two apart, but not beyond the seeds' noise: the interval "
            "with it reaches across zero"
        )
    else:
        said += "the two cannot be told apart on these validation documents at this budget"
    said += f"; verdict {answer['verdict']}."
    sources = _sources_beyond_seeds(answer)
    if sources:
        said += " On " + ", ".join(sources) + "."
    said += " " + _compute_sentence(answer["compute"])
    if answer.get("routing"):  # an experts variant whose router left experts idle
        said += f" {answer['routing'][0].upper()}{answer['routing'][1:]}."
    return said


def _sources_beyond_seeds(answer: dict) -> list[str]:
    """The sources whose own seed-aware interval excludes zero, each with its reduction."""
    return [
        f"{source} alone {_moved(c['delta'])} (reduction {1000 * c['low']:+.1f} to "
        f"{1000 * c['high']:+.1f}), beyond the seeds' reach"
        for source, c in _beyond(answer)
    ]


def _beyond(answer: dict) -> list[tuple[str, dict]]:
    """The sources whose own seed-aware interval excludes zero, with their checks."""
    return [
        (source, c)
        for source, c in answer["per_source"].items()
        if answer["basis"] == SEEDS and (c["low"] > 0 or c["high"] < 0)
    ]


def _compute_sentence(compute: dict) -> str:
    if not compute:
        return f"Parameters and FLOPs per token are matched (within {TOLERANCE:.0%})."
    if set(compute) == {"total parameters"}:
        before, after = compute["total parameters"]
        return (
            f"Active parameters and FLOPs per token are matched; the experts hold "
            f"{after / before:.2f}x the parameters in all, as a mixture of experts does."
        )
    named = ", ".join(f"{k} {a:,} -> {b:,}" for k, (a, b) in compute.items())
    return (
        f"Compute is not matched ({named}): the difference mixes the change with the model's size."
    )


def _settled(questions: tuple[Question, ...], answers: list[dict]) -> str:
    """The closing sentences: which questions this scale settles over the seeds' noise, overall
    or on one source only, and how large a change the reference's seeds can settle at all."""
    overall, on_source, open_ = [], [], []
    for question, answer in zip(questions, answers, strict=True):
        if answer["basis"] == SEEDS and (answer["low"] > 0 or answer["high"] < 0):
            overall.append(f"{question.variant} ({answer['verdict']})")
        elif _beyond(answer):
            moved = ", ".join(
                f"{source} {'fell' if c['delta'] > 0 else 'rose'}" for source, c in _beyond(answer)
            )
            broken = "; guardrail broken" if answer["verdict"] == BROKEN_VERDICT else ""
            on_source.append(f"{question.variant} ({moved}{broken})")
        else:
            open_.append(question.variant)
    said = (
        f"Beyond the seeds' reach overall: {', '.join(overall) or 'none'}; on one source only: "
        f"{', '.join(on_source) or 'none'}; within the seeds' noise: {', '.join(open_) or 'none'}."
    )
    looks = sum(len(a["per_source"]) for a in answers if a["basis"] == SEEDS)
    if on_source and looks > 1:  # a source's answer is one of many intervals looked at
        said += (
            f" A source's answer is one of {looks} per-source intervals: were no change real, "
            f"one or more would fall beyond the seeds' reach about {1 - 0.95**looks:.0%} of "
            "the time by chance."
        )
    widths = [1000 * (a["high"] - a["low"]) / 2 for a in answers if a["basis"] == SEEDS]
    if widths:
        said += (
            f" With the reference's seeds, an interval is about ±{min(widths):.0f} mbit/byte "
            "wide: a smaller change cannot be settled here whatever its true size, so 'within "
            "the seeds' noise' is not 'no effect'; more seeds of the reference narrow it."
        )
    return said + (
        " The variants ran one seed each, judged against the reference's measured spread; a "
        "choice that a large run will rely on should be seen again over its own seeds and at a "
        "second scale (a wider model, more tokens) before it is trusted."
    )
