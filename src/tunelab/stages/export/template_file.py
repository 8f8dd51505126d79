"""A bundle's template.json: the exact prompt its model was trained with."""

from __future__ import annotations

PROMPT_TOKENS = (
    "as trained: prompt with the input text (cut to fit max_length) in place of placeholder, "
    "tokenised whole without adding special tokens (the template's own are in the string), "
    "after bos_ids; a server that fills the template and tokenises it gets the same ids"
)
"""How a generative bundle's prompt was tokenised (template.json `tokenisation`)."""

CONVERSATION_TOKENS = (
    "as trained: the conversation's turns before its final answer rendered by the bundle's chat "
    "template with its generation prompt (apply_chat_template(add_generation_prompt=True)), "
    "tokenised whole without adding special tokens; a conversation longer than max_length lost "
    "its oldest turns whole (the system turn stays); a server that renders the conversation "
    "and tokenises it gets the same ids"
)
"""How a conversation lab's bundle's prompt was tokenised (`modeling.conversation`)."""


def template_record(spec, tokenizer, record: dict) -> dict:
    """The exact prompt the model was trained with: chat template or plain, as text; for a
    language model (task pretrain), how its documents were packed; for an image classifier,
    what its processor did to every image (the run's `preprocessing`)."""
    if spec.images:
        return {"template": None, "kind": "image", "preprocessing": record.get("preprocessing")}
    from tunelab.modeling.template import make_template
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
        if spec.data.fields.conversations:  # no prompt of tunelab's: the chat template's own
            out |= {
                "conversation": True,
                "end_of_answer_token_id": template.end_id,
                "tokenisation": CONVERSATION_TOKENS,
            }
        else:
            out |= _filled_prompt(spec, template)
        if spec.task.generative:
            out["decoding"] = decoding(spec, tokenizer, template)
    return out


def _filled_prompt(spec, template) -> dict:
    """A single-input lab's prompt: the template around a placeholder for the text."""
    from tunelab.modeling.template import PLACEHOLDER

    return {
        "instruction": spec.task.instruction,
        "prompt": template.text[0] + PLACEHOLDER + template.text[1],
        "placeholder": PLACEHOLDER,
        "end_of_answer_token_id": template.end_id,
        "bos_ids": list(template.bos),
        "tokenisation": PROMPT_TOKENS,
    }


def decoding(spec, tokenizer, template) -> dict:
    """How the run's answers were generated (`training.evaluate.generate`): the settings its
    validation and test numbers hold for. A server's own defaults (a base's generation_config
    may sample) answer otherwise."""
    return {
        "strategy": "greedy",
        "max_new_tokens": spec.evaluation.max_new_tokens,
        "stop_token_ids": template.stop_ids(tokenizer),
        "answer": "the new tokens decoded without special tokens, whitespace stripped",
    }
