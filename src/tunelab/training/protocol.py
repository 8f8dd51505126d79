"""The evaluation protocol a run is recorded under, read from the spec alone (no torch): what a
comparison checks two runs share, and what makes a second baseline identical to the first."""

from __future__ import annotations

PROMPTS_TOKENISED = "whole"
"""How a causal model's prompts are tokenised (`Template.fill`): the filled template as one
string. Runs recorded before this key tokenised template and text apart; `compare` names the
difference, and a baseline is measured again rather than reused across it."""


EXACT_IN_FORMAT = "only in format"
"""When a generative answer is `exact_match`: every field (extraction) or the whole text
(format) right, in an answer the task's own format accepts (its JSON schema or regex). Runs
recorded before this key counted some answers the format refuses as exact; `compare` names the
difference, and a baseline is measured again rather than reused across it."""


def protocol(spec) -> dict:
    """What every run of a lab is evaluated under: split, batch size, lengths, decoding, and
    for a prompted causal model how its prompts are tokenised."""
    out = spec.evaluation.model_dump() | {
        "max_length": spec.model.max_length,
        "template": spec.model.template,
        "model_kind": spec.model_kind,
    }
    if spec.prompted:
        out["prompt_tokens"] = PROMPTS_TOKENISED
    if spec.task.type in ("extraction", "format"):
        out["exact_match"] = EXACT_IN_FORMAT
    return out
