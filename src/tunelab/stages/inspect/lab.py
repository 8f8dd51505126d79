"""`tunelab inspect`: the examples exactly as the trainer sees them, and what is wrong with them.

The view renders rows with the same code the trainer uses (`render.py`), then checks the
*collated* labels the loss is computed on, so a mistake anywhere between the template and the
loss (a prompt token trained, an end token hidden by padding, a target cut) shows here.
Blocking findings stop `tunelab run` unless it is given a recorded reason.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch

from tunelab.core.lab import Lab
from tunelab.data.balance import describe, imbalance
from tunelab.modeling.classifier_inputs import encode_classification
from tunelab.modeling.loss_positions import IGNORE
from tunelab.modeling.model import load_tokenizer
from tunelab.modeling.render import Rendered, Renderer, collate_causal, make_renderer
from tunelab.modeling.template import RenderError
from tunelab.modeling.token_text import token_texts
from tunelab.stages.inspect.findings import finding, row_finding
from tunelab.stages.inspect.format import format_findings
from tunelab.stages.inspect.special import special_text_findings
from tunelab.stages.inspect.turns import (
    system_prompt_finding,
    turn_findings,
    turn_view,
)
from tunelab.stages.inspect.windows import scored_past_training


def inspect_lab(lab: Lab, sample: int | None = None, split: str = "train") -> dict:
    """`sample` examples of each category (default 2, and then at most `SHOWN` in all)."""
    cap = SHOWN if sample is None else None
    sample = 2 if sample is None else sample
    version = lab.data_version
    labels = lab.store.data_manifest(version)["labels"]
    rows = lab.store.read_split(version, split)
    if lab.spec.task.type == "image_classification":  # no tokens: sizes, modes, contact sheets
        from tunelab.stages.inspect.images import image_view

        summary, findings = image_view(lab, rows, split)
        findings += _imbalance(rows) if len(labels) > 1 else []
        head = {"data_version": version, "split": split, "rows": len(rows), "kind": "images"}
        return head | {"summary": summary, "findings": findings, "examples": []}
    tokenizer = load_tokenizer(lab.spec.model, lab.path, version)
    out = {
        "data_version": version,
        "split": split,
        "rows": len(rows),
        "model_kind": lab.spec.model_kind,
        "template": lab.spec.model.template,
    }
    try:
        renderer = make_renderer(lab.spec, tokenizer, labels, lab.path)
    except RenderError as err:
        return out | {
            "findings": [finding("chat_template_missing", len(rows), None, str(err))],
            "examples": [],
            "summary": {},
        }
    chat_ignored = (
        renderer.kind == "causal"
        and bool(tokenizer.chat_template)
        and (lab.spec.model.template == "plain")
    )
    if renderer.kind == "encoder":
        summary, findings, examples = _encoder_view(renderer, rows, sample, cap)
    elif renderer.task.type == "pretrain":
        summary, findings, examples = _packed_view(renderer, rows, sample)
        findings += scored_past_training(lab, version, renderer)
    else:
        _, rejected = renderer.training(rows)
        limit = lab.spec.evaluation.max_new_tokens
        summary, findings, examples = causal_view(renderer, rows, rejected, sample, limit)
        if lab.spec.data.fields.conversations and split != "validation":
            validation = lab.store.read_split(version, "validation")
            findings += system_prompt_finding(rows, validation)
    if chat_ignored:
        findings.append(
            finding(
                "chat_template_ignored",
                len(rows),
                None,
                "the tokenizer ships a chat template but model.template is "
                "plain: an instruct model may answer better in its own format",
            )
        )
    if labels and len(labels) > 1 and not renderer.task.generative:
        findings.extend(_imbalance(rows))
    return out | {"summary": summary, "findings": findings, "examples": examples}


def blocking(findings: list[dict]) -> list[dict]:
    return [f for f in findings if f["blocking"]]


def training_findings(
    renderer: Renderer, rows: list[dict], rejected: list[dict], max_new_tokens: int | None = None
) -> list[dict]:
    """The findings `tunelab run` checks before it trains (no example views)."""
    if renderer.kind == "image":  # sizes and modes that tell the category: no contact sheets
        from tunelab.stages.inspect.images import image_findings

        return image_findings(rows) + _imbalance(rows)
    if renderer.kind == "encoder":
        return _imbalance(rows)
    if renderer.task.type == "pretrain":  # no prompt or target to check: the packing is recorded
        return []
    return causal_view(renderer, rows, rejected, 0, max_new_tokens)[1]


def _percentiles(lengths: list[int]) -> dict:
    """p50, p95 and max, the percentiles rounded up as `size` rounds its default length (one
    lab's p95 read 270 here and 271 there)."""
    arr = np.array(lengths or [0])
    return {
        "p50": math.ceil(float(np.percentile(arr, 50))),
        "p95": math.ceil(float(np.percentile(arr, 95))),
        "max": int(arr.max()),
    }


def causal_view(
    renderer: Renderer,
    rows: list[dict],
    rejected: list[dict],
    sample: int,
    max_new_tokens: int | None = None,
):
    """Summary, findings and `sample` token views of generative rows; with `max_new_tokens`
    (the evaluation's), answers that generation would cut are found too."""
    ok = {r["id"]: r for r in rows if r["id"] not in {x["id"] for x in rejected}}
    rendered = [renderer.render(r) for r in ok.values()]
    conversations = any(r.turns is not None for r in rendered) or any(
        x.get("kind", "target_truncated") != "target_truncated" for x in rejected
    )
    findings = (
        turn_findings(renderer, rendered, rejected)
        if conversations
        else _prompt_findings(renderer, rendered, rejected)
    )
    if max_new_tokens is not None:
        findings += _generation_findings(renderer, rendered, max_new_tokens)
    findings += format_findings(renderer, list(ok.values()))
    findings += special_text_findings(renderer, list(ok.values()))
    empty = [r.id for r in rendered if not r.teaches]
    if empty:
        findings.append(
            row_finding("empty_loss_mask", empty, "rows with no loss token teach nothing")
        )
    cut = [r for r in rendered if r.text_cut]
    end = renderer.template.end_id
    summary = {
        "tokens": _percentiles([len(r.input_ids) + r.text_cut for r in rendered]),
        "target_tokens": _percentiles([r.loss_tokens for r in rendered]),
        "inputs_truncated": len(cut),
        "targets_truncated": sum(
            x.get("kind", "target_truncated") == "target_truncated" for x in rejected
        ),
        "rows_not_rendered": sum(
            x.get("kind", "target_truncated") != "target_truncated" for x in rejected
        ),
        "rows_without_loss_tokens": len(empty),
        "end_token": renderer.tokenizer.convert_ids_to_tokens(end) if end is not None else None,
        "pad_is_end_token": renderer.pad_id == end,
    }
    if conversations:
        summary["turns"] = _percentiles([len(r.turns) for r in rendered])
        summary["turns_dropped"] = sum(r.turns_cut for r in rendered)
    picks = _sample([r.category for r in rendered], sample, total=max(sample * 2, 4))
    return summary, findings, [_token_view(renderer, rendered[i]) for i in picks]


def answer_tokens(renderer: Renderer, r: Rendered) -> int:
    """The tokens generation must produce before the end-of-answer token: the final
    assistant turn's (a conversation), else everything after the prompt, less the end token."""
    if r.turns:
        last = r.turns[-1]
        return last.end - last.body - 1
    return len(r.input_ids) - r.prompt_len - (renderer.template.end_id is not None)


def _generation_findings(renderer: Renderer, rendered: list, max_new_tokens: int) -> list[dict]:
    """Answers longer than `evaluation.max_new_tokens`: greedy decoding stops before they end,
    so they are never right, whatever the model learns."""
    long = sorted(
        ((answer_tokens(renderer, r), r.id) for r in rendered if r.loss_tokens), reverse=True
    )
    long = [(n, rid) for n, rid in long if n > max_new_tokens]
    if not long:
        return []
    return [
        row_finding(
            "answer_longer_than_generation",
            [rid for _, rid in long],
            f"answers longer than evaluation.max_new_tokens ({max_new_tokens}): generation "
            "stops before they end, so they can never be right; the longest is "
            f"{long[0][0]} tokens: set evaluation.max_new_tokens to {long[0][0]} or more",
        )
    ]


def _prompt_findings(renderer: Renderer, rendered: list, rejected: list[dict]) -> list[dict]:
    """Prompt + answer rows: the end token trained, no prompt token trained, targets whole,
    the input text cut (a warning)."""
    end = renderer.template.end_id
    no_eos, on_prompt = [], []
    for r in rendered:
        labels = collate_causal([r], renderer.pad_id, torch.device("cpu"))["labels"][0]
        trained = labels[1:][labels[1:] != IGNORE]  # position 0 is never predicted
        if end is None or not len(trained) or trained[-1].item() != end:
            no_eos.append(r.id)
        if (labels[: r.prompt_len] != IGNORE).any():
            on_prompt.append(r.id)
    findings = []
    if rejected:
        findings.append(
            row_finding(
                "target_truncated",
                [x["id"] for x in rejected],
                f"targets that cannot fit whole: {rejected[0]['reason']}",
            )
        )
    if no_eos:
        findings.append(
            row_finding(
                "eos_not_trained",
                no_eos,
                "the end-of-answer token is not in the loss: the model will "
                "not learn to stop (does the tokenizer have an EOS token?)",
            )
        )
    if on_prompt:
        findings.append(
            row_finding(
                "loss_on_prompt", on_prompt, "prompt tokens carry the loss (model.loss_on_prompt)"
            )
        )
    cut = [r for r in rendered if r.text_cut]
    if cut:
        findings.append(
            row_finding(
                "input_truncated",
                [r.id for r in cut],
                f"input text cut to fit model.max_length={renderer.max_length}",
            )
        )
    return findings


def _encoder_view(renderer: Renderer, rows: list[dict], sample: int, cap: int | None):
    encoded = encode_classification(renderer.tokenizer, rows, renderer.labels, renderer.max_length)
    truncated = [e for e in encoded if e.truncated]
    findings = []
    if truncated:
        findings.append(
            row_finding(
                "input_truncated",
                [r.id for r in truncated],
                f"inputs cut to model.max_length={renderer.max_length}",
            )
        )
    summary = {
        "tokens": _percentiles([e.tokens for e in encoded]),
        "inputs_truncated": len(truncated),
    }
    categories = [r["label"] for r in rows]
    picks = _sample(categories, sample, total=cap)
    summary["shown"] = {"examples": len(picks), "categories": len(set(categories))}
    summary["shown"]["of_categories"] = len({categories[i] for i in picks})
    examples = []
    for i in picks:
        e = encoded[i]
        examples.append(
            {
                "id": e.id,
                "category": rows[i]["label"],
                "tokens": _tokens(renderer, e.input_ids, [0] * len(e.input_ids)),
                "truncated_from": e.tokens if e.truncated else None,
                "target": rows[i]["label"],
                "loss": "one sigmoid per label (binary cross-entropy), on the label set"
                if "labels" in rows[i]  # task multilabel
                else "the class head, on the label",
            }
        )
    return summary, findings, examples


SHOWN = 24
"""Examples a classifier's inspection shows at most unless `--sample` is given: two of each of
77 intents was 959 lines."""


def _sample(categories: list[str], per: int, total: int | None) -> list[int]:
    """The first `per` examples of every category (at most `total` in all), in order."""
    taken: Counter = Counter()
    picks = []
    for i, c in enumerate(categories):
        if taken[c] < per and (total is None or len(picks) < total):
            taken[c] += 1
            picks.append(i)
    return picks


def _tokens(renderer: Renderer, ids: list[int], mask: list[int]) -> list[dict]:
    texts = token_texts(renderer.tokenizer, ids)
    return [{"id": i, "text": t, "loss": bool(m)} for i, t, m in zip(ids, texts, mask, strict=True)]


def _token_view(renderer: Renderer, r) -> dict:
    if r.turns is not None:  # a conversation: its turns, and the turns dropped to fit
        return turn_view(renderer, r, _tokens(renderer, r.input_ids, r.loss_mask))
    return {
        "id": r.id,
        "category": r.category,
        "tokens": _tokens(renderer, r.input_ids, r.loss_mask),
        "prompt_tokens": r.prompt_len,
        "text_cut": r.text_cut,
        "cut_side": renderer.truncation if r.text_cut else None,
        "cut_at": r.cut_at,
        "eos_trained": bool(
            r.loss_mask and r.loss_mask[-1] and r.input_ids[-1] == renderer.template.end_id
        ),
        "target": r.target_text,
    }


def _packed_view(renderer: Renderer, rows: list[dict], sample: int):
    """Task pretrain: the packing record, and the first `sample` packed sequences of each
    source with their targets (a position's token is learned from the one before it)."""
    from tunelab.modeling.packing import packing_record

    packed, _ = renderer.training(rows)
    summary = {"packing": packing_record(packed, renderer.pack_length, renderer.task.boundaries)}
    examples = []
    for i in _sample([p.source for p in packed], sample, total=None):
        p = packed[i]
        learned = [0] + [int(label != IGNORE) for label in p.labels[1:]]  # 0: nothing before
        pieces = ", ".join(f"{doc} at {start} ({n} tokens)" for doc, start, n in p.documents)
        examples.append(
            {
                "id": p.id,
                "category": p.source,
                "tokens": _tokens(renderer, p.input_ids, learned),
                "target": f"the text itself; documents: {pieces}; boundaries "
                f"{renderer.task.boundaries}",
            }
        )
    return summary, [], examples


def _imbalance(rows: list[dict]) -> list[dict]:
    multilabel = bool(rows) and "labels" in rows[0]  # rows per label, not per label set
    found = imbalance(
        (label for r in rows for label in r["labels"]) if multilabel else (r["label"] for r in rows)
    )
    if not found:
        return []
    return [finding("class_imbalance", found["n_smallest"], found["smallest"], describe(found))]
