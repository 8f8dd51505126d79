"""What kind of network a base folder holds, read from its config.json before any weights load:
an encoder-decoder (BART, T5, mBART, Pegasus) is refused.

tunelab fine-tunes encoders as classifiers and decoder-only causal language models. Loaded
through either path, an encoder-decoder goes wrong without a word from transformers: BART as a
causal LM dropped its encoder and drew its embeddings and head at random (the run "completed",
its bundle reproduced none of its predictions), T5 failed inside the model, and BART as a
sequence classifier trained against a frozen, random `classification_head`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.errors import TunelabError


def require_not_encoder_decoder(folder: Path, what: str) -> None:
    """Refuse the base in `folder` (named `what` in the message) when its config says it is an
    encoder-decoder; a config that does not read is left to the load to name."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(config, dict) or not config.get("is_encoder_decoder"):
        return
    kind = config.get("model_type") or "unknown type"
    named = ", ".join(config.get("architectures") or []) or "no architectures listed"
    raise TunelabError(
        f"{what} is an encoder-decoder model ({kind}: {named}, is_encoder_decoder in "
        f"{folder / 'config.json'}): tunelab fine-tunes encoders as classifiers and "
        "decoder-only causal language models, and through either path an encoder-decoder "
        "loses half of itself (its encoder dropped, or a head left random). Choose a "
        "decoder-only base (Qwen, Llama, SmolLM2, Mistral) for generation, or an encoder (BERT, "
        "RoBERTa, ModernBERT) or a decoder for classification."
    )


def require_known_type(folder: Path, what: str, trusted: bool) -> None:
    """Refuse, naming `model.trust_remote_code`, a base whose classes exist only in its own
    Python code (`auto_map`, a model_type transformers does not know) where that code may not
    run: transformers' own refusal surfaced as an internal error. A known model_type loads
    with transformers' classes, its auto_map unread."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    if trusted or not auto_map:
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    kind = config.get("model_type")
    if kind in CONFIG_MAPPING_NAMES:
        return
    classes = ", ".join(auto_map) if isinstance(auto_map, dict) else str(auto_map)
    raise TunelabError(
        f"{what}: model_type {kind!r} in {folder / 'config.json'} is not one transformers "
        f"knows; its classes are the folder's own Python code (auto_map: {classes}), which "
        "runs only with model.trust_remote_code: true. Read that code first, then set it, or "
        "choose a model transformers knows."
    )
