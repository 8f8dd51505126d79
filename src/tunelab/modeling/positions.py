"""How many positions a base model has, read from its config.json before any weights load.

A model with learned position embeddings (BERT's 512, GPT-2's 1024) fails deep inside its
embedding layer ("index out of range in self") when a sequence is longer, so a command that
would run such a sequence is refused first, naming the fields to change. A rotary model
(`rope_*` or `rotary_*` in its config: Llama, Qwen, SmolLM2) computes any position; past its
training length it reads worse but runs, and is not refused here.
"""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.modeling.targets import model_folder

LIMIT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
"""Where a config.json states its positions (GPT-2's `n_positions` is the others' name)."""


OFFSET_TYPES = frozenset(
    {
        "roberta",
        "roberta-prelayernorm",
        "xlm-roberta",
        "xlm-roberta-xl",
        "camembert",
        "data2vec-text",
        "ibert",
        "longformer",
        "mpnet",
    }
)
"""Model types whose position ids start after the padding index (`padding_idx + 1`, fairseq's
way): roberta-base states 514 positions and takes 512 tokens; a sequence of the stated length
fails inside the model ("index 514 is out of bounds")."""


class PositionsError(TunelabError):
    """The spec's sequences are longer than the base model's positions."""


def position_limit(folder: Path) -> tuple[str, int] | None:
    """The config key of a table of learned positions and its size (the text model's, for a
    config that nests one under `text_config`); None for a rotary model or a config that states
    no limit."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the load says what is wrong with the folder
    if not isinstance(config, dict):
        return None
    for section, prefix in ((config, ""), (config.get("text_config") or {}, "text_config.")):
        if not isinstance(section, dict) or any(k.startswith(("rope", "rotary")) for k in section):
            continue  # a rotary model has no table of positions to run past
        for key in LIMIT_KEYS:
            value = section.get(key)
            if isinstance(value, int) and value > 0:
                pad = section.get("pad_token_id")
                if section.get("model_type") in OFFSET_TYPES and isinstance(pad, int):
                    usable = f"{key} {value} less pad_token_id {pad} + 1, where its positions start"
                    return prefix + usable, value - pad - 1
                return prefix + key, value
    return None


def needed_positions(spec, label_tokens: int = 0) -> int:
    """The most positions one sequence can take: `model.max_length`, plus
    `evaluation.max_new_tokens` for a task that generates (an evaluation prompt may fill
    `model.max_length`, and the answer follows it), or plus the longest label's
    `label_tokens` for a causal LM that scores labels after the prompt (0 for an encoder)."""
    if spec.task.generative:
        return spec.model.max_length + spec.evaluation.max_new_tokens
    return spec.model.max_length + label_tokens


def label_tokens(folder: Path, labels: list[str]) -> int:
    """The longest label's tokens by the model's own `tokenizer.json` (tokenizers alone, not
    transformers: this runs before any model loads); 0 without one (not counted)."""
    path = folder / "tokenizer.json"
    if not labels or not path.is_file():
        return 0
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    return max(len(tokenizer.encode(label, add_special_tokens=False).ids) for label in labels)


def require_positions(lab) -> None:
    """Refuse a spec whose sequences can be longer than the base model's positions (a model
    built from scratch is built with `model.max_length`'s; a GGUF file is not read here)."""
    spec = lab.spec
    folder, limit = _base_limit(lab)
    if limit is None:
        return
    scored = 0
    if spec.model_kind == "causal" and not spec.task.generative:
        labels = spec.task.labels or lab.store.data_manifest(lab.data_version)["labels"]
        scored = label_tokens(folder, labels)
    need = needed_positions(spec, scored)
    if need <= limit[1]:
        return
    key, value = limit
    where = lab.where("model.max_length")
    length = where if where.startswith("model.max_length=") else f"model.max_length ({where})"
    has = f"the base model's {value} ({key} in {folder / 'config.json'})"
    if spec.task.generative:
        raise PositionsError(
            f"{length} + evaluation.max_new_tokens = {spec.model.max_length} + "
            f"{spec.evaluation.max_new_tokens} = {need} positions, more than {has}: an "
            "evaluation prompt may fill model.max_length and its answer follows, and a longer "
            "sequence fails inside the model. "
            + _fix(lab, f"Lower either so that the sum is {value} or less.")
        )
    if scored:
        raise PositionsError(
            f"{length} + the longest label's {scored} tokens = {need} positions, more than "
            f"{has}: a scored label follows a prompt that may fill model.max_length, and a "
            "longer sequence fails inside the model. "
            + _fix(lab, f"Set model.max_length to {value - scored} or less.")
        )
    raise PositionsError(
        f"{length}: {need} positions, more than {has}: a longer sequence fails inside the model. "
        + _fix(lab, f"Set model.max_length to {value} or less.")
    )


def _fix(lab, advice: str) -> str:
    """What to do: change the spec, or, for a run's recorded spec (which stays as it trained),
    give it back the base it trained on."""
    if lab.recorded:
        return (
            f"Run {lab.recorded} keeps the spec it trained with: put back the base model it "
            "trained on, or train a new run."
        )
    return advice


def require_length(lab, tokens: int, option: str) -> None:
    """Refuse a length given on the command line (`size --seq-len`) that is more than the base
    model's positions, before any model loads (it failed in the probe with torch's own words)."""
    folder, limit = _base_limit(lab)
    if limit is not None and tokens > limit[1]:
        key, value = limit
        raise PositionsError(
            f"{option} {tokens}: more than the base model's {value} positions ({key} in "
            f"{folder / 'config.json'}): a longer sequence fails inside the model. Give "
            f"{option} {value} or less."
        )


def _base_limit(lab) -> tuple[Path | None, tuple[str, int] | None]:
    """The base model's folder and its table of positions (`position_limit`), or None where
    there is none to run past (a model built from scratch, an image model, a rotary one)."""
    if lab.spec.model.scratch or lab.spec.images:
        return None, None
    folder = model_folder(lab.spec.model, lab.path)
    return folder, position_limit(folder) if folder else None
