"""A bundle's template.json: the exact prompt its model was trained with."""

from __future__ import annotations

PROMPT_TOKENS = (
    "as trained: the input text tokenised alone (no special tokens, cut to fit "
    "max_length) between prompt_ids.before and prompt_ids.after; the filled prompt string "
    "tokenised whole can give other tokens where the text meets the template"
)
"""How a generative bundle's prompt was tokenised (template.json `tokenisation`)."""


def template_record(spec, tokenizer, record: dict) -> dict:
    """The exact prompt the model was trained with: chat template or plain, as text; for a
    language model (task pretrain), how its documents were packed; for an image classifier,
    what its processor did to every image (the run's `preprocessing`)."""
    if spec.images:
        return {"template": None, "kind": "image", "preprocessing": record.get("preprocessing")}
    from tunelab.modeling.template import PLACEHOLDER, make_template
    from tunelab.tasks.pretrain import sequence_length

    out = {
        "template": spec.model.template,
        "kind": spec.model_kind,
        "max_length": spec.model.max_length,
    }
    if spec.task.type == "pretrain":
        out |= {
            "template": None,
            "sequence_length": sequence_length(spec),
            "boundaries": spec.task.boundaries,
            "document_separator": tokenizer.eos_token,
        }
    elif spec.model_kind == "causal":
        template = make_template(tokenizer, spec.model.template, spec.task.instruction)
        out |= {
            "instruction": spec.task.instruction,
            "prompt": template.text[0] + PLACEHOLDER + template.text[1],
            "placeholder": PLACEHOLDER,
            "end_of_answer_token_id": template.end_id,
            "prompt_ids": {"before": template.prefix, "after": template.suffix},
            "tokenisation": PROMPT_TOKENS,
        }
    return out
