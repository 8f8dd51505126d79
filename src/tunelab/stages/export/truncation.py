"""How many of a bundle's validation inputs were cut to fit `model.max_length`, counted as the
trainer renders them: a limitation the card states."""

from __future__ import annotations

from tunelab.core.lab import Lab


def truncation(spec, lab: Lab, manifest: dict, rows: dict, tokenizer) -> dict | None:
    """Validation inputs cut to fit `model.max_length`, as the trainer renders them (a
    language model's documents are scored in windows, never cut)."""
    from tunelab.modeling.classifier_inputs import encode_classification
    from tunelab.modeling.render import make_renderer

    values = list(rows.values())
    if spec.images:  # an image is resized, never cut to a length
        return None
    if spec.task.type == "pretrain":
        cut = []
    elif spec.model_kind == "encoder":
        encoded = encode_classification(
            tokenizer, values, manifest["labels"], spec.model.max_length
        )
        cut = [e.id for e in encoded if e.truncated]
    else:
        renderer = make_renderer(spec, tokenizer, manifest["labels"], lab.path)
        cut = [r["id"] for r in values if input_cut(renderer, r)]
    n = len(values)
    return {
        "split": "validation",
        "max_length": spec.model.max_length,
        "truncated": len(cut),
        "n": n,
        "rate": round(len(cut) / n, 4) if n else None,
    }


def input_cut(renderer, row: dict) -> bool:
    """The row's input is cut when rendered with its answer, as training renders it; an answer
    that leaves no room for any input (training rejects that row) counts as cut."""
    try:
        return renderer.render(row, with_target=True).text_cut > 0
    except ValueError:
        return True
