"""The model card: Hugging Face front matter, then the evidence in plain words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tunelab.core.allowed import past_words
from tunelab.core.data_sections import Fields
from tunelab.stages.export.card_serving import gguf_lines, serving_lines
from tunelab.stages.export.load import is_scratch
from tunelab.tasks import units

# a language model's metrics (bits per byte, loss, perplexity) are not rates: shown as numbers
from tunelab.tasks.pretrain import overall_metrics as PLAIN

COUNTS = ("n", "bytes", "tokens")
"""What a metrics record counts (examples, a language model's bytes and tokens): no result."""


def model_card(info: dict) -> str:
    return "---\n" + yaml.safe_dump(front_matter(info), sort_keys=False) + "---\n\n" + body(info)


def front_matter(info: dict) -> dict:
    base, spec = info["base_model"], info["spec"]
    task = info["task"]
    pipeline = "text-classification" if info["kind"] == "encoder" else "text-generation"
    metrics = [
        {"type": k, "value": round(v, 4), "name": f"validation {k}"}
        for k, v in info["validation_metrics"].items()
        if isinstance(v, int | float) and k not in COUNTS
    ]
    final = info.get("final")
    if final:
        # a repeated look at the test split is no unbiased estimate: said where tools read it
        opened = len(info.get("test_access_log") or []) or final.get("n", 1)
        seen = f" (test split opened {opened} times; this is look {final.get('n')})"
        marked = seen if final.get("repeated") else ""
        metrics += [
            {"type": k, "value": round(v, 4), "name": f"test {k}{marked}"}
            for k, v in final["metrics"].items()
            if isinstance(v, int | float) and k not in COUNTS
        ]
    return {
        "base_model": base["name"],
        "library_name": "peft" if info["method"] == "lora" else "transformers",
        "tags": ["tunelab", info["method"], task],
        "pipeline_tag": pipeline,
        "model-index": [
            {
                "name": info["run"],
                "results": [
                    {
                        "task": {"type": pipeline},
                        "dataset": {
                            "name": f"data version {info['data_version']}",
                            "type": "local",
                        },
                        "metrics": metrics,
                    }
                ],
            }
        ],
        "tunelab": {"base_weights_sha256": base["weights_sha256"], "compass": spec.get("compass")},
    }


def _prompts_as_trained(info: dict) -> str:
    """How to build the prompt the model was trained on, as a server builds it."""
    if Fields.model_validate(info["spec"]["data"].get("fields") or {}).conversations:
        return (
            "Prompts as trained: the conversation's turns before the answer, rendered by the "
            "bundle's chat template with its generation prompt and tokenised whole without "
            "adding special tokens (as a server renders a conversation); a conversation "
            f"longer than {info['spec']['model']['max_length']} tokens lost its oldest turns "
            "whole, the system turn kept."
        )
    return (
        "Prompts as trained: template.json's `prompt` with the input text in place of "
        "its `placeholder`, tokenised whole without adding special tokens, after its "
        "`bos_ids` (as a server that fills the template tokenises it)."
    )


def _value(metric: str, x: float) -> str:
    """A count as it is, a language model's metric as a number, a rate in percent."""
    if isinstance(x, int):
        return str(x)
    return f"{x:.4f}" if metric in PLAIN else f"{100 * x:.1f}"


def _min_effect(hyp: dict) -> str:
    """`minimum effect +10.0 points`, in the units compare and the report use (`units`)."""
    metric, effect = hyp.get("metric"), hyp.get("min_effect")
    if metric is None or not isinstance(effect, int | float):
        return f"minimum effect {effect}"
    return units.effect(metric, effect)


def _sentence(text: str) -> str:
    """A spec's sentence ended as one (a behaviour written without its full stop ran into the
    card's next sentence)."""
    text = text.strip()
    return text if text.endswith((".", "!", "?", ")")) else f"{text}."


def _as_written(value) -> str:
    """A failure's answer as the model writes it, as inline code: text as it is, anything else
    as JSON; its line breaks shown as ↵ and its backticks inside a longer run of them, so an
    answer of several lines (a format lab's) or with a backtick stays one code span."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\r\n", "\n").replace("\n", "↵")
    if not text:
        return "(nothing)"
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _built(info: dict) -> str:
    """A model built from scratch, in numbers: its parameters (active per token, where experts
    leave some out) and the length of the sequences it trained on; nothing for another."""
    base, spec = info["base_model"], info["spec"]
    params = base.get("params") or {}
    if base.get("init") != "scratch" or not params.get("total"):
        return ""
    active = params.get("active")
    shown = f"{params['total']:,} parameters"
    if active and active != params["total"]:
        shown += f" ({active:,} active per token)"
    trained = (spec.get("task") or {}).get("sequence_length") or spec["model"].get("max_length")
    return f" It has {shown} and trained on sequences of {trained} tokens."


def body(info: dict) -> str:
    spec, lim = info["spec"], info["limitations"]
    hyp = spec.get("hypothesis") or {}
    scratch = is_scratch(info)
    how = f"trained from scratch as {info['base_model']['name'].removeprefix('scratch ')}"
    lines = [
        f"# {info['run']}: "
        + (how if scratch else f"{info['method']} on {info['base_model']['name']}"),
        "",
    ]
    bound = (
        "It was trained from scratch: its base is the config and tokenizer in `base/`, which "
        "hash to"
        if scratch
        else "It was trained on the base whose weights hash to"
    )
    checked = (
        "`tunelab verify` checks it"
        if scratch
        else "`tunelab.load_bundle` and `tunelab verify` refuse any other base; PEFT's own "
        "`PeftModel.from_pretrained` does not check, and loads it on any base of the same shape"
    )
    lines += [
        f"Trained by tunelab on data version `{info['data_version']}` for the task "
        f"`{info['task']}`. {bound} "
        f"`{info['base_model']['weights_sha256']}` ({checked}).{_built(info)}",
        "",
        "## Hypothesis",
        "",
        f"{_sentence(hyp.get('behaviour', '(none recorded)'))} Primary metric "
        f"`{hyp.get('metric')}`, "
        f"{_min_effect(hyp)}.",
        "",
        "## Verdict",
        "",
        _verdict_line(info.get("comparison"), hyp),
    ]
    lines += warning_lines(info["run"], lim)
    lines += _validation_lines(info.get("training") or {})
    lines += _numbers_lines(info)
    lines += serving_lines(info.get("serving"), info["kind"])
    lines += gguf_lines(info.get("gguf"), info["method"])
    lines += _limitations_lines(lim)
    lines += _use_lines(info)
    return "\n".join(lines)


def warning_lines(run: str, lim: dict) -> list[str]:
    """Beside the verdict: the blocking findings the run trained past, and what the comparison
    that judged it warned of it (one answer for every example, a probe start that broke)."""
    said = [past_words(run, lim["trained_past"])] if lim.get("trained_past") else []
    said += lim.get("warnings") or []
    return [line for w in said for line in ("", f"**Warning:** {w.rstrip('.')}.")]


def _verdict_line(comp: dict | None, hyp: dict) -> str:
    """The verdict of the comparison the card names, with its interval and what it counts."""
    if not comp:
        return "No comparison has judged this run."
    b = comp["row"]["vs_reference"]["bootstrap"]
    if hyp.get("metric") in PLAIN:  # lower is better: compare reports the reduction
        moved = f"reduced by {b['delta']:+.4f}"
        interval = f"({b['low']:+.4f}, {b['high']:+.4f})"
    else:
        moved = f"{100 * b['delta']:+.1f} points"
        interval = f"({100 * b['low']:+.1f}, {100 * b['high']:+.1f})"
    counted = (
        "over the seeds and the validation examples"
        if b.get("basis") == "seeds and examples"
        else "over the validation examples of one seed (how far a new seed would move it is "
        "not measured; `tunelab noise` measures it)"
    )
    return (
        f"**{comp['row']['verdict'] or 'no verdict'}** against `{comp['reference']}` "
        f"(comparison `{comp['id']}`): {hyp.get('metric')} {moved}, "
        f"95% paired bootstrap interval {interval}, {counted}."
    )


def _numbers_lines(info: dict) -> list[str]:
    """Validation and test metrics side by side, a multilabel threshold, the test split's
    accesses, and the test rows copied in validation."""
    lines = ["", "## Numbers", "", "| metric | validation | test |", "|---|---|---|"]
    test = (info.get("final") or {}).get("metrics", {})
    interval = (info.get("final") or {}).get("interval") or {}
    for k, v in info["validation_metrics"].items():
        if isinstance(v, int | float) and k not in COUNTS:
            shown = _value(k, test[k]) if k in test else "not opened"
            if k in test and interval.get("metric") == k:  # the examples' noise on the test
                shown += f" (95%: {_value(k, interval['low'])} to {_value(k, interval['high'])})"
            lines.append(f"| {k} | {_value(k, v)} | {shown} |")
    threshold = info["validation_metrics"].get("threshold")
    if isinstance(threshold, dict):  # task multilabel: sigmoids, and the cut that makes a set
        lines += [
            "",
            f"Each label is predicted when its sigmoid probability is at least "
            f"{threshold['value']:g}, the decision threshold chosen on validation "
            f"({threshold['rule']}).",
        ]
    accesses = info.get("test_access_log") or []
    if accesses:
        times = "once" if len(accesses) == 1 else f"{len(accesses)} times"
        lines += ["", f"The sealed test split was opened {times} in this lab."]
    else:  # it read "opened 0 times"
        lines += ["", "The sealed test split has not been opened in this lab."]
    for a in accesses:
        lines.append(
            f"- {a['time']}: {a['run']}" + (f" ({a['reason']})" if a.get("reason") else "")
        )
    copied = (info.get("final") or {}).get("copied_in_validation") or {}
    if copied.get("rows"):
        lines += [
            "",
            f"{copied['rows']} of the {test.get('n')} test rows have an exact or near copy in "
            "validation, on which the run was chosen: the test score is not wholly independent "
            f"of that choice ({copied['pairs']} pairs, listed in the data version's "
            "duplicates.jsonl)." + _without(copied.get("without")),
        ]
    return lines


def _limitations_lines(lim: dict) -> list[str]:
    """What regressed, each guardrail's margin, the inputs cut, typical failures."""
    lines = ["", "## Limitations", ""]
    for r in lim["regressed"][:8]:
        lines.append(f"- {_regressed_line(r)}")
    for g in lim["guardrails"]:
        lines.append(f"- {_guardrail_line(g)}")
    t = lim["truncation"] or {}  # an image lab's inputs are not cut: none
    if t.get("n"):
        lines.append(
            f"- {t['truncated']} of {t['n']} validation inputs ({100 * t['rate']:.1f}%) are longer "
            f"than {t['max_length']} tokens and were cut."
        )
    if lim["typical_failures"]:
        lines += ["", "Typical failures:", ""]
        for f in lim["typical_failures"]:
            expected = _as_written(f.get("expected"))  # JSON, as the output it is set beside
            got = _as_written(f.get("predicted", f.get("output")))
            shown = "/".join(Path(f["id"]).parts[-2:])
            asked = " ".join(f["input"][:160].split())  # one line: a list item ends at a blank
            lines.append(f"- `{shown}`: expected {expected}, got {got}: “{asked}”")
    return lines


IMAGE_USE = [
    'inputs = processor(images=tunelab.open_image("photo.jpg"), return_tensors="pt")',
    "with torch.no_grad():",
    '    label = info["labels"][model(**inputs).logits.argmax(-1).item()]',
]
"""An image bundle's inputs, made as training made them, and its answer."""


def _use_lines(info: dict) -> list[str]:
    """How to load the bundle (a model built from scratch: on its own `base/`), the prompts as
    trained and the decoding as evaluated."""
    scratch, image = is_scratch(info), info["kind"] == "image"
    lines = [
        "",
        "## Use",
        "",
        "```python",
        *(["import torch"] if image else []),
        "import tunelab",
        "",
        f"model, {'processor' if image else 'tokenizer'}, info = tunelab.load_bundle("
        + ('"path/to/bundle")' if scratch else '"path/to/bundle", base="path/to/base")'),
        *(IMAGE_USE if image else []),
        "```",
        "",
    ]
    if image:
        lines += [
            "`tunelab.open_image` gives the processor the picture as training did: the first "
            "frame, upright as its EXIF orientation says, 16-bit grey scaled to 8 bits, "
            "transparency flattened onto white (the processor alone refuses RGBA and 16-bit "
            "images).",
            "",
        ]
    if info["kind"] == "causal" and info["task"] != "pretrain":
        lines += [_prompts_as_trained(info), ""]
    decoding = info.get("decoding")
    if decoding:
        lines += [
            f"Answers as evaluated: {decoding['strategy']} decoding (no sampling), at most "
            f"{decoding['max_new_tokens']} new tokens, stopping at "
            f"{decoding['stop_token_ids']} (token ids); {decoding['answer']}. The numbers "
            "above hold for these settings; a server's defaults (sampling, a shorter limit) "
            "answer otherwise.",
            "",
        ]
    return lines


def _regressed_line(r: dict) -> str:
    """`f1 of sport is -2.1 points against the reference (-4.0, -0.2, one seed): holds.`; a
    metric where less is better (bits per byte) by how much it rose."""
    where = "overall" if r["scope"] == "overall" else f"of {r['scope']}"
    if r.get("on"):
        where = f"on {r['on']}"
    seeds = {True: ", over the seeds", False: ", one seed"}.get(r.get("seeds"), "")  # older
    if r["metric"] in PLAIN:  # the interval is of the reduction: a negative one is a rise
        return (
            f"{r['metric']} {where} rose by {-r['delta']:.4f} against the reference "
            f"({-r['high']:.4f} to {-r['low']:.4f}{seeds}): {r['status']}."
        )
    return (
        f"{r['metric']} {where} is {100 * r['delta']:+.1f} points against the "
        f"reference ({100 * r['low']:+.1f}, {100 * r['high']:+.1f}{seeds}): {r['status']}."
    )


def _guardrail_line(g: dict) -> str:
    """`Guardrail json_valid (overall, may not drop): holds, its interval's worst end 81.7
    points inside the limit, at overall.` (it read "a drop of at most 0.0 points ... margin
    +81.7 points")."""
    name = g["metric"] + (f" on {g['on']}" if g.get("on") else "")
    plain = g["metric"] in PLAIN
    if g["max_drop"] == 0:
        limit = "may not rise" if plain else "may not drop"
    elif plain:
        limit = f"a rise of at most {g['max_drop']:.4f}"
    else:
        limit = f"a drop of at most {100 * g['max_drop']:.1f} points"
    head = f"Guardrail {name} ({g['scope']}, {limit}): {g['status']}"
    if g.get("margin") is None:
        return f"{head}, not checked: {g.get('not_checked')}."
    size = abs(g["margin"])
    margin = f"{size:.4f}" if plain else f"{100 * size:.1f} points"
    side = "inside" if g["margin"] >= 0 else "past"
    return f"{head}, its interval's worst end {margin} {side} the limit, at {g['worst']}."


def _without(without: dict | None) -> str:
    """` On the 426 test rows without one, macro_f1 is 93.6.`"""
    if not without or without.get("value") is None:
        return ""
    metric, value = without["metric"], _value(without["metric"], without["value"])
    return f" On the {without['n']} test rows without one, {metric} is {value}."


def _validation_lines(training: dict) -> list[str]:
    """What validation during training recorded: the overfitting warning, and the step whose
    weights these are when `training.keep: best` kept one before the last."""
    lines = []
    went = (training.get("validation") or {}).get("overfitting")
    if went:
        lines += ["", f"**Warning:** while it trained, {went['message']}."]
    kept = training.get("kept") or {}
    if kept.get("rule") == "best validation loss" and kept.get("step") != training.get("steps"):
        lines += [
            "",
            f"These are step {kept['step']}'s weights of the {training.get('steps')} it trained "
            f"(`training.keep: best`, validation loss {kept['validation_loss']:.4f}).",
        ]
    return lines
