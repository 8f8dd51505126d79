"""`export --merge`: LoRA folded into the base weights, and proof the outputs did not move.

Merging changes the arithmetic (W + BA computed once, then rounded to the weights' dtype), and
tools that merge silently sometimes change outputs more than that; so the merged model and
the adapter are both run on the bundle's stored validation sample and the largest logit
difference is recorded with the tolerance it was held to."""

from __future__ import annotations

from pathlib import Path

MERGE_ROWS = 32
"""Validation rows of the stored sample that the merged and adapter models both run."""
TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2, "float16": 1e-2}
"""Largest logit difference allowed between merged and adapter outputs, by dtype, relative to
the logits' own scale: `TOLERANCE × max(1, largest |logit|)`. Rounding W + BA once moves a
logit in proportion to its size, so a 135M language model's logits of ~20 (its merge moved them
9.2e-05 at most) are held to what a classifier's logits of ~1 are held to, in proportion."""


def merge_and_check(bundle: Path, spec, lab, labels: list[str], sample: list[dict]) -> dict:
    import torch

    from tunelab.modeling.model import load_trained

    device = lab.device
    adapter = load_trained(spec.model, lab.path, bundle, device, labels, spec.model_kind)
    rows = [s["row"] for s in sample[:MERGE_ROWS]]
    inputs, processor = _inputs(spec, lab, bundle, labels, rows, device)
    with torch.no_grad():
        before = adapter(**inputs).logits.float()
        merged = adapter.merge_and_unload()
        after = merged(**inputs).logits.float()
    merged.save_pretrained(bundle / "merged", safe_serialization=True)
    processor.save_pretrained(bundle / "merged")
    diff = float((after - before).abs().max())
    scale = max(1.0, float(before.abs().max()))
    tolerance = TOLERANCE[spec.model.dtype] * scale
    return {
        "examples": len(rows),
        "max_abs_logit_diff": diff,
        "tolerance": tolerance,
        "tolerance_rule": f"{TOLERANCE[spec.model.dtype]:g} x max(1, largest |logit|) "
        f"(largest |logit| {scale:.3g})",
        "agree": diff <= tolerance,
        "dtype": spec.model.dtype,
        "device": device.type,
    }


def _inputs(spec, lab, bundle: Path, labels: list[str], rows: list[dict], device):
    """The model inputs of the sample's rows (an image lab's images lie in the bundle's
    verify/), and the tokenizer or image processor that made them."""
    from tunelab.modeling.classifier_inputs import classifier_batch, encode_classification
    from tunelab.modeling.render import lab_renderer
    from tunelab.training.step import make_batch

    renderer = lab_renderer(spec, lab.path, labels, root=bundle / "verify")
    if spec.model_kind == "image":
        return classifier_batch(renderer.encode(rows), 0, device), renderer.processor
    if spec.model_kind == "encoder":
        examples = encode_classification(renderer.tokenizer, rows, labels, spec.model.max_length)
    else:
        examples = [_rendered(renderer, r) for r in rows]
    batch = make_batch(examples, renderer.pad_id, device)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    return inputs, renderer.tokenizer


def _rendered(renderer, row: dict):
    """The row as training renders it, or its prompt alone when its answer leaves no room for
    any input (training rejects that row; the prompt still compares the two forms)."""
    try:
        return renderer.render(row, with_target=True)
    except ValueError:
        return renderer.render(row, with_target=False)
